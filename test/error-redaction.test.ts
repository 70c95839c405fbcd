// No error body on any door carries SQL, parameters, stacks or internal messages, and the
// logs keep a failed query's text but none of its parameters (server/trpc.ts errorFormatter,
// server/http/rest-errors.ts, server/logger.ts). The failures are real: the test makes the
// database refuse rows with a CHECK constraint, so the driver's error quotes the whole row
// (password hash, e-mail, message text) and drizzle's message lists every parameter.
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../server/logger.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { collect, world } from "./helpers/live.ts";
import { RawSocket } from "./helpers/raw-socket.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const lines: string[] = [];
let server: TestServer;
let api: RestClient;
let user: RegisteredUser;
const live = world(
  () => server,
  () => api,
);

const secretPassword = `workspace-secret-${randomBytes(4).toString("hex")}`;
const secretContent = `message-secret-${randomBytes(4).toString("hex")}`;

/** What must never appear in a body; the logs may keep the query text (SQL keywords), not these. */
function secrets(): string[] {
  return [secretPassword, secretContent, "$argon2", user.email, user.token];
}
const SQL_MARKERS = ["Failed query", "insert into", "select ", "stream_events", "violates", "Failing row"];

function expectClean(text: string, { sqlToo }: { sqlToo: boolean }) {
  for (const secret of secrets()) expect(text).not.toContain(secret);
  if (sqlToo) for (const marker of SQL_MARKERS) expect(text.toLowerCase()).not.toContain(marker.toLowerCase());
  expect(text).not.toMatch(/\n\s+at /);
}

beforeAll(async () => {
  const logger = createLogger("info", { write: (line: string) => void lines.push(line) });
  server = await startTestServer({}, { logger });
  api = restClient(server.url);
  user = await registerUser(api);
});
afterAll(() => server?.close());

describe("a client's protocol error on a WebSocket", () => {
  it("a frame over 1 MiB closes the connection (1009) and is not logged as a server failure", async () => {
    const before = lines.length;
    const raw = await RawSocket.signedIn(server.url, user.token);
    try {
      raw.sendText(Buffer.alloc(1024 * 1024 + 1, 0x20));
      expect(await raw.closed()).toBe(1009);
    } finally {
      raw.terminate();
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    const logged = lines.slice(before).map((line) => JSON.parse(line) as { level: number });
    expect(logged.filter((line) => line.level >= 50)).toEqual([]);
  });
});

describe("a failure inside the database", () => {
  beforeAll(async () => {
    // Every new workspace and message now fails in PostgreSQL, quoting its row.
    await server.app.deps.db.execute(
      sql.raw("alter table workspaces add constraint redaction_probe check (false) not valid"),
    );
    await server.app.deps.db.execute(
      sql.raw("alter table messages add constraint redaction_probe check (false) not valid"),
    );
  });
  afterAll(async () => {
    await server.app.deps.db.execute(sql.raw("alter table workspaces drop constraint redaction_probe"));
    await server.app.deps.db.execute(sql.raw("alter table messages drop constraint redaction_probe"));
  });

  it('REST: 500 {message: "Server Error"} and nothing else', async () => {
    const response = await api.post(
      "/api/v1/workspaces",
      { name: "Probe", visibility: "public", password: secretPassword },
      { token: user.token },
    );
    expect(response.status).toBe(500);
    expect(response.body).toEqual({ message: "Server Error" });
  });

  it('tRPC over HTTP: INTERNAL_SERVER_ERROR with the message "Server Error", no SQL, parameters or stack', async () => {
    const response = await fetch(`${server.url}/trpc/workspaces.create`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${user.token}` },
      body: JSON.stringify({ name: "Probe", visibility: "public", password: secretPassword }),
    });
    const text = await response.text();
    expect(response.status).toBe(500);
    const body = JSON.parse(text);
    expect(body.error).toMatchObject({
      message: "Server Error",
      data: { code: "INTERNAL_SERVER_ERROR", httpStatus: 500 },
    });
    expect(body.error.data.stack).toBeUndefined();
    expectClean(text, { sqlToo: true });
  });

  it('tRPC over WebSocket: the error frame says "Server Error" only', async () => {
    const socket = await RawSocket.signedIn(server.url, user.token);
    try {
      socket.request(1, "mutation", "workspaces.create", {
        input: { name: "Probe", visibility: "public", password: secretPassword },
      });
      const frame = await socket.next((candidate) => candidate.id === 1);
      expect(frame.error).toMatchObject({ message: "Server Error", data: { code: "INTERNAL_SERVER_ERROR" } });
      expectClean(JSON.stringify(frame), { sqlToo: true });
    } finally {
      socket.terminate();
    }
  });

  it("a message that fails to store: no content in the REST or RPC body", async () => {
    // The workspace is made before the constraint on workspaces matters: through the service directly.
    await server.app.deps.db.execute(sql.raw("alter table workspaces drop constraint redaction_probe"));
    const { workspaceId, channelId } = await createWorkspaceWithGeneral(api, user);
    await server.app.deps.db.execute(
      sql.raw("alter table workspaces add constraint redaction_probe check (false) not valid"),
    );

    const rest = await api.post(
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
      { content: secretContent },
      { token: user.token },
    );
    expect(rest.status).toBe(500);
    expect(rest.body).toEqual({ message: "Server Error" });

    const rpc = await fetch(`${server.url}/trpc/messages.post`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${user.token}` },
      body: JSON.stringify({ workspace_id: workspaceId, channel_id: channelId, content: secretContent }),
    });
    expect(rpc.status).toBe(500);
    expectClean(await rpc.text(), { sqlToo: true });
  });

  it("the log keeps each failed query's SQL but none of its parameters, hashes, e-mails or message text", async () => {
    const log = lines.join("");
    expect(log).toContain('Failed query: insert into \\"workspaces\\"');
    expectClean(log, { sqlToo: false });
  });
});

describe("a live subscription that fails inside the server", () => {
  it('over SSE and WebSocket: the error says "Server Error" only', async () => {
    const { workspaceId, channelId } = await createWorkspaceWithGeneral(api, user);
    const posted = await api.post(
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
      { content: "before the failure" },
      { token: user.token },
    );
    expect(posted.status).toBe(201);
    await server.app.deps.relay.flush();
    // Resuming reads the event store; without it, the subscription fails in the database.
    await server.app.deps.db.execute(sql.raw("alter table stream_events rename to stream_events_hidden"));
    try {
      // SSE, as httpSubscriptionLink opens it: the error arrives as a serialized-error event.
      const query = new URLSearchParams({
        input: JSON.stringify({ lastEventId: "1" }),
        connectionParams: JSON.stringify({ token: user.token }),
      });
      const controller = new AbortController();
      const sse = await fetch(`${server.url}/trpc/events.onUser?${query}`, {
        headers: { Accept: "text/event-stream" },
        signal: controller.signal,
      });
      const reader = sse.body!.getReader();
      let text = "";
      while (!text.includes("serialized-error")) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      controller.abort();
      expect(text).toContain("Server Error");
      expectClean(text, { sqlToo: true });

      const feed = collect((handlers) => live.chat(user.token).events.onUser.subscribe({ lastEventId: "1" }, handlers));
      const error = (await until(() => feed.errors[0], "the subscription's error")) as {
        message: string;
        data?: { code?: string };
      };
      expect(error.message).toBe("Server Error");
      expect(error.data?.code).toBe("INTERNAL_SERVER_ERROR");
      expectClean(JSON.stringify({ message: error.message, data: error.data }), { sqlToo: true });
    } finally {
      await server.app.deps.db.execute(sql.raw("alter table stream_events_hidden rename to stream_events"));
    }
  });
});
