// Request logs (server/http/request-log.ts): one line per request with its method, redacted
// target, status and duration; a request id the client may choose (X-Request-Id), returned on
// every answer and carried by every line logged while the request is served; no credential
// in any line.
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientFrames, trpcSocketUrl } from "../server/http/trpc-ws-protocol.ts";
import { createLogger } from "../server/logger.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

type LogLine = Record<string, any>;

const output: string[] = [];
const lines = (): LogLine[] =>
  output
    .join("")
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
let server: TestServer;
let api: RestClient;
let user: RegisteredUser;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The completion line of the request with this id (logged once its response has ended). */
const completionOf = (reqId: string) =>
  until(() => lines().find((line) => line.reqId === reqId && line.msg.startsWith("request ")), `the line of ${reqId}`);

const freshId = (label: string) => `${label}-${randomBytes(6).toString("hex")}`;

beforeAll(async () => {
  const logger = createLogger("debug", { write: (line: string) => void output.push(line) });
  server = await startTestServer({}, { logger });
  api = restClient(server.url);
  user = await registerUser(api);
});
afterAll(() => server?.close());

describe("the request id", () => {
  it("is the client's X-Request-Id when it sends a sane one, returned and on the completion line", async () => {
    const id = freshId("client.trace");
    const response = await api.get("/api/v1/me", { token: user.token, headers: { "X-Request-Id": id } });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-request-id")).toBe(id);
    const line = await completionOf(id);
    expect(line).toMatchObject({ req: { method: "GET", url: "/api/v1/me" }, res: { statusCode: 200 }, level: 30 });
    expect(typeof line.responseTime).toBe("number");
  });

  it("is generated (a UUID) when the client sends none, or one too long or with spaces", async () => {
    for (const sent of [undefined, "x".repeat(129), "two words", 'quote"d']) {
      const response = await fetch(`${server.url}/healthz`, { headers: sent ? { "X-Request-Id": sent } : {} });
      const id = response.headers.get("x-request-id")!;
      expect(id).toMatch(UUID);
      expect((await completionOf(id)).req).toEqual({ method: "GET", url: "/healthz", ip: "127.0.0.1" });
    }
  });

  it("comes back on every kind of answer: REST, tRPC, plain routes, 404, 400", async () => {
    const targets = ["/api/v1/me", "/trpc/me.get", "/readyz", "/api/v1/openapi.json", "/no/such/route", "/docs"];
    for (const target of targets) {
      const id = freshId("every");
      const response = await fetch(server.url + target, { headers: { "X-Request-Id": id } });
      expect(response.headers.get("x-request-id"), target).toBe(id);
      expect((await completionOf(id)).res.statusCode).toBe(response.status);
    }
    const malformed = await fetch(`${server.url}/api/v1/auth/app/login`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Request-Id": "bad-1" },
      body: "{not json",
    });
    expect(malformed.status).toBe(400);
    expect(malformed.headers.get("x-request-id")).toBe("bad-1");
  });

  it("is returned in the WebSocket handshake and logged with the connection", async () => {
    const id = freshId("socket");
    const socket = new WebSocket(`${server.url.replace("http", "ws")}/trpc`, { headers: { "X-Request-Id": id } });
    const upgrade = await new Promise<{ headers: Record<string, unknown> }>((resolve, reject) => {
      socket.once("upgrade", resolve);
      socket.once("error", reject);
    });
    expect(upgrade.headers["x-request-id"]).toBe(id);
    await until(() => lines().find((line) => line.reqId === id && line.msg === "websocket connected"), "connected");
    socket.close();
    const closed = await until(() => lines().find((line) => line.reqId === id && line.msg === "websocket closed"));
    expect(typeof closed.durationMs).toBe("number");
  });
});

describe("secrets", () => {
  it("never reach the log: bearer token, cookie, webhook secret and signature, tokens in the query or path", async () => {
    const secrets = {
      cookie: `cookie-${randomBytes(8).toString("hex")}`,
      webhookSecret: `hook-${randomBytes(8).toString("hex")}`,
      signature: `sig-${randomBytes(8).toString("hex")}`,
      queryToken: `query-${randomBytes(8).toString("hex")}`,
      invite: `invite${randomBytes(8).toString("hex")}`,
      input: `input-${randomBytes(8).toString("hex")}`,
    };
    const headers = {
      Authorization: `Bearer ${user.token}`,
      Cookie: `chat_session=${secrets.cookie}`,
      "X-Service-Webhook-Secret": secrets.webhookSecret,
      "X-Service-Signature": `t=1,v1=${secrets.signature}`,
    };
    const ids: string[] = [];
    const targets = [
      `/api/v1/me?token=${secrets.queryToken}`,
      `/api/v1/invites/${secrets.invite}`,
      `/api/v1/auth/email/verify/1/abc?expires=1&signature=${secrets.signature}`,
      `/trpc/me.get?connectionParams=1&input=${encodeURIComponent(JSON.stringify({ token: secrets.input }))}`,
      "/webhooks/whk_none/messages",
    ];
    for (const target of targets) {
      const response = await fetch(server.url + target, {
        method: target.startsWith("/webhooks") ? "POST" : "GET",
        headers,
        body: target.startsWith("/webhooks")
          ? JSON.stringify({ content: "hi", secret: secrets.webhookSecret })
          : undefined,
      });
      ids.push(response.headers.get("x-request-id")!);
    }
    for (const id of ids) await completionOf(id);
    const invite = await completionOf(ids[1]!);
    expect(invite.req.url).toBe("/api/v1/invites/[redacted]");
    const text = output.join("");
    for (const secret of [user.token, ...Object.values(secrets)]) expect(text).not.toContain(secret);
  });
});

describe("a request that fails", () => {
  let workspaceId: string;
  beforeAll(async () => {
    ({ workspaceId } = await createWorkspaceWithGeneral(api, user));
    // Every new message now fails inside PostgreSQL: a real 500.
    await server.app.deps.db.execute(sql.raw("alter table messages add constraint log_probe check (false) not valid"));
  });
  afterAll(() => server.app.deps.db.execute(sql.raw("alter table messages drop constraint log_probe")));

  it("logs its error with the request id of its completion line (REST, tRPC over HTTP) or handshake (WebSocket)", async () => {
    const channels = await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: user.token });
    const channelId = channels.body.data[0].id as string;
    const restId = freshId("rest-fails");
    const rest = await api.post(
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
      { content: "never stored" },
      { token: user.token, headers: { "X-Request-Id": restId } },
    );
    expect(rest.status).toBe(500);
    expect(rest.headers.get("x-request-id")).toBe(restId);
    expect((await completionOf(restId)).level).toBe(50);
    const restError = lines().find((line) => line.reqId === restId && line.msg === "request failed");
    expect(restError?.err.type).toBeTruthy();

    const rpcId = freshId("rpc-fails");
    const rpc = await fetch(`${server.url}/trpc/messages.post`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${user.token}`, "X-Request-Id": rpcId },
      body: JSON.stringify({ workspace_id: workspaceId, channel_id: channelId, content: "never stored" }),
    });
    expect(rpc.status).toBe(500);
    expect(rpc.headers.get("x-request-id")).toBe(rpcId);
    await completionOf(rpcId);
    expect(
      lines()
        .filter((line) => line.reqId === rpcId)
        .map((line) => line.msg),
    ).toContain("rpc failed");
    // Over WebSocket, a call's error carries the id of the connection's handshake.
    const socketId = freshId("socket-fails");
    const socket = new WebSocket(trpcSocketUrl(server.url), { headers: { "X-Request-Id": socketId } });
    await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
    socket.send(clientFrames.connectionParams({ token: user.token }));
    const input = { workspace_id: workspaceId, channel_id: channelId, content: "never stored" };
    socket.send(clientFrames.request(1, "mutation", "messages.post", { input }));
    await until(
      () => lines().find((line) => line.reqId === socketId && line.msg === "rpc failed"),
      "the socket's error",
    );
    socket.close();
    // Each error line once: the id is not written twice on a line (the request's logger and the scope).
    expect(output.join("").match(new RegExp(`"reqId":"${rpcId}"`, "g"))!.length).toBe(
      lines().filter((line) => line.reqId === rpcId).length,
    );
  });
});
