// The queue dashboard (bull-board, server/http/queue-dashboard.ts) at /admin/queues: there only
// with Redis, behind HTTP Basic with QUEUE_DASHBOARD_PASSWORD, listing the service's queues.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QUEUE_NAMES } from "../server/jobs/definition.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";

const PASSWORD = "dashboard-password-for-the-test";
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

describe.runIf(process.env.REDIS_URL)("with Redis", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ QUEUE_DASHBOARD_PASSWORD: PASSWORD });
  });
  afterAll(() => server?.close());

  it("asks for the password (HTTP Basic), and refuses a wrong one", async () => {
    const anonymous = await fetch(`${server.url}/admin/queues`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toMatch(/^Basic realm="queues"/);
    expect(await anonymous.json()).toEqual({ message: "Unauthenticated." });
    const wrong = await fetch(`${server.url}/admin/queues`, { headers: { Authorization: basic("admin", "nope") } });
    expect(wrong.status).toBe(401);
    const bearer = await fetch(`${server.url}/admin/queues/api/queues`, {
      headers: { Authorization: `Bearer ${PASSWORD}` },
    });
    expect(bearer.status).toBe(401);
  });

  it("serves the dashboard page and its assets to an admin", async () => {
    const page = await fetch(`${server.url}/admin/queues`, { headers: { Authorization: basic("admin", PASSWORD) } });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await page.text();
    // The page's assets are relative to its <base href>: the dashboard's own path.
    const base = /<base href="([^"]+)"/.exec(html)?.[1];
    expect(base).toBe("/admin/queues/");
    const script = /<script[^>]+src="([^"]+\.js)"/.exec(html)?.[1];
    const assetUrl = new URL(script!, new URL(base!, server.url));
    const asset = await fetch(assetUrl, { headers: { Authorization: basic("ops", PASSWORD) } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
  });

  it("lists the service's queues in its API", async () => {
    const response = await fetch(`${server.url}/admin/queues/api/queues`, {
      headers: { Authorization: basic("admin", PASSWORD) },
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { queues: { name: string }[] };
    expect(body.queues.map((queue) => queue.name).sort()).toEqual([...QUEUE_NAMES].sort());
  });
});

describe.runIf(process.env.REDIS_URL)("with Redis but no QUEUE_DASHBOARD_PASSWORD", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server?.close());

  it("is not there, even for a loopback client (a reverse proxy on the host would be one)", async () => {
    expect((await fetch(`${server.url}/admin/queues`)).status).toBe(404);
    expect((await fetch(`${server.url}/admin/queues/api/queues`)).status).toBe(404);
  });
});

describe.runIf(!process.env.REDIS_URL)("without Redis", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ QUEUE_DASHBOARD_PASSWORD: PASSWORD });
  });
  afterAll(() => server?.close());

  it("is not there: jobs run in the process, with nothing to show after the fact", async () => {
    const response = await fetch(`${server.url}/admin/queues`, {
      headers: { Authorization: basic("admin", PASSWORD) },
    });
    expect(response.status).toBe(404);
  });
});
