// TRUST_PROXY (contract.md, configuration table; server/http/client-address.ts), driven through
// real servers: one without it, where X-Forwarded-For is ignored (a spoofed header buys no
// extra budget), and one with TRUST_PROXY=loopback, as behind a proxy on the same host, where
// the forwarded client is the address every door, every per-address limit, the request logs and
// the loopback-only gates use. The test client connects from 127.0.0.1: the "proxy".
import { randomBytes } from "node:crypto";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientFrames, trpcSocketUrl } from "../server/http/trpc-ws-protocol.ts";
import { createLogger } from "../server/logger.ts";
import { restClient, type ApiResponse, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

type LogLine = Record<string, any>;

/** A server with these settings, its log lines kept. */
function serverWith(overrides: Record<string, string>) {
  const ctx = {} as { server: TestServer; api: RestClient; output: string[]; lines(): LogLine[] };
  ctx.output = [];
  ctx.lines = () =>
    ctx.output
      .join("")
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
  beforeAll(async () => {
    const logger = createLogger("debug", { write: (line: string) => void ctx.output.push(line) });
    ctx.server = await startTestServer(overrides, { logger });
    ctx.api = restClient(ctx.server.url);
  });
  afterAll(() => ctx.server?.close());
  return ctx;
}

const forwarded = (address: string) => ({ headers: { "X-Forwarded-For": address } });
const freshId = (label: string) => `${label}-${randomBytes(6).toString("hex")}`;

const login = (api: RestClient, user: RegisteredUser, password: string, forwardedFor?: string) =>
  api.post(
    "/api/v1/auth/app/login",
    { email: user.email, password },
    forwardedFor === undefined ? {} : forwarded(forwardedFor),
  );

/** Five wrong passwords, all refused as wrong (422): the sign-in budget of e-mail + address spent. */
async function spendSignInBudget(api: RestClient, user: RegisteredUser, forwardedFor: string | undefined) {
  for (let attempt = 1; attempt <= 5; attempt++) {
    expect((await login(api, user, "wrong-password", forwardedFor)).status, `attempt ${attempt}`).toBe(422);
  }
}

function expectThrottled(response: ApiResponse) {
  expect(response.status).toBe(429);
  expect(response.body).toEqual({ message: "Too Many Attempts." });
}

/** A request log line of the request with this id (logged once its response has ended). */
const completionOf = (ctx: { lines(): LogLine[] }, reqId: string) =>
  until(
    () => ctx.lines().find((line) => line.reqId === reqId && String(line.msg).startsWith("request ")),
    `the line of ${reqId}`,
  );

/** One call over a bare WebSocket whose upgrade carried these headers: its answer frame. */
async function overWebSocket(
  url: string,
  headers: Record<string, string>,
  path: string,
  input: unknown,
  method: "query" | "mutation" = "mutation",
): Promise<any> {
  const socket = new WebSocket(trpcSocketUrl(url, { connectionParams: false }), { headers });
  try {
    await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
    const answer = new Promise<any>((resolve) =>
      socket.on("message", (data) => {
        const frame = JSON.parse(String(data));
        if (frame.id === 1) resolve(frame);
      }),
    );
    socket.send(clientFrames.request(1, method, path, { input }));
    return await answer;
  } finally {
    socket.close();
  }
}

const httpStatusOf = (frame: any): number => (frame.error ? frame.error.data?.httpStatus : 200);

async function createWebhook(api: RestClient, owner: RegisteredUser) {
  const { workspaceId, channelId } = await createWorkspaceWithGeneral(api, owner);
  const response = await api.post(
    `/api/v1/workspaces/${workspaceId}/webhooks`,
    { name: "CI", default_channel_id: channelId },
    { token: owner.token },
  );
  expect(response.status).toBe(201);
  return { workspaceId, hook: response.body.data as { id: string; secret: string } };
}

async function webhookLogIps(api: RestClient, owner: RegisteredUser, workspaceId: string, hookId: string) {
  const response = await api.get(`/api/v1/workspaces/${workspaceId}/webhooks/${hookId}/requests`, {
    token: owner.token,
  });
  expect(response.status).toBe(200);
  return (response.body.data as { ip: string }[]).map((entry) => entry.ip);
}

describe("without TRUST_PROXY: X-Forwarded-For is ignored", () => {
  const ctx = serverWith({});

  it("a spoofed header buys no extra sign-in attempts", async () => {
    const user = await registerUser(ctx.api);
    for (let attempt = 1; attempt <= 5; attempt++) {
      // A different "client" each time: the same address all the same.
      const response = await login(ctx.api, user, "wrong-password", `203.0.113.${attempt}`);
      expect(response.status, `attempt ${attempt}`).toBe(422);
    }
    expectThrottled(await login(ctx.api, user, user.password, "198.51.100.77"));
    expectThrottled(await login(ctx.api, user, user.password));
  });

  it("a spoofed header buys no extra invite previews, over HTTP, tRPC and WebSocket alike", async () => {
    const remaining = async (response: ApiResponse) => Number(response.headers.get("x-ratelimit-remaining"));
    const first = await remaining(await ctx.api.get("/api/v1/invites/unknown-1", forwarded("203.0.113.1")));
    const second = await remaining(await ctx.api.get("/api/v1/invites/unknown-2", forwarded("203.0.113.2")));
    expect(second).toBe(first - 1);
    const rpc = await fetch(
      `${ctx.server.url}/trpc/invites.preview?input=${encodeURIComponent(JSON.stringify({ token: "unknown-3" }))}`,
      forwarded("203.0.113.3"),
    );
    expect(Number(rpc.headers.get("x-ratelimit-remaining"))).toBe(first - 2);
  });

  it("the request log, the webhook request log and /metrics go by the socket's address", async () => {
    const id = freshId("spoofed");
    await fetch(`${ctx.server.url}/healthz`, { headers: { "X-Request-Id": id, "X-Forwarded-For": "203.0.113.9" } });
    expect((await completionOf(ctx, id)).req.ip).toBe("127.0.0.1");

    const owner = await registerUser(ctx.api);
    const { workspaceId, hook } = await createWebhook(ctx.api, owner);
    const posted = await fetch(`${ctx.server.url}/webhooks/${hook.id}/messages`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-Service-Webhook-Secret": "wrong",
        "X-Forwarded-For": "203.0.113.9",
      },
      body: JSON.stringify({ content: "hello" }),
    });
    expect(posted.status).toBe(401);
    expect(await webhookLogIps(ctx.api, owner, workspaceId, hook.id)).toEqual(["127.0.0.1"]);

    // A loopback client is loopback, whatever it forwards.
    expect((await fetch(`${ctx.server.url}/metrics`, forwarded("203.0.113.9"))).status).toBe(200);
  });
});

describe("with TRUST_PROXY=loopback: the client is the one the local proxy forwarded", () => {
  const ctx = serverWith({ TRUST_PROXY: "loopback" });

  it("gives two clients behind one proxy separate sign-in budgets", async () => {
    const user = await registerUser(ctx.api);
    await spendSignInBudget(ctx.api, user, "203.0.113.10");
    expectThrottled(await login(ctx.api, user, user.password, "203.0.113.10"));
    // Another client behind the same proxy has its own five tries.
    expect((await login(ctx.api, user, "wrong-password", "203.0.113.11")).status).toBe(422);
    expect((await login(ctx.api, user, user.password, "203.0.113.11")).status).toBe(200);
    // The proxy's own requests (no header) are the proxy's address: a budget of their own too.
    expect((await login(ctx.api, user, user.password)).status).toBe(200);
  });

  it("skips a trusted hop appended after the client, and does not believe what the client wrote", async () => {
    const user = await registerUser(ctx.api);
    await spendSignInBudget(ctx.api, user, "203.0.113.20");
    // A second local proxy in the chain: the client is still 203.0.113.20.
    expectThrottled(await login(ctx.api, user, user.password, "203.0.113.20, 127.0.0.1"));
    expectThrottled(await login(ctx.api, user, user.password, "203.0.113.20, ::1, 127.0.0.5"));
    // A client forging a fresh address on the left: the proxy appended the real one.
    expectThrottled(await login(ctx.api, user, user.password, "198.51.100.1, 203.0.113.20"));
    // A mapped address is the same client.
    expectThrottled(await login(ctx.api, user, user.password, "::ffff:203.0.113.20"));
    // Behind the same two hops, another client is another budget.
    expect((await login(ctx.api, user, user.password, "203.0.113.21, 127.0.0.1")).status).toBe(200);
  });

  it("gives each client its own invite preview budget", async () => {
    for (let preview = 1; preview <= 30; preview++) {
      const response = await ctx.api.get(`/api/v1/invites/unknown-${preview}`, forwarded("203.0.113.30"));
      expect(response.status, `preview ${preview}`).toBe(404);
    }
    const spent = await ctx.api.get("/api/v1/invites/unknown-after", forwarded("203.0.113.30"));
    expectThrottled(spent);
    const other = await ctx.api.get("/api/v1/invites/unknown-after", forwarded("203.0.113.31"));
    expect(other.status).toBe(404);
    expect(other.headers.get("x-ratelimit-remaining")).toBe("29");
    // tRPC over HTTP decides the same way.
    const rpc = (address: string) =>
      fetch(
        `${ctx.server.url}/trpc/invites.preview?input=${encodeURIComponent(JSON.stringify({ token: "unknown" }))}`,
        forwarded(address),
      );
    expect((await rpc("203.0.113.30")).status).toBe(429);
    expect((await rpc("203.0.113.31")).headers.get("x-ratelimit-remaining")).toBe("28");
  });

  it("the WebSocket upgrade's forwarded address is the connection's, for every call on it", async () => {
    const user = await registerUser(ctx.api);
    const wrong = { email: user.email, password: "wrong-password" };
    for (let attempt = 1; attempt <= 5; attempt++) {
      const frame = await overWebSocket(ctx.server.url, { "X-Forwarded-For": "203.0.113.40" }, "auth.login", wrong);
      expect(httpStatusOf(frame), `attempt ${attempt}`).toBe(422);
    }
    const right = { email: user.email, password: user.password };
    const throttled = await overWebSocket(ctx.server.url, { "X-Forwarded-For": "203.0.113.40" }, "auth.login", right);
    expect(httpStatusOf(throttled)).toBe(429);
    // The same client over REST: the same budget.
    expectThrottled(await login(ctx.api, user, user.password, "203.0.113.40"));
    const other = await overWebSocket(ctx.server.url, { "X-Forwarded-For": "203.0.113.41" }, "auth.login", right);
    expect(httpStatusOf(other)).toBe(200);

    const id = freshId("socket");
    const socket = new WebSocket(trpcSocketUrl(ctx.server.url), {
      headers: { "X-Request-Id": id, "X-Forwarded-For": "2001:db8::42, ::1" },
    });
    await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
    const connected = await until(
      () => ctx.lines().find((line) => line.reqId === id && line.msg === "websocket connected"),
      "the connection's line",
    );
    socket.close();
    expect(connected.ip).toBe("2001:db8::42");
  });

  it("the request log records the forwarded address, on every door", async () => {
    const user = await registerUser(ctx.api);
    const sseQuery = new URLSearchParams({ connectionParams: JSON.stringify({ token: user.token }) });
    const form = new FormData();
    form.append("file", new Blob(["hello"], { type: "text/plain" }), "hello.txt");
    const doors: [string, string, RequestInit][] = [
      ["rest", "/api/v1/me", { headers: { Authorization: `Bearer ${user.token}` } }],
      ["trpc", "/trpc/me.get", { headers: { Authorization: `Bearer ${user.token}` } }],
      ["file", "/api/v1/files", { method: "POST", headers: { Authorization: `Bearer ${user.token}` }, body: form }],
      ["webhook", "/webhooks/whk_none/messages", { method: "POST", body: "{}" }],
      ["plain", "/healthz", {}],
    ];
    for (const [door, path, init] of doors) {
      const id = freshId(door);
      const headers = {
        ...(init.headers as Record<string, string>),
        "X-Request-Id": id,
        "X-Forwarded-For": "203.0.113.50",
      };
      const response = await fetch(ctx.server.url + path, { ...init, headers });
      await response.arrayBuffer();
      expect((await completionOf(ctx, id)).req, door).toMatchObject({ ip: "203.0.113.50" });
    }
    // SSE: the stream's line, once it has ended.
    const id = freshId("sse");
    const controller = new AbortController();
    const sse = await fetch(`${ctx.server.url}/trpc/events.onUser?${sseQuery}`, {
      headers: { Accept: "text/event-stream", "X-Request-Id": id, "X-Forwarded-For": "203.0.113.51" },
      signal: controller.signal,
    });
    expect(sse.status).toBe(200);
    await sse.body!.getReader().read();
    controller.abort();
    expect((await completionOf(ctx, id)).req).toMatchObject({ ip: "203.0.113.51" });
  });

  it("the webhook request log records the forwarded address", async () => {
    const owner = await registerUser(ctx.api);
    const { workspaceId, hook } = await createWebhook(ctx.api, owner);
    const post = (secret: string, forwardedFor: string) =>
      fetch(`${ctx.server.url}/webhooks/${hook.id}/messages`, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "X-Service-Webhook-Secret": secret,
          "X-Forwarded-For": forwardedFor,
        },
        body: JSON.stringify({ content: "deployed" }),
      });
    expect((await post(hook.secret, "198.51.100.60, 127.0.0.1")).status).toBe(201);
    expect((await post("wrong", "[2001:db8::60]:443")).status).toBe(401);
    expect(await webhookLogIps(ctx.api, owner, workspaceId, hook.id)).toEqual(["2001:db8::60", "198.51.100.60"]);
  });

  it("/metrics without METRICS_TOKEN: a visitor through the local proxy is not loopback", async () => {
    for (const forwardedFor of ["203.0.113.70", "127.0.0.1, 203.0.113.70", "[2001:db8::70]:1234"]) {
      const response = await fetch(`${ctx.server.url}/metrics`, forwarded(forwardedFor));
      expect(response.status, forwardedFor).toBe(403);
      expect(await response.json()).toEqual({ message: "Set METRICS_TOKEN to allow scrapes from other hosts." });
    }
    // Plain loopback (a scrape on the host itself, no proxy in between) is answered.
    expect((await fetch(`${ctx.server.url}/metrics`)).status).toBe(200);
    // A loopback client forwarded by a loopback proxy is loopback.
    expect((await fetch(`${ctx.server.url}/metrics`, forwarded("127.0.0.1"))).status).toBe(200);
  });

  it("the admin hand-over answers loopback only: a forwarded visitor is not", async () => {
    // Unsigned: past the loopback gate the answer is 401; refused at the gate, 404.
    const send = (headers: Record<string, string>) =>
      fetch(`${ctx.server.url}/internal/admin-command`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Admin-Timestamp": "0", ...headers },
        body: JSON.stringify({ args: ["user:plan"] }),
      });
    const visitor = await send({ "X-Forwarded-For": "203.0.113.80" });
    expect(visitor.status).toBe(404);
    expect(await visitor.json()).toEqual({ message: "Not found." });
    expect((await send({ "X-Forwarded-For": "127.0.0.1, 203.0.113.80" })).status).toBe(404);
    // The CLI on the host itself reaches the gate's other side.
    expect((await send({})).status).toBe(401);
  });
});
