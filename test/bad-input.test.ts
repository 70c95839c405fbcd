// Bad input never reaches the database as a 500, at any door: REST, tRPC over HTTP, tRPC over
// WebSocket, SSE and the plain routes. One rule each, checked in one place (docs/api.md,
// "Input rules"): text without NUL or lone surrogates (the middleware in server/trpc.ts),
// integer ids within PostgreSQL's integer (routers/inputs.ts), JSON at most 64 levels deep and
// 1 MiB (server/http/json-limits.ts), a multipart form that ends, a `before` cursor that is a
// message id. Each test checks the answer at every door and that nothing was written.
import { connect } from "node:net";
import { readdir } from "node:fs/promises";
import path from "node:path";
import { and, count, eq } from "drizzle-orm";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChatClient, type ChatClient } from "@chat-service/client";
import { attachments, conversations, messages } from "../db/schema/index.ts";
import { ADMIN_ROUTE, signAdminRequest } from "../server/http/admin-route.ts";
import { jsonNestsDeeperThan, MAX_JSON_DEPTH, startsWithJsonArray } from "../server/http/json-limits.ts";
import { findUnsafeText, isSafeText } from "../server/input-text.ts";
import { clientFrames } from "../server/http/trpc-ws-protocol.ts";
import type { ApiResponse } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { RawSocket, type Frame } from "./helpers/raw-socket.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

const VALIDATION = "The given data was invalid.";
const NOT_ALLOWED = (attribute: string) => `The ${attribute} field contains characters that are not allowed.`;
const TOO_DEEP = `The JSON in the request must not nest more than ${MAX_JSON_DEPTH} levels deep.`;
const MAX_ID = 2_147_483_647;

let owner: RegisteredUser;
let other: RegisteredUser;
let workspaceId: string;
let channelId: string;
let conversationId: string;
let channelPath: string;
let conversationPath: string;
const clients: ChatClient[] = [];

beforeAll(async () => {
  owner = await registerUser(ctx.api);
  other = await registerUser(ctx.api);
  ({ workspaceId, channelId } = await createWorkspaceWithGeneral(ctx.api, owner));
  const opened = await ctx.api.post(
    "/api/v1/direct-conversations",
    { participant_user_id: other.id },
    { token: owner.token },
  );
  expect(opened.status).toBe(201);
  conversationId = opened.body.data.id;
  channelPath = `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`;
  conversationPath = `/api/v1/direct-conversations/${conversationId}/messages`;
  return () => clients.forEach((client) => client.close());
});

function chat(token?: string): ChatClient {
  const client = createChatClient({
    url: ctx.server.url,
    token,
    webSocket: { WebSocket },
  });
  clients.push(client);
  return client;
}

/** Messages stored in the test channel and the test conversation. */
async function storedMessages(): Promise<number> {
  const db = ctx.server.app.deps.db;
  const [inChannel] = await db.select({ n: count() }).from(messages).where(eq(messages.channelId, channelId));
  const [inConversation] = await db
    .select({ n: count() })
    .from(messages)
    .where(eq(messages.conversationId, conversationId));
  return Number(inChannel!.n) + Number(inConversation!.n);
}

/** A tRPC request over HTTP as it travels: status and parsed body. */
async function rpcHttp(
  method: "GET" | "POST",
  pathAndQuery: string,
  body?: string,
  token = owner.token,
): Promise<ApiResponse> {
  const response = await fetch(`${ctx.server.url}/trpc/${pathAndQuery}`, {
    method,
    headers: {
      ...(body !== undefined && { "Content-Type": "application/json" }),
      ...(token && { Authorization: `Bearer ${token}` }),
    },
    body,
  });
  const text = await response.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // left as text
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

/** A request written byte for byte (for request targets and bodies fetch would not send). */
function rawHttp(request: string): Promise<{ status: number; body: string }> {
  const port = Number(new URL(ctx.server.url).port);
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(request));
    let out = "";
    socket.on("data", (chunk) => (out += chunk.toString()));
    socket.on("error", reject);
    socket.on("close", () => {
      const [head = "", ...rest] = out.split("\r\n\r\n");
      resolve({ status: Number(head.split(" ")[1]), body: rest.join("\r\n\r\n") });
    });
  });
}

/** Arrays nested `depth` deep: `[[…]]`. */
const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

/** A JSON object whose own depth is `depth`: `{…fields, "extra": [[…]]}`, the arrays one level less. */
const objectOfDepth = (depth: number, fields: Record<string, unknown>) =>
  `${JSON.stringify(fields).slice(0, -1)},"extra":${nested(depth - 1)}}`;

const sockets: RawSocket[] = [];
async function signedInSocket(user: RegisteredUser = owner): Promise<RawSocket> {
  const raw = await RawSocket.signedIn(ctx.server.url, user.token);
  sockets.push(raw);
  return raw;
}
afterAll(() => sockets.forEach((socket) => socket.terminate()));

describe("text: NUL and lone surrogates are a 422 on the field", () => {
  it("REST: a NUL or a lone surrogate in a message is 422 on `content`, and no message is stored", async () => {
    const before = await storedMessages();
    for (const body of [
      JSON.stringify({ content: "hello\u0000world" }),
      '{"content":"hello \\ud800 world"}',
      '{"content":"hello \\udc00 world"}',
    ]) {
      for (const path of [channelPath, conversationPath]) {
        const refused = await ctx.api.post(path, body, { token: owner.token });
        expect(refused.status, `${path} ${body}`).toBe(422);
        expect(refused.body).toEqual({ message: VALIDATION, errors: { content: [NOT_ALLOWED("content")] } });
      }
    }
    // A well-formed pair (an emoji) is text like any other.
    const accepted = await ctx.api.post(channelPath, '{"content":"ok \\ud83d\\ude00"}', { token: owner.token });
    expect(accepted.status).toBe(201);
    expect(accepted.body.data.content).toBe("ok \u{1F600}");
    expect(await storedMessages()).toBe(before + 1);
  });

  it("REST: nested fields are keyed with dots, object keys count, and every bad field is named", async () => {
    const refused = await ctx.api.post(
      channelPath,
      { content: "fine", attachment_ids: ["att_1", "att\u00002"], parent_message_id: "\u0000" },
      { token: owner.token },
    );
    expect(refused.status).toBe(422);
    expect(refused.body).toEqual({
      message: VALIDATION,
      errors: {
        "attachment_ids.1": [NOT_ALLOWED("attachment ids")],
        parent_message_id: [NOT_ALLOWED("parent message id")],
      },
    });

    // A key the procedure would ignore is refused all the same: the rule is about the request.
    const badKey = await ctx.api.post(channelPath, '{"content":"hi","a\\u0000b":1}', { token: owner.token });
    expect(badKey.status).toBe(422);
    expect(badKey.body.message).toBe(VALIDATION);
    expect(Object.keys(badKey.body.errors)).toEqual(["body"]);

    // Deep inside an input (no recursion walks it): the full dotted path.
    let deep: unknown = "x\u0000";
    for (let level = 0; level < 40; level++) deep = { inner: deep };
    const deepRefused = await ctx.api.post(channelPath, { content: "hi", extra: deep }, { token: owner.token });
    expect(deepRefused.status).toBe(422);
    expect(Object.keys(deepRefused.body.errors)).toEqual([["extra", ...Array(40).fill("inner")].join(".")]);
  });

  it("REST: a NUL in an unauthenticated login body is 422, not 500", async () => {
    const refused = await ctx.api.post("/api/v1/auth/app/login", {
      email: "a\u0000@example.test",
      password: "x".repeat(8),
    });
    expect(refused.status).toBe(422);
    expect(refused.body).toEqual({ message: VALIDATION, errors: { email: [NOT_ALLOWED("email")] } });
    const register = await ctx.api.post("/api/v1/auth/app/register", {
      name: "Nul\u0000",
      email: "nul@example.test",
      password: "x".repeat(8),
      password_confirmation: "x".repeat(8),
    });
    expect(register.status).toBe(422);
    expect(register.body.errors).toEqual({ name: [NOT_ALLOWED("name")] });
  });

  it("REST: authentication comes first: no token with a NUL is 401", async () => {
    const refused = await ctx.api.post(channelPath, { content: "\u0000" });
    expect(refused.status).toBe(401);
  });

  it("REST: query and path values: a NUL in `before` is 422, in a path id 404, never 500", async () => {
    const query = await ctx.api.get(`${channelPath}?before=msg_%00`, { token: owner.token });
    expect(query.status).toBe(422);
    expect(query.body).toEqual({ message: VALIDATION, errors: { before: [NOT_ALLOWED("before")] } });
    for (const path of [
      `/api/v1/workspaces/${workspaceId}%00/channels`,
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}%00/messages`,
      `/api/v1/direct-conversations/${conversationId}%00/messages`,
      "/api/v1/invites/abc%00def",
      "/api/v1/message-attachments/att%00x/download",
      "/api/v1/direct-message-attachments/att%00x/download",
      "/api/v1/message-attachments/%ED%A0%80/download",
    ]) {
      const response = await ctx.api.get(path, { token: owner.token });
      expect(response.status, path).toBe(404);
      expect(response.body, path).toEqual({ message: expect.any(String) });
    }
  });

  it("tRPC over HTTP: UNPROCESSABLE_CONTENT with the field, for mutations, queries and batches", async () => {
    const before = await storedMessages();
    const client = chat(owner.token);
    const refused = await rejectionOf(
      client.messages.post.mutate({ workspace_id: workspaceId, channel_id: channelId, content: "a\u0000" }),
    );
    expect(refused.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      httpStatus: 422,
      errors: { content: [NOT_ALLOWED("content")] },
    });
    const query = await rejectionOf(
      client.messages.list.query({ workspace_id: workspaceId, channel_id: `${channelId}\u0000` }),
    );
    expect(query.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      errors: { channel_id: [NOT_ALLOWED("channel id")] },
    });
    const surrogate = await rpcHttp(
      "POST",
      "direct.post",
      `{"conversation_id":"${conversationId}","content":"\\udbff"}`,
    );
    expect(surrogate.status).toBe(422);
    expect(surrogate.body.error.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      errors: { content: [NOT_ALLOWED("content")] },
    });
    const login = await rpcHttp("POST", "auth.login", JSON.stringify({ email: "\u0000", password: "x".repeat(8) }), "");
    expect(login.status).toBe(422);
    expect(login.body.error.data.errors).toEqual({ email: [NOT_ALLOWED("email")] });
    expect(await storedMessages()).toBe(before);
  });

  it("WebSocket: the same error frame, and the connection goes on", async () => {
    const before = await storedMessages();
    const raw = await signedInSocket();
    raw.request(1, "mutation", "messages.post", {
      input: { workspace_id: workspaceId, channel_id: channelId, content: "a\u0000b" },
    });
    raw.sendText(
      '{"id":2,"method":"mutation","params":{"path":"direct.post","input":{"conversation_id":"' +
        conversationId +
        '","content":"\\ud800"}}}',
    );
    for (const id of [1, 2]) {
      const frame = await raw.next((candidate) => candidate.id === id);
      expect(frame.error).toMatchObject({
        code: -32022,
        data: { code: "UNPROCESSABLE_CONTENT", httpStatus: 422, errors: { content: [NOT_ALLOWED("content")] } },
      });
    }
    raw.request(3, "query", "me.get");
    expect((await raw.next((frame) => frame.id === 3)).result.data.id).toBe(owner.id);
    expect(await storedMessages()).toBe(before);
  });

  it("SSE: a subscription's input is checked like any other", async () => {
    const input = encodeURIComponent(JSON.stringify({ workspace_id: `${workspaceId}\u0000`, channel_id: channelId }));
    const params = encodeURIComponent(JSON.stringify({ token: owner.token }));
    const response = await fetchSse(`messages.onChannel?input=${input}&connectionParams=${params}`);
    expect(response).toMatchObject({
      code: -32022,
      data: { code: "UNPROCESSABLE_CONTENT", errors: { workspace_id: [NOT_ALLOWED("workspace id")] } },
    });
  });

  it("an upload's file name is cleaned, not refused: NUL and control characters are dropped", async () => {
    const boundary = "XBOUNDARY";
    const body =
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename*=UTF-8''re%00port%ED%A0%80.txt\r\n` +
      `Content-Type: text/plain\r\n\r\nhello\r\n--${boundary}--\r\n`;
    const response = await rawHttp(multipartRequest(boundary, body));
    expect(response.status).toBe(201);
    const { filename } = JSON.parse(response.body).data as { filename: string };
    expect(filename).not.toContain("\u0000");
    expect(isSafeText(filename)).toBe(true);
    expect(filename).toMatch(/^report.*\.txt$/);
  });
});

/** The error an SSE subscription answers with (its `serialized-error` event), or undefined within 3 s. */
async function fetchSse(pathAndQuery: string): Promise<unknown> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 3_000);
  let text = "";
  try {
    const response = await fetch(`${ctx.server.url}/trpc/${pathAndQuery}`, {
      headers: { Accept: "text/event-stream" },
      signal: abort.signal,
    });
    const reader = response.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString();
      const error = /event: serialized-error\ndata: (.*)\n/.exec(text);
      if (error) {
        await reader.cancel().catch(() => {});
        return JSON.parse(error[1]!) as unknown;
      }
    }
  } catch {
    // aborted: no error arrived in time
  } finally {
    clearTimeout(timer);
  }
  return undefined;
}

function multipartRequest(boundary: string, body: string, token = owner.token): string {
  return (
    `POST /api/v1/files HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `Connection: close\r\n\r\n${body}`
  );
}

describe("integer ids: 1 to 2147483647", () => {
  it("REST body: 2147483648 (number or string) is 422 on the field; 2147483647 is an id (unknown here)", async () => {
    const conversationsBefore = await ctx.server.app.deps.db.select({ n: count() }).from(conversations);
    for (const value of [MAX_ID + 1, String(MAX_ID + 1), "99999999999999999999", 2 ** 53, 1e300]) {
      const refused = await ctx.api.post(
        "/api/v1/direct-conversations",
        { participant_user_id: value },
        { token: owner.token },
      );
      expect(refused.status, String(value)).toBe(422);
      expect(refused.body).toEqual({
        message: VALIDATION,
        errors: { participant_user_id: ["The participant user id field must not be greater than 2147483647."] },
      });
    }
    for (const value of [0, -1, 1.5, "1.5", "abc", "", true]) {
      const refused = await ctx.api.post(
        "/api/v1/direct-conversations",
        { participant_user_id: value },
        { token: owner.token },
      );
      expect(refused.status, JSON.stringify(value)).toBe(422);
      expect(Object.keys(refused.body.errors)).toEqual(["participant_user_id"]);
    }
    // The largest id is an id: it reaches the lookup, which finds nobody.
    for (const value of [MAX_ID, String(MAX_ID)]) {
      const unknown = await ctx.api.post(
        "/api/v1/direct-conversations",
        { participant_user_id: value },
        { token: owner.token },
      );
      expect(unknown.status).toBe(422);
      expect(unknown.body.errors).toEqual({ participant_user_id: ["The selected participant user id is invalid."] });
    }
    const addMember = await ctx.api.post(
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}/members`,
      { user_id: MAX_ID + 1 },
      { token: owner.token },
    );
    expect(addMember.status).toBe(422);
    expect(addMember.body.errors).toEqual({ user_id: ["The user id field must not be greater than 2147483647."] });
    const addUnknown = await ctx.api.post(
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}/members`,
      { user_id: MAX_ID },
      { token: owner.token },
    );
    expect(addUnknown.status).toBe(422);
    expect(addUnknown.body.errors).toEqual({ user_id: ["The selected user id is not a member of this workspace."] });
    expect(await ctx.server.app.deps.db.select({ n: count() }).from(conversations)).toEqual(conversationsBefore);
  });

  it("REST path: an id that cannot exist is 404, the same answer as an unknown one", async () => {
    const members = `/api/v1/workspaces/${workspaceId}/channels/${channelId}/members`;
    const unknown = await ctx.api.delete(`${members}/${MAX_ID}`, { token: owner.token });
    expect(unknown.status).toBe(404);
    for (const id of [String(MAX_ID + 1), "99999999999999999999", "abc", "-1", "0", "1.5"]) {
      const response = await ctx.api.delete(`${members}/${id}`, { token: owner.token });
      expect(response.status, id).toBe(404);
      expect(response.body, id).toEqual(unknown.body);
    }
    // The owner is still a member of the channel: nothing was removed.
    const list = await ctx.api.get(members, { token: owner.token });
    expect(list.body.data.map((member: { user_id: number }) => member.user_id)).toContain(owner.id);
  });

  it("REST path: the e-mail verification link with an impossible id is an invalid link (404)", async () => {
    const invalid = { message: "This verification link is invalid or has expired." };
    for (const id of [String(MAX_ID), String(MAX_ID + 1), "99999999999999999999", "1e400", "abc", "%00"]) {
      const response = await ctx.api.get(`/api/v1/auth/email/verify/${id}/abc?expires=1&signature=x`);
      expect(response.status, id).toBe(404);
      expect(response.body, id).toEqual(invalid);
    }
  });

  it("tRPC over HTTP and WebSocket: UNPROCESSABLE_CONTENT in a body, NOT_FOUND for a path id", async () => {
    const client = chat(owner.token);
    const refused = await rejectionOf(client.direct.open.mutate({ participant_user_id: MAX_ID + 1 }));
    expect(refused.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      errors: { participant_user_id: ["The participant user id field must not be greater than 2147483647."] },
    });
    const removed = await rejectionOf(
      client.channels.removeMember.mutate({ workspace_id: workspaceId, id: channelId, user_id: MAX_ID + 1 }),
    );
    expect(removed.data).toMatchObject({ code: "NOT_FOUND" });

    const raw = await signedInSocket();
    raw.request(1, "mutation", "direct.open", { input: { participant_user_id: MAX_ID + 1 } });
    raw.request(2, "mutation", "direct.open", { input: { participant_user_id: String(MAX_ID + 1) } });
    for (const id of [1, 2]) {
      const frame = await raw.next((candidate) => candidate.id === id);
      expect(frame.error.data).toMatchObject({
        code: "UNPROCESSABLE_CONTENT",
        errors: { participant_user_id: ["The participant user id field must not be greater than 2147483647."] },
      });
    }
  });
});

describe(`JSON: at most ${MAX_JSON_DEPTH} levels deep and 1 MiB`, () => {
  it(`REST: a body ${MAX_JSON_DEPTH} deep is read, ${MAX_JSON_DEPTH + 1} (or 5,000) deep is 400 {message}`, async () => {
    const before = await storedMessages();
    const accepted = await ctx.api.post(channelPath, objectOfDepth(MAX_JSON_DEPTH, { content: "deep enough" }), {
      token: owner.token,
    });
    expect(accepted.status).toBe(201);
    for (const depth of [MAX_JSON_DEPTH + 1, 5_000, 100_000]) {
      for (const path of [channelPath, "/api/v1/auth/app/login", conversationPath]) {
        const refused = await ctx.api.post(path, objectOfDepth(depth, { content: "too deep" }), { token: owner.token });
        expect(refused.status, `${path} ${depth}`).toBe(400);
        expect(refused.body).toEqual({ message: TOO_DEEP });
      }
    }
    // Brackets inside strings are text, not nesting.
    const inString = await ctx.api.post(
      channelPath,
      { content: "[".repeat(1_000) + '\\"{'.repeat(500) },
      {
        token: owner.token,
      },
    );
    expect(inString.status).toBe(201);
    expect(await storedMessages()).toBe(before + 2);
  });

  it("REST: a bearer endpoint answers for its caller before its body: 401 or 403 first, then 400/413/415", async () => {
    const send = async (path: string, body: string, headers: Record<string, string>) => {
      const response = await fetch(`${ctx.server.url}${path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body,
      });
      return { status: response.status, body: await response.json() };
    };
    const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
    const unauthenticated = { status: 401, body: { message: "Unauthenticated." } };
    // No token, or a token that is no token: 401, whatever the body.
    expect(await send("/api/v1/devices", "{bad", {})).toEqual(unauthenticated);
    expect(await send("/api/v1/devices", "[]", bearer("bogus"))).toEqual(unauthenticated);
    expect(await send("/api/v1/devices", "x", { ...bearer("bogus"), "Content-Type": "text/plain" })).toEqual(
      unauthenticated,
    );
    expect(await send(channelPath, JSON.stringify({ content: "x".repeat(1024 * 1024) }), {})).toEqual(unauthenticated);
    // A token without the ability the endpoint needs: 403.
    const readOnly = await ctx.api.post("/api/v1/tokens", { name: "reader", abilities: ["read"] }, { token: owner.token });
    expect(readOnly.status, JSON.stringify(readOnly.body)).toBe(201);
    const forbidden = await send("/api/v1/devices", "{bad", bearer(readOnly.body.access_token));
    expect(forbidden.status).toBe(403);
    // An allowed caller hears about the body; so does anyone on a public endpoint.
    expect(await send("/api/v1/devices", "{bad", bearer(owner.token))).toEqual({
      status: 400,
      body: { message: "Malformed JSON in the request body." },
    });
    expect((await send("/api/v1/auth/app/login", "{bad", {})).status).toBe(400);
    // An unknown route is 404 before its body.
    expect((await send("/api/v1/no-such-route", "{bad", bearer(owner.token))).status).toBe(404);
  });

  it("REST: a body above 1 MiB is 413 {message}", async () => {
    const refused = await ctx.api.post(channelPath, { content: "x".repeat(1024 * 1024) }, { token: owner.token });
    expect(refused.status).toBe(413);
    expect(refused.body).toEqual({ message: "The request body is too large." });
  });

  it("REST: a body declared above 1 MiB with Expect: 100-continue is 413 before the client sends it", async () => {
    const port = Number(new URL(ctx.server.url).port);
    // Writes the head, then the body only once the server says "100 Continue" (as curl does).
    const expecting = (length: number, body: string | undefined) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, "127.0.0.1", () =>
          socket.write(
            `POST ${channelPath} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${owner.token}\r\n` +
              `Content-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`,
          ),
        );
        let out = "";
        const timer = setTimeout(() => socket.destroy(), 5_000);
        socket.on("data", (chunk) => {
          out += chunk.toString();
          if (body !== undefined && out.startsWith("HTTP/1.1 100 Continue\r\n\r\n") && !out.includes("HTTP/1.1 2")) {
            socket.write(body);
            body = undefined;
          }
          if (/HTTP\/1\.1 [2-5]\d\d[\s\S]*\r\n\r\n\{[\s\S]*\}$/.test(out)) socket.end();
        });
        socket.on("error", reject);
        socket.on("close", () => {
          clearTimeout(timer);
          resolve(out);
        });
      });
    const refused = await expecting(10 * 1024 * 1024, undefined);
    expect(refused.startsWith("HTTP/1.1 413 "), refused.slice(0, 200)).toBe(true);
    expect(refused).toMatch(/\r\nconnection: close\r\n/i);
    expect(JSON.parse(refused.split("\r\n\r\n")[1]!)).toEqual({ message: "The request body is too large." });
    // Within the limit the server says "continue", and the body is posted.
    const content = JSON.stringify({ content: "sent after 100 Continue" });
    const accepted = await expecting(Buffer.byteLength(content), content);
    expect(accepted.startsWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 "), accepted.slice(0, 200)).toBe(true);
  });

  it("tRPC over HTTP: the input may nest 64 deep in a body or ?input=, batch or not; deeper is BAD_REQUEST", async () => {
    const before = await storedMessages();
    const post = (depth: number) =>
      objectOfDepth(depth, { workspace_id: workspaceId, channel_id: channelId, content: `depth ${depth}` });
    const accepted = await rpcHttp("POST", "messages.post", post(MAX_JSON_DEPTH));
    expect(accepted.status).toBe(200);
    const refused = await rpcHttp("POST", "messages.post", post(MAX_JSON_DEPTH + 1));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: -32600, message: TOO_DEEP, data: { code: "BAD_REQUEST" } });
    // The same code tRPC answers malformed JSON with.
    const malformed = await rpcHttp("POST", "messages.post", "{");
    expect(malformed.body.error.data.code).toBe("BAD_REQUEST");

    const batchAccepted = await rpcHttp("POST", "messages.post?batch=1", `{"0":${post(MAX_JSON_DEPTH)}}`);
    expect(batchAccepted.status).toBe(200);
    const batchRefused = await rpcHttp(
      "POST",
      "messages.post,messages.post?batch=1",
      `{"0":${post(MAX_JSON_DEPTH + 1)},"1":${post(2)}}`,
    );
    expect(batchRefused.status).toBe(400);
    expect(batchRefused.body).toHaveLength(2);
    for (const answer of batchRefused.body) expect(answer.error.data).toMatchObject({ code: "BAD_REQUEST" });
    expect(await storedMessages()).toBe(before + 2);

    const list = (depth: number) =>
      encodeURIComponent(objectOfDepth(depth, { workspace_id: workspaceId, channel_id: channelId }));
    expect((await rpcHttp("GET", `messages.list?input=${list(MAX_JSON_DEPTH)}`)).status).toBe(200);
    const queryRefused = await rpcHttp("GET", `messages.list?input=${list(MAX_JSON_DEPTH + 1)}`);
    expect(queryRefused.status).toBe(400);
    expect(queryRefused.body.error).toMatchObject({ message: TOO_DEEP, data: { code: "BAD_REQUEST" } });
    expect(
      (
        await rpcHttp(
          "GET",
          `messages.list?batch=1&input=${encodeURIComponent(`{"0":${decodeURIComponent(list(MAX_JSON_DEPTH))}}`)}`,
        )
      ).status,
    ).toBe(200);
    const batchQuery = await rpcHttp(
      "GET",
      `messages.list?batch=1&input=${encodeURIComponent(`{"0":${decodeURIComponent(list(MAX_JSON_DEPTH + 1))}}`)}`,
    );
    expect(batchQuery.status).toBe(400);
    expect(batchQuery.body[0].error.data.code).toBe("BAD_REQUEST");
  });

  it("tRPC over HTTP: a body above 1 MiB is PAYLOAD_TOO_LARGE (413); deep connection params are PARSE_ERROR", async () => {
    const body = JSON.stringify({ workspace_id: workspaceId, channel_id: channelId, content: "x".repeat(1024 * 1024) });
    const tooLarge = await rpcHttp("POST", "messages.post", body);
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error.data.code).toBe("PAYLOAD_TOO_LARGE");

    const params = encodeURIComponent(`{"token":"x","deep":${nested(MAX_JSON_DEPTH + 1)}}`);
    const deepParams = await rpcHttp("GET", `me.get?connectionParams=${params}`, undefined, "");
    expect(deepParams.status).toBe(400);
    expect(deepParams.body.error.data.code).toBe("PARSE_ERROR");
  });

  it("SSE: a subscription input nested too deep is refused as BAD_REQUEST", async () => {
    const input = encodeURIComponent(
      objectOfDepth(MAX_JSON_DEPTH + 1, { workspace_id: workspaceId, channel_id: channelId }),
    );
    const params = encodeURIComponent(JSON.stringify({ token: owner.token }));
    const response = await fetchSse(`messages.onChannel?input=${input}&connectionParams=${params}`);
    expect(response).toMatchObject({ message: TOO_DEEP, data: { code: "BAD_REQUEST", httpStatus: 400 } });
  });

  it("WebSocket: a frame whose input nests too deep gets the malformed-frame error; the connection goes on", async () => {
    const before = await storedMessages();
    const raw = await signedInSocket();
    const request = (id: number, depth: number) =>
      `{"id":${id},"method":"mutation","params":{"path":"messages.post","input":${objectOfDepth(depth, {
        workspace_id: workspaceId,
        channel_id: channelId,
        content: `ws ${depth}`,
      })}}}`;
    raw.sendText(request(1, MAX_JSON_DEPTH));
    expect((await raw.next((frame) => frame.id === 1)).result.type).toBe("data");

    raw.sendText("{");
    const malformed = await raw.next((frame) => frame.id === null);
    for (const frame of [request(2, MAX_JSON_DEPTH + 1), `[${request(3, MAX_JSON_DEPTH + 1)}]`, request(4, 100_000)]) {
      const from = raw.frames.length;
      raw.sendText(frame);
      const refused = await raw.next((candidate) => candidate.id === null, from);
      expect(refused).toEqual({ ...malformed, error: { ...malformed.error, message: TOO_DEEP } });
      expect(refused.error.data.code).toBe("PARSE_ERROR");
    }
    raw.sendText(`[${request(5, MAX_JSON_DEPTH)}]`);
    expect((await raw.next((frame) => frame.id === 5)).result.type).toBe("data");
    expect(raw.frames.filter((frame: Frame) => frame.id === 2 || frame.id === 3 || frame.id === 4)).toEqual([]);
    expect(await storedMessages()).toBe(before + 2);
  });

  it("WebSocket: connection params nested too deep are refused as malformed ones are, and the socket closes", async () => {
    const raw = await RawSocket.open(ctx.server.url);
    sockets.push(raw);
    raw.sendText(`{"method":"connectionParams","data":{"token":"x","deep":${nested(MAX_JSON_DEPTH + 1)}}}`);
    const refused = await raw.next((frame) => frame.id === null);
    expect(refused.error).toMatchObject({ data: { code: "PARSE_ERROR", httpStatus: 400 }, message: TOO_DEEP });
    expect(await raw.closed()).toBeDefined();
    // Within the limit, the usual answer to a bad token.
    const fine = await RawSocket.open(ctx.server.url);
    sockets.push(fine);
    fine.sendText(clientFrames.connectionParams({ token: owner.token }));
    fine.request(1, "query", "me.get");
    expect((await fine.next((frame) => frame.id === 1)).result.data.id).toBe(owner.id);
  });
});

describe("multipart: a form cut short is 400, and nothing of it stays", () => {
  async function storedFiles(): Promise<string[]> {
    const root = path.join(ctx.server.config.dataDir, "files");
    const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
    return entries.filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
  }
  async function stagedRows(): Promise<number> {
    const [row] = await ctx.server.app.deps.db
      .select({ n: count() })
      .from(attachments)
      .where(and(eq(attachments.uploaderId, owner.id)));
    return Number(row!.n);
  }

  it("a body that ends inside the file part, or after it without the closing boundary", async () => {
    const filesBefore = await storedFiles();
    const rowsBefore = await stagedRows();
    const boundary = "CUTSHORT";
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n`;
    for (const body of [
      `${head}hello wor`,
      `${head}hello world\r\n--${boundary}\r\n`,
      `${head}hello world\r\n--${boundary}\r\nContent-Disposition: form-data; name="other"\r\n\r\nhal`,
      `--${boundary}\r\nContent-Disposition: form-da`,
    ]) {
      const response = await rawHttp(multipartRequest(boundary, body));
      expect(response.status, body).toBe(400);
      expect(JSON.parse(response.body)).toEqual({ message: "Malformed multipart body." });
    }
    expect(await stagedRows()).toBe(rowsBefore);
    expect(await storedFiles()).toEqual(filesBefore);

    // The same upload, whole, is staged.
    const whole = await rawHttp(multipartRequest(boundary, `${head}hello world\r\n--${boundary}--\r\n`));
    expect(whole.status).toBe(201);
    expect(await stagedRows()).toBe(rowsBefore + 1);
  });
});

describe("history cursor: `before` is a message id", () => {
  it("REST: anything else is 422 on `before`, for channel and conversation history", async () => {
    const page = await ctx.api.get(`${channelPath}?limit=1`, { token: owner.token });
    expect(page.status).toBe(200);
    for (const path of [channelPath, conversationPath]) {
      for (const cursor of [
        "zzz",
        "msg_",
        `msg_${"Z".repeat(25)}`,
        `msg_${"z".repeat(26)}`,
        `att_${"0".repeat(26)}`,
        "'; drop",
      ]) {
        const refused = await ctx.api.get(`${path}?before=${encodeURIComponent(cursor)}`, { token: owner.token });
        expect(refused.status, `${path} ${cursor}`).toBe(422);
        expect(refused.body).toEqual({
          message: VALIDATION,
          errors: { before: ["The before field must be a message id."] },
        });
      }
      // A well-formed id is a position, whether or not that message exists.
      const older = await ctx.api.get(`${path}?before=msg_${"0".repeat(26)}`, { token: owner.token });
      expect(older.status).toBe(200);
      expect(older.body.data).toEqual([]);
    }
    if (page.body.meta.next_cursor) {
      const next = await ctx.api.get(`${channelPath}?before=${page.body.meta.next_cursor}`, { token: owner.token });
      expect(next.status).toBe(200);
    }
  });

  it("tRPC: UNPROCESSABLE_CONTENT with errors.before", async () => {
    const client = chat(owner.token);
    const refused = await rejectionOf(client.direct.messages.query({ conversation_id: conversationId, before: "zzz" }));
    expect(refused.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      errors: { before: ["The before field must be a message id."] },
    });
  });
});

describe("the admin route (the CLI's door to a running server)", () => {
  async function signed(body: string): Promise<ApiResponse> {
    const timestamp = Math.floor(Date.now() / 1000);
    const response = await fetch(`${ctx.server.url}${ADMIN_ROUTE}`, {
      method: "POST",
      headers: {
        "X-Admin-Timestamp": String(timestamp),
        "X-Admin-Signature": signAdminRequest(ctx.server.app.deps.keys, timestamp, body),
      },
      body,
    });
    return { status: response.status, body: await response.json(), headers: response.headers };
  }

  it("a signed body that is malformed or too deep is 400, arguments with NUL 422; never 500", async () => {
    expect(await signed("{")).toMatchObject({ status: 400, body: { message: "Malformed JSON in the request body." } });
    expect(await signed(`{"args":${nested(MAX_JSON_DEPTH + 1)}}`)).toMatchObject({
      status: 400,
      body: { message: TOO_DEEP },
    });
    const nul = await signed(JSON.stringify({ args: ["user:deactivate", `${owner.email}\u0000`] }));
    expect(nul).toMatchObject({
      status: 422,
      body: { message: "The arguments contain characters that are not allowed." },
    });
    expect((await ctx.api.get("/api/v1/me", { token: owner.token })).status).toBe(200);
  });
});

describe("request targets", () => {
  it("GET // is 404, a target that is no URL 400; never 500", async () => {
    const slashes = await rawHttp("GET // HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    expect(slashes.status).toBe(404);
    expect(JSON.parse(slashes.body)).toEqual({ message: expect.any(String) });
    // "//healthz" is a path, not a host named healthz.
    const notHealth = await rawHttp("GET //healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    expect(notHealth.status).toBe(404);
    const garbage = await rawHttp("GET http://a:b@ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    expect(garbage.status).toBe(400);
    expect(JSON.parse(garbage.body)).toEqual({ message: "Bad Request." });
    const health = await rawHttp("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    expect(health.status).toBe(200);
  });

  it("what Node's HTTP parser refuses is 400 or 431 with a JSON {message}, not an empty body", async () => {
    const malformed = await rawHttp("GET /healthz HTTP/1.1\r\nHost localhost\r\n\r\n");
    expect(malformed.status).toBe(400);
    expect(JSON.parse(malformed.body)).toEqual({ message: "Bad Request." });
    const huge = await rawHttp(`GET /api/v1/me?q=${"x".repeat(20_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    expect(huge.status).toBe(431);
    expect(JSON.parse(huge.body)).toEqual({ message: "Request Header Fields Too Large." });
  });

  it("query keys named like Object.prototype members (valueOf, __proto__) are ignored, never a 500", async () => {
    const { workspaceId } = await createWorkspaceWithGeneral(ctx.api, owner);
    for (const key of ["valueOf", "__proto__", "constructor", "toString", "hasOwnProperty"]) {
      const response = await ctx.api.get(`/api/v1/workspaces/${workspaceId}?${key}=1&${key}=2`, { token: owner.token });
      expect(response.status, key).toBe(200);
      expect(response.body.data.id).toBe(workspaceId);
    }
    const history = await ctx.api.get(`/api/v1/workspaces/${workspaceId}/channels?valueOf=1`, { token: owner.token });
    expect(history.status).toBe(200);
  });
});

describe("the checks themselves", () => {
  it("jsonNestsDeeperThan counts arrays and objects, not brackets in strings, escapes included", () => {
    expect(jsonNestsDeeperThan("[]", 1)).toBe(false);
    expect(jsonNestsDeeperThan("[]", 0)).toBe(true);
    expect(jsonNestsDeeperThan('{"a":[{"b":[]}]}', 4)).toBe(false);
    expect(jsonNestsDeeperThan('{"a":[{"b":[]}]}', 3)).toBe(true);
    expect(jsonNestsDeeperThan("[1],[2],[3]", 1)).toBe(false);
    expect(jsonNestsDeeperThan('"[[[[{{{{"', 0)).toBe(false);
    expect(jsonNestsDeeperThan(String.raw`["\\"[[`, 2)).toBe(true); // the string is one backslash; [[ follow it
    expect(jsonNestsDeeperThan(String.raw`["\"[[[["]`, 1)).toBe(false); // an escaped quote keeps the string open
    expect(jsonNestsDeeperThan(nested(MAX_JSON_DEPTH))).toBe(false);
    expect(jsonNestsDeeperThan(nested(MAX_JSON_DEPTH + 1))).toBe(true);
    expect(jsonNestsDeeperThan(nested(1_000_000))).toBe(true);
    expect(startsWithJsonArray(" \n\t[1]")).toBe(true);
    expect(startsWithJsonArray(' {"a":[]}')).toBe(false);
  });

  it("findUnsafeText finds NUL and lone surrogates in values and keys, however deep, and nothing else", () => {
    expect(isSafeText("emoji \u{1F600}, accents \u00e9, replacement \ufffd")).toBe(true);
    for (const text of ["\u0000", "a\ud800", "\udc00a", "\ud800\ud800\udc00", "\udfff\ud800"])
      expect(isSafeText(text), JSON.stringify(text)).toBe(false);
    expect(findUnsafeText({ a: ["ok", "b\u0000"], c: { "k\u0000": 1 }, d: 5, e: null })).toEqual([["a", 1], ["c"]]);
    let deep: unknown = "\ud800";
    for (let level = 0; level < 100_000; level++) deep = [deep];
    expect(findUnsafeText(deep)).toEqual([Array(100_000).fill(0)]);
    expect(findUnsafeText(new Date())).toEqual([]);
  });
});
