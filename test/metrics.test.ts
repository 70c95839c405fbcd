// GET /metrics (server/metrics.ts, server/http/metrics-route.ts): Prometheus text whose series
// move with what the service does (HTTP requests by route template, WebSocket connections,
// subscriptions and delivered events, queue depth, job runs and failures), answered to loopback
// clients when METRICS_TOKEN is unset and only with the bearer token when it is set.
import { networkInterfaces } from "node:os";
import type { IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileTrustedRanges } from "../server/http/client-address.ts";
import { metricsRefusal } from "../server/http/metrics-route.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { RawSocket } from "./helpers/raw-socket.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

/** The value of one sample, or undefined when the series is absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return undefined;
}

/** A non-loopback IPv4 address of this machine, to reach the server as another host would. */
const outsideAddress = Object.values(networkInterfaces())
  .flat()
  .find((entry) => entry && entry.family === "IPv4" && !entry.internal)?.address;

let server: TestServer;
let api: RestClient;
let owner: RegisteredUser;
const scrape = async () => {
  const response = await fetch(`${server.url}/metrics`);
  expect(response.status).toBe(200);
  return response.text();
};

beforeAll(async () => {
  // Listening on every address, so that a request can come from outside loopback; mail goes to
  // a closed port, so the verification mail's job fails and is retried.
  server = await startTestServer({ HOST: "0.0.0.0", SMTP_URL: "smtp://127.0.0.1:9" });
  api = restClient(server.url);
  owner = await registerUser(api);
});
afterAll(() => server?.close());

describe("GET /metrics without METRICS_TOKEN", () => {
  it("answers Prometheus text to a loopback client", async () => {
    const response = await fetch(`${server.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    expect(text).toContain("# TYPE http_request_duration_seconds histogram");
    expect(text).toContain("# TYPE process_cpu_user_seconds_total counter");
  });

  it.runIf(outsideAddress)("refuses a client from another address with 403", async () => {
    const port = new URL(server.url).port;
    const response = await fetch(`http://${outsideAddress}:${port}/metrics`);
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({ message: "Set METRICS_TOKEN to allow scrapes from other hosts." });
    // The same client is served the API: only /metrics is closed to it.
    expect((await fetch(`http://${outsideAddress}:${port}/healthz`)).status).toBe(200);
  });

  it("decides by the socket's address without TRUST_PROXY, never by a forwarding header", () => {
    const request = (remoteAddress: string, headers: Record<string, string> = {}) =>
      ({ socket: { remoteAddress }, headers }) as unknown as IncomingMessage;
    const none = compileTrustedRanges([]);
    for (const loopback of ["127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"])
      expect(metricsRefusal(request(loopback), undefined, none)).toBeUndefined();
    expect(metricsRefusal(request("10.0.0.7", { "x-forwarded-for": "127.0.0.1" }), undefined, none)?.status).toBe(403);
    expect(metricsRefusal(request("::ffff:10.0.0.7"), undefined, none)?.status).toBe(403);
    // The header is not read at all: a loopback peer forwarding someone is still loopback.
    expect(metricsRefusal(request("127.0.0.1", { "x-forwarded-for": "203.0.113.9" }), undefined, none)).toBeUndefined();
  });

  it("with TRUST_PROXY, decides by the forwarded client: a visitor behind a local proxy is not loopback", () => {
    const request = (remoteAddress: string, headers: Record<string, string> = {}) =>
      ({ socket: { remoteAddress }, headers }) as unknown as IncomingMessage;
    const loopback = compileTrustedRanges(["127.0.0.0/8", "::1/128"]);
    expect(
      metricsRefusal(request("127.0.0.1", { "x-forwarded-for": "203.0.113.9" }), undefined, loopback)?.status,
    ).toBe(403);
    expect(
      metricsRefusal(request("::1", { "x-forwarded-for": "127.0.0.1, 203.0.113.9" }), undefined, loopback)?.status,
    ).toBe(403);
    expect(metricsRefusal(request("127.0.0.1"), undefined, loopback)).toBeUndefined();
    // An untrusted peer's header is still ignored.
    expect(metricsRefusal(request("10.0.0.7", { "x-forwarded-for": "127.0.0.1" }), undefined, loopback)?.status).toBe(
      403,
    );
  });
});

describe("what the metrics show", () => {
  it("times HTTP requests by route template and status, never by raw id", async () => {
    const { workspaceId } = await createWorkspaceWithGeneral(api, owner);
    const route = "/api/v1/workspaces/{workspace_id}/channels";
    const before = sample(await scrape(), "http_request_duration_seconds_count", { route, status: "200" }) ?? 0;
    await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
    await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
    await api.get(`/api/v1/no-such-thing/${workspaceId}`, { token: owner.token });
    const text = await until(async () => {
      const current = await scrape();
      const count = sample(current, "http_request_duration_seconds_count", { route, status: "200", method: "GET" });
      return count !== undefined && count >= before + 2 ? current : undefined;
    }, "the channel list requests to be counted");
    expect(
      sample(text, "http_request_duration_seconds_count", { route: "(unmatched)", status: "404" }),
    ).toBeGreaterThan(0);
    expect(
      sample(text, "http_request_duration_seconds_count", {
        route: "/api/v1/workspaces",
        method: "POST",
        status: "201",
      }),
    ).toBeGreaterThan(0);
    expect(text).not.toContain(workspaceId);
  });

  it("counts WebSocket connections, live subscriptions and delivered events", async () => {
    const { workspaceId, channelId } = await createWorkspaceWithGeneral(api, owner);
    const before = await scrape();
    const delivered = sample(before, "chat_live_events_delivered_total") ?? 0;

    const socket = await RawSocket.signedIn(server.url, owner.token);
    socket.request(1, "subscription", "messages.onChannel", {
      input: { workspace_id: workspaceId, channel_id: channelId },
    });
    await socket.next((frame) => frame.id === 1 && frame.result?.type === "started");
    const open = await scrape();
    expect(sample(open, "chat_websocket_connections")).toBeGreaterThanOrEqual(1);
    expect(sample(open, "chat_live_subscriptions")).toBeGreaterThanOrEqual(1);

    await api.post(
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
      { content: "counted" },
      { token: owner.token },
    );
    await socket.next((frame) => frame.id === 1 && frame.result?.type === "data");
    expect(sample(await scrape(), "chat_live_events_delivered_total")).toBeGreaterThan(delivered);

    socket.stop(1);
    await socket.next((frame) => frame.id === 1 && frame.result?.type === "stopped");
    socket.socket.close();
    await until(
      async () => ((sample(await scrape(), "chat_websocket_connections") ?? 1) === 0 ? true : undefined),
      "the socket to be gone",
    );
    expect(sample(await scrape(), "chat_live_subscriptions")).toBe(0);
  });

  it("shows every queue's depth, and a failing job's runs, failures and retry", async () => {
    const first = await scrape();
    for (const queue of ["mail", "translation", "push", "room-expiry", "outbound-webhooks", "maintenance"])
      expect(sample(first, "chat_job_queue_depth", { queue, state: "waiting" }), queue).toBeGreaterThanOrEqual(0);
    const failuresBefore = sample(first, "chat_job_failures_total", { queue: "mail", job: "mail.verify-email" }) ?? 0;

    // Registration sends a verification mail; SMTP is a closed port, so the job fails and waits to retry.
    await registerUser(api);
    const text = await until(async () => {
      const current = await scrape();
      const delayed = sample(current, "chat_job_queue_depth", { queue: "mail", state: "delayed" }) ?? 0;
      const failures = sample(current, "chat_job_failures_total", { queue: "mail", job: "mail.verify-email" }) ?? 0;
      return failures > failuresBefore && delayed >= 1 ? current : undefined;
    }, "the mail job to fail and wait for its retry");
    expect(
      sample(text, "chat_job_duration_seconds_count", { queue: "mail", job: "mail.verify-email", outcome: "failed" }),
    ).toBeGreaterThan(0);
  });

  it.runIf(process.env.DATABASE_URL)("reports the PostgreSQL connections by state", async () => {
    const text = await scrape();
    // The scrape's own query is one active connection.
    expect(sample(text, "chat_db_connections", { state: "active" })).toBeGreaterThanOrEqual(1);
  });
});

describe("GET /metrics with METRICS_TOKEN", () => {
  let guarded: TestServer;
  const token = "metrics-token-for-the-test-0123456789";
  beforeAll(async () => {
    guarded = await startTestServer({ METRICS_TOKEN: token });
  });
  afterAll(() => guarded?.close());

  it("requires Authorization: Bearer <METRICS_TOKEN>, even from loopback", async () => {
    const anonymous = await fetch(`${guarded.url}/metrics`);
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toEqual({ message: "Unauthenticated." });
    const wrong = await fetch(`${guarded.url}/metrics`, { headers: { Authorization: `Bearer ${token}x` } });
    expect(wrong.status).toBe(401);
    const right = await fetch(`${guarded.url}/metrics`, { headers: { Authorization: `Bearer ${token}` } });
    expect(right.status).toBe(200);
    expect(await right.text()).toContain("chat_websocket_connections");
  });
});
