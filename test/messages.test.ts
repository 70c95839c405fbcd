// Channel messages, threads, history pages and direct chat over REST against the real server
// (and a few of the same procedures through the typed client): the contract's message and
// direct-conversation records, the Limits table at its boundaries, membership and visibility.
// Attachment upload and download are tested elsewhere; only an unknown attachment id is here.
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { createChatClient, type ChatClient } from "@chat-service/client";
import type { ApiResponse } from "./helpers/api.ts";
import { registerUser, uniqueEmail, type RegisteredUser } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";
import { rejectionOf } from "./helpers/rpc.ts";

const ctx = useTestServer();

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$/;
const VALIDATION_MESSAGE = "The given data was invalid.";
const UNAUTHENTICATED = { message: "Unauthenticated." };

const workspacePath = (id: string) => `/api/v1/workspaces/${id}`;
const channelsPath = (workspaceId: string) => `${workspacePath(workspaceId)}/channels`;
const channelPath = (workspaceId: string, channelId: string) => `${channelsPath(workspaceId)}/${channelId}`;
const messagesPath = (workspaceId: string, channelId: string) => `${channelPath(workspaceId, channelId)}/messages`;
const conversationMessagesPath = (conversationId: string) => `/api/v1/direct-conversations/${conversationId}/messages`;

type Workspace = { id: string; [key: string]: unknown };
type Channel = { id: string; slug: string; [key: string]: unknown };
type Message = { id: string; content: string; reply_count: number; [key: string]: unknown };

function expectFieldError(response: ApiResponse, field: string): void {
  expect(response.status, JSON.stringify(response.body)).toBe(422);
  expect(response.body).toEqual({ message: VALIDATION_MESSAGE, errors: { [field]: [expect.any(String)] } });
}

function expectMessage(response: ApiResponse, status: number): void {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body).toEqual({ message: expect.any(String) });
}

async function createWorkspace(owner: RegisteredUser, body: Record<string, unknown> = {}): Promise<Workspace> {
  const response = await ctx.api.post("/api/v1/workspaces", { name: "Team", ...body }, { token: owner.token });
  if (response.status !== 201) throw new Error(`workspace create: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.data;
}

async function createChannel(
  owner: RegisteredUser,
  workspaceId: string,
  body: Record<string, unknown> = {},
): Promise<Channel> {
  const response = await ctx.api.post(
    channelsPath(workspaceId),
    { name: `Channel ${randomBytes(3).toString("hex")}`, ...body },
    { token: owner.token },
  );
  if (response.status !== 201) throw new Error(`channel create: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.data;
}

async function joinWorkspace(user: RegisteredUser, workspaceId: string): Promise<void> {
  const response = await ctx.api.post(`${workspacePath(workspaceId)}/join`, {}, { token: user.token });
  if (response.status !== 200) throw new Error(`join: ${response.status} ${JSON.stringify(response.body)}`);
}

async function generalChannel(user: RegisteredUser, workspaceId: string): Promise<Channel> {
  const response = await ctx.api.get(channelsPath(workspaceId), { token: user.token });
  expect(response.status).toBe(200);
  const general = (response.body.data as Channel[]).find((channel) => channel.slug === "general");
  if (!general) throw new Error("no #general");
  return general;
}

/** A public workspace with its owner, a second member (in #general by joining) and an outsider. */
async function team() {
  const [owner, member, outsider] = await Promise.all([
    registerUser(ctx.api, { name: "Olive Owner" }),
    registerUser(ctx.api, { name: "Mia Member" }),
    registerUser(ctx.api, { name: "Oscar Outsider" }),
  ]);
  const workspace = await createWorkspace(owner!, { visibility: "public" });
  await joinWorkspace(member!, workspace.id);
  const general = await generalChannel(owner!, workspace.id);
  return { owner: owner!, member: member!, outsider: outsider!, workspace, general };
}

async function post(
  user: RegisteredUser,
  workspaceId: string,
  channelId: string,
  body: Record<string, unknown>,
): Promise<ApiResponse> {
  return ctx.api.post(messagesPath(workspaceId, channelId), body, { token: user.token });
}

async function postOk(
  user: RegisteredUser,
  workspaceId: string,
  channelId: string,
  body: Record<string, unknown>,
): Promise<Message> {
  const response = await post(user, workspaceId, channelId, body);
  if (response.status !== 201) throw new Error(`post: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.data;
}

async function history(user: RegisteredUser, workspaceId: string, channelId: string, query = ""): Promise<ApiResponse> {
  return ctx.api.get(`${messagesPath(workspaceId, channelId)}${query}`, { token: user.token });
}

/** The record the contract describes for a user's channel message. */
function channelMessage(
  author: RegisteredUser,
  workspaceId: string,
  channelId: string,
  extra: Record<string, unknown>,
) {
  return {
    id: expect.stringMatching(/^msg_[0-9A-Z]{26}$/),
    workspace_id: workspaceId,
    channel_id: channelId,
    conversation_id: null,
    room_id: null,
    author: { type: "user", id: author.id, name: author.name, avatar_url: null },
    content: expect.any(String),
    type: "text",
    parent_message_id: null,
    reply_count: 0,
    attachments: [],
    skip_translation: false,
    translation: null,
    client_message_id: null,
    mentioned_user_ids: [],
    mentions_channel: false,
    reactions: [],
    edited_at: null,
    deleted_at: null,
    created_at: expect.stringMatching(ISO_WITH_OFFSET),
    updated_at: expect.stringMatching(ISO_WITH_OFFSET),
    ...extra,
  };
}

function directMessage(author: RegisteredUser, conversationId: string, extra: Record<string, unknown>) {
  return {
    ...channelMessage(author, "", "", extra),
    workspace_id: null,
    channel_id: null,
    conversation_id: conversationId,
    room_id: null,
    ...extra,
  };
}

async function openConversation(user: RegisteredUser, other: RegisteredUser | number | string): Promise<ApiResponse> {
  const participant = typeof other === "object" ? other.id : other;
  return ctx.api.post("/api/v1/direct-conversations", { participant_user_id: participant }, { token: user.token });
}

async function conversationId(user: RegisteredUser, other: RegisteredUser): Promise<string> {
  const response = await openConversation(user, other);
  if (response.status !== 201 && response.status !== 200)
    throw new Error(`open: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.data.id;
}

describe("posting in a channel", () => {
  it("posts to #general: 201 {data} with exactly the contract's message fields", async () => {
    const { owner, workspace, general } = await team();
    const response = await post(owner, workspace.id, general.id, { content: "Hello, team!" });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      data: channelMessage(owner, workspace.id, general.id, { content: "Hello, team!" }),
    });
    expect(Object.keys(response.body.data).sort()).toEqual(
      [
        "id",
        "workspace_id",
        "channel_id",
        "conversation_id",
        "room_id",
        "author",
        "content",
        "type",
        "parent_message_id",
        "reply_count",
        "attachments",
        "skip_translation",
        "translation",
        "client_message_id",
        "mentioned_user_ids",
        "mentions_channel",
        "reactions",
        "edited_at",
        "deleted_at",
        "created_at",
        "updated_at",
      ].sort(),
    );
    // Another member reads the same record in the history.
    const list = await history(owner, workspace.id, general.id);
    expect(list.body.data).toEqual([response.body.data]);
  });

  it("accepts a body sent as application/json; charset=utf-8", async () => {
    const { owner, workspace, general } = await team();
    const response = await ctx.api.post(
      messagesPath(workspace.id, general.id),
      JSON.stringify({ content: "charset" }),
      { token: owner.token, headers: { "Content-Type": "application/json; charset=utf-8" } },
    );
    expect(response.status).toBe(201);
    expect(response.body.data.content).toBe("charset");
  });

  it("requires content when attachment_ids is absent (key content), also when it is only spaces", async () => {
    const { owner, workspace, general } = await team();
    expectFieldError(await post(owner, workspace.id, general.id, {}), "content");
    expectFieldError(await post(owner, workspace.id, general.id, { content: "" }), "content");
    expectFieldError(await post(owner, workspace.id, general.id, { content: "   " }), "content");
    expectFieldError(await post(owner, workspace.id, general.id, { content: "   ", attachment_ids: [] }), "content");
    expectFieldError(await post(owner, workspace.id, general.id, { content: 42 }), "content");
    // Nothing was posted.
    expect((await history(owner, workspace.id, general.id)).body.data).toEqual([]);
  });

  it("takes content of 40000 characters and refuses 40001 (key content)", async () => {
    const { owner, workspace, general } = await team();
    const longest = "a".repeat(40_000);
    const ok = await post(owner, workspace.id, general.id, { content: longest });
    expect(ok.status).toBe(201);
    expect(ok.body.data.content).toBe(longest);
    expectFieldError(await post(owner, workspace.id, general.id, { content: "a".repeat(40_001) }), "content");
    expect((await history(owner, workspace.id, general.id)).body.data.map((m: Message) => m.id)).toEqual([
      ok.body.data.id,
    ]);
  });

  it("refuses an attachment id that is not a staged upload of the poster (key attachment_ids.0)", async () => {
    const { owner, workspace, general } = await team();
    expectFieldError(
      await post(owner, workspace.id, general.id, { content: "see file", attachment_ids: ["att_nope"] }),
      "attachment_ids.0",
    );
    // Without content too: attachment_ids stands in for content, and the unknown id is the error.
    expectFieldError(await post(owner, workspace.id, general.id, { attachment_ids: ["att_nope"] }), "attachment_ids.0");
    // The failed posts left nothing behind.
    expect((await history(owner, workspace.id, general.id)).body.data).toEqual([]);
  });

  it("takes type text (default) and notice; system is the server's alone; others are refused (key type)", async () => {
    const { owner, workspace, general } = await team();
    const text = await post(owner, workspace.id, general.id, { content: "plain", type: "text" });
    expect(text.status).toBe(201);
    expect(text.body.data.type).toBe("text");
    const nullType = await post(owner, workspace.id, general.id, { content: "null type", type: null });
    expect(nullType.status).toBe(201);
    expect(nullType.body.data.type).toBe("text");
    const notice = await post(owner, workspace.id, general.id, { content: "heads up", type: "notice" });
    expect(notice.status).toBe(201);
    expect(notice.body.data).toEqual(
      channelMessage(owner, workspace.id, general.id, { content: "heads up", type: "notice" }),
    );
    expectFieldError(await post(owner, workspace.id, general.id, { content: "fake", type: "system" }), "type");
    expectFieldError(await post(owner, workspace.id, general.id, { content: "fake", type: "shout" }), "type");
    expect((await history(owner, workspace.id, general.id)).body.data.map((m: Message) => m.content)).toEqual([
      "heads up",
      "null type",
      "plain",
    ]);
  });

  it('reads skip_translation as a boolean: true, false, 1, 0, "1", "0"; refuses "yes"', async () => {
    const { owner, workspace, general } = await team();
    const cases: [unknown, boolean][] = [
      [true, true],
      [false, false],
      [1, true],
      [0, false],
      ["1", true],
      ["0", false],
      [null, false],
    ];
    for (const [sent, stored] of cases) {
      const response = await post(owner, workspace.id, general.id, {
        content: `skip ${JSON.stringify(sent)}`,
        skip_translation: sent,
      });
      expect(response.status, `skip_translation ${JSON.stringify(sent)}`).toBe(201);
      expect(response.body.data.skip_translation, `skip_translation ${JSON.stringify(sent)}`).toBe(stored);
    }
    expectFieldError(
      await post(owner, workspace.id, general.id, { content: "skip yes", skip_translation: "yes" }),
      "skip_translation",
    );
    expectFieldError(
      await post(owner, workspace.id, general.id, { content: "skip 2", skip_translation: 2 }),
      "skip_translation",
    );
  });

  it("needs channel membership to post: a member who has not joined a public channel gets 403, then joins", async () => {
    const { owner, member, workspace } = await team();
    const random = await createChannel(owner, workspace.id, { visibility: "public" });
    // The member sees and reads the public channel ...
    expect((await history(member, workspace.id, random.id)).status).toBe(200);
    // ... but has not joined it.
    expectMessage(await post(member, workspace.id, random.id, { content: "let me in" }), 403);
    const joined = await ctx.api.post(`${channelPath(workspace.id, random.id)}/join`, {}, { token: member.token });
    expect(joined.status).toBe(200);
    const posted = await post(member, workspace.id, random.id, { content: "in now" });
    expect(posted.status).toBe(201);
    expect(posted.body.data).toEqual(channelMessage(member, workspace.id, random.id, { content: "in now" }));
    expect((await history(owner, workspace.id, random.id)).body.data.map((m: Message) => m.content)).toEqual([
      "in now",
    ]);
  });

  it("answers 404 to someone outside the workspace, and for a private channel that is not theirs", async () => {
    const { owner, member, outsider, workspace, general } = await team();
    expectMessage(await post(outsider, workspace.id, general.id, { content: "hi" }), 404);
    expectMessage(await history(outsider, workspace.id, general.id), 404);

    const secret = await createChannel(owner, workspace.id, { visibility: "private" });
    expect((await post(owner, workspace.id, secret.id, { content: "owners only" })).status).toBe(201);
    expectMessage(await post(member, workspace.id, secret.id, { content: "peek" }), 404);
    expectMessage(await history(member, workspace.id, secret.id), 404);

    // An unknown channel, and a channel of another workspace under this workspace's path.
    expectMessage(await post(owner, workspace.id, "ch_nope", { content: "x" }), 404);
    const elsewhere = await createWorkspace(owner);
    const elsewhereGeneral = await generalChannel(owner, elsewhere.id);
    expectMessage(await post(owner, workspace.id, elsewhereGeneral.id, { content: "x" }), 404);
  });

  it("answers 401 without a token", async () => {
    const { workspace, general } = await team();
    const posted = await ctx.api.post(messagesPath(workspace.id, general.id), { content: "anon" });
    expect(posted.status).toBe(401);
    expect(posted.body).toEqual(UNAUTHENTICATED);
    const listed = await ctx.api.get(messagesPath(workspace.id, general.id));
    expect(listed.status).toBe(401);
    expect(listed.body).toEqual(UNAUTHENTICATED);
  });
});

describe("channel history", () => {
  it("lists newest first as {data, meta: {next_cursor}}", async () => {
    const { owner, member, workspace, general } = await team();
    const first = await postOk(owner, workspace.id, general.id, { content: "one" });
    const second = await postOk(member, workspace.id, general.id, { content: "two" });
    const third = await postOk(owner, workspace.id, general.id, { content: "three" });
    const response = await history(member, workspace.id, general.id);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ data: [third, second, first], meta: { next_cursor: null } });
  });

  it("takes limit 1..100 (0 and 101 are 422 with key limit), 50 by default", async () => {
    const { owner, workspace, general } = await team();
    for (let index = 0; index < 52; index++) await postOk(owner, workspace.id, general.id, { content: `m${index}` });
    const byDefault = await history(owner, workspace.id, general.id);
    expect(byDefault.status).toBe(200);
    expect(byDefault.body.data).toHaveLength(50);
    expect(byDefault.body.meta.next_cursor).toBe(byDefault.body.data[49].id);

    const one = await history(owner, workspace.id, general.id, "?limit=1");
    expect(one.status).toBe(200);
    expect(one.body.data.map((m: Message) => m.content)).toEqual(["m51"]);
    expect(one.body.meta).toEqual({ next_cursor: one.body.data[0].id });

    const hundred = await history(owner, workspace.id, general.id, "?limit=100");
    expect(hundred.status).toBe(200);
    expect(hundred.body.data).toHaveLength(52);
    expect(hundred.body.meta).toEqual({ next_cursor: null });

    expectFieldError(await history(owner, workspace.id, general.id, "?limit=0"), "limit");
    expectFieldError(await history(owner, workspace.id, general.id, "?limit=101"), "limit");
    expectFieldError(await history(owner, workspace.id, general.id, "?limit=abc"), "limit");
  });

  it("walks 125 messages with before=next_cursor: each exactly once, in order, then next_cursor null", async () => {
    const { owner, member, workspace, general } = await team();
    const posted: Message[] = [];
    for (let index = 0; index < 125; index++) {
      const author = index % 3 === 0 ? member : owner;
      posted.push(await postOk(author, workspace.id, general.id, { content: `message #${index}` }));
    }
    const seen: Message[] = [];
    const pageSizes: number[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const query: string = cursor ? `?limit=50&before=${cursor}` : "?limit=50";
      const page = await history(owner, workspace.id, general.id, query);
      expect(page.status).toBe(200);
      pageSizes.push(page.body.data.length);
      seen.push(...page.body.data);
      cursor = page.body.meta.next_cursor;
      if (cursor === null) break;
      expect(cursor).toBe(page.body.data.at(-1).id);
    }
    expect(pageSizes).toEqual([50, 50, 25]);
    expect(cursor).toBeNull();
    expect(seen.map((message) => message.content)).toEqual(posted.map((message) => message.content).reverse());
    expect(new Set(seen.map((message) => message.id)).size).toBe(125);
    expect(seen).toEqual([...posted].reverse());
  });

  it("treats before as a position in id order, also for an id that is no message (observed behaviour)", async () => {
    const { owner, workspace, general } = await team();
    const first = await postOk(owner, workspace.id, general.id, { content: "first" });
    const second = await postOk(owner, workspace.id, general.id, { content: "second" });
    // A real message id: the older ones.
    expect((await history(owner, workspace.id, general.id, `?before=${second.id}`)).body).toEqual({
      data: [first],
      meta: { next_cursor: null },
    });
    // Observed: an unknown id is not an error; it is compared with message ids as a string.
    // One that sorts after every id ("msg_ZZZ…") gives the newest messages ...
    const after = await history(owner, workspace.id, general.id, `?before=msg_${"Z".repeat(26)}`);
    expect(after.status).toBe(200);
    expect(after.body).toEqual({ data: [second, first], meta: { next_cursor: null } });
    // ... and one that sorts before every id ("msg_000…") gives nothing.
    const before = await history(owner, workspace.id, general.id, `?before=msg_${"0".repeat(26)}`);
    expect(before.status).toBe(200);
    expect(before.body).toEqual({ data: [], meta: { next_cursor: null } });
  });
});

describe("threads", () => {
  it("replies to a top-level message: the reply names its parent, the parent counts replies", async () => {
    const { owner, member, workspace, general } = await team();
    const parent = await postOk(owner, workspace.id, general.id, { content: "Lunch?" });
    const reply = await post(member, workspace.id, general.id, { content: "Yes!", parent_message_id: parent.id });
    expect(reply.status).toBe(201);
    expect(reply.body.data).toEqual(
      channelMessage(member, workspace.id, general.id, { content: "Yes!", parent_message_id: parent.id }),
    );
    const second = await postOk(owner, workspace.id, general.id, { content: "Great", parent_message_id: parent.id });
    const after = await postOk(owner, workspace.id, general.id, { content: "Top-level again" });

    // History lists top-level messages only, with the parent's reply count.
    const top = await history(member, workspace.id, general.id);
    expect(top.body).toEqual({
      data: [after, { ...parent, reply_count: 2 }],
      meta: { next_cursor: null },
    });

    // The thread, newest first.
    const thread = await history(member, workspace.id, general.id, `?parent_message_id=${parent.id}`);
    expect(thread.status).toBe(200);
    expect(thread.body).toEqual({ data: [second, reply.body.data], meta: { next_cursor: null } });
    // A thread page by page.
    const firstPage = await history(member, workspace.id, general.id, `?parent_message_id=${parent.id}&limit=1`);
    expect(firstPage.body).toEqual({ data: [second], meta: { next_cursor: second.id } });
    const secondPage = await history(
      member,
      workspace.id,
      general.id,
      `?parent_message_id=${parent.id}&limit=1&before=${second.id}`,
    );
    expect(secondPage.body).toEqual({ data: [reply.body.data], meta: { next_cursor: null } });
  });

  it("refuses a parent that is a reply, in another channel, or unknown (key parent_message_id)", async () => {
    const { owner, workspace, general } = await team();
    const other = await createChannel(owner, workspace.id);
    const parent = await postOk(owner, workspace.id, general.id, { content: "parent" });
    const reply = await postOk(owner, workspace.id, general.id, { content: "reply", parent_message_id: parent.id });
    const elsewhere = await postOk(owner, workspace.id, other.id, { content: "elsewhere" });

    expectFieldError(
      await post(owner, workspace.id, general.id, { content: "nested", parent_message_id: reply.id }),
      "parent_message_id",
    );
    expectFieldError(
      await post(owner, workspace.id, general.id, { content: "cross", parent_message_id: elsewhere.id }),
      "parent_message_id",
    );
    expectFieldError(
      await post(owner, workspace.id, general.id, { content: "ghost", parent_message_id: "msg_nope" }),
      "parent_message_id",
    );
    // The refused replies counted nowhere and were not stored.
    expect((await history(owner, workspace.id, general.id)).body.data).toEqual([{ ...parent, reply_count: 1 }]);
    expect((await history(owner, workspace.id, other.id)).body.data).toEqual([elsewhere]);
    expect(
      (await history(owner, workspace.id, general.id, `?parent_message_id=${parent.id}`)).body.data.map(
        (m: Message) => m.id,
      ),
    ).toEqual([reply.id]);
  });

  it("takes parent_message_id null as a top-level post", async () => {
    const { owner, workspace, general } = await team();
    const response = await post(owner, workspace.id, general.id, { content: "top", parent_message_id: null });
    expect(response.status).toBe(201);
    expect(response.body.data.parent_message_id).toBeNull();
  });
});

describe("direct conversations", () => {
  it("opens a conversation: 201 the first time, 200 with the same id after, also from the other side", async () => {
    const [alice, bob] = await Promise.all([
      registerUser(ctx.api, { name: "Alice" }),
      registerUser(ctx.api, { name: "Bob" }),
    ]);
    const created = await openConversation(alice, bob.id);
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      data: {
        id: expect.stringMatching(/^dm_[0-9A-Z]{26}$/),
        participant: { id: bob.id, name: "Bob", email: bob.email, avatar_url: null },
        last_message: null,
        created_at: expect.stringMatching(ISO_WITH_OFFSET),
        updated_at: expect.stringMatching(ISO_WITH_OFFSET),
      },
    });
    const again = await openConversation(alice, String(bob.id));
    expect(again.status).toBe(200);
    expect(again.body).toEqual(created.body);

    const fromBob = await openConversation(bob, alice.id);
    expect(fromBob.status).toBe(200);
    expect(fromBob.body).toEqual({
      data: {
        ...created.body.data,
        participant: { id: alice.id, name: "Alice", email: alice.email, avatar_url: null },
      },
    });
  });

  it("takes participant_user_id as a numeric string the first time too", async () => {
    const [alice, bob] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const created = await openConversation(alice, String(bob.id));
    expect(created.status).toBe(201);
    expect(created.body.data.participant.id).toBe(bob.id);
  });

  it("refuses a conversation with yourself, an unknown user and a bad id (422, key participant_user_id)", async () => {
    const alice = await registerUser(ctx.api);
    expectFieldError(await openConversation(alice, alice.id), "participant_user_id");
    expectFieldError(await openConversation(alice, String(alice.id)), "participant_user_id");
    expectFieldError(await openConversation(alice, 999_999_999), "participant_user_id");
    expectFieldError(await openConversation(alice, "bob"), "participant_user_id");
    expectFieldError(
      await ctx.api.post("/api/v1/direct-conversations", {}, { token: alice.token }),
      "participant_user_id",
    );
    expect((await ctx.api.get("/api/v1/direct-conversations", { token: alice.token })).body.data).toEqual([]);
  });

  it("posts and lists direct messages, paginated, newest first", async () => {
    const [alice, bob] = await Promise.all([
      registerUser(ctx.api, { name: "Alice" }),
      registerUser(ctx.api, { name: "Bob" }),
    ]);
    const id = await conversationId(alice, bob);
    const posted = await ctx.api.post(conversationMessagesPath(id), { content: "Hi Bob" }, { token: alice.token });
    expect(posted.status).toBe(201);
    expect(posted.body).toEqual({ data: directMessage(alice, id, { content: "Hi Bob" }) });
    const answer = await ctx.api.post(conversationMessagesPath(id), { content: "Hi Alice" }, { token: bob.token });
    expect(answer.status).toBe(201);
    const third = await ctx.api.post(conversationMessagesPath(id), { content: "How are you?" }, { token: alice.token });

    const all = await ctx.api.get(conversationMessagesPath(id), { token: bob.token });
    expect(all.status).toBe(200);
    expect(all.body).toEqual({
      data: [third.body.data, answer.body.data, posted.body.data],
      meta: { next_cursor: null },
    });
    const page = await ctx.api.get(`${conversationMessagesPath(id)}?limit=2`, { token: alice.token });
    expect(page.body).toEqual({
      data: [third.body.data, answer.body.data],
      meta: { next_cursor: answer.body.data.id },
    });
    const rest = await ctx.api.get(`${conversationMessagesPath(id)}?limit=2&before=${answer.body.data.id}`, {
      token: alice.token,
    });
    expect(rest.body).toEqual({ data: [posted.body.data], meta: { next_cursor: null } });
    expectFieldError(await ctx.api.get(`${conversationMessagesPath(id)}?limit=0`, { token: alice.token }), "limit");
    expectFieldError(await ctx.api.get(`${conversationMessagesPath(id)}?limit=101`, { token: alice.token }), "limit");

    // The conversation now carries its last message.
    const reopened = await openConversation(bob, alice);
    expect(reopened.status).toBe(200);
    expect(reopened.body.data.last_message).toEqual(third.body.data);
  });

  it("applies the content rules to direct messages", async () => {
    const [alice, bob] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const id = await conversationId(alice, bob);
    const send = (body: Record<string, unknown>) =>
      ctx.api.post(conversationMessagesPath(id), body, { token: alice.token });
    expectFieldError(await send({}), "content");
    expectFieldError(await send({ content: "   " }), "content");
    expectFieldError(await send({ content: "a".repeat(40_001) }), "content");
    expectFieldError(await send({ content: "file", attachment_ids: ["att_nope"] }), "attachment_ids.0");
    const longest = await send({ content: "b".repeat(40_000) });
    expect(longest.status).toBe(201);
    expect(longest.body.data.content).toHaveLength(40_000);
    expect((await ctx.api.get(conversationMessagesPath(id), { token: bob.token })).body.data).toEqual([
      longest.body.data,
    ]);
  });

  it("ignores parent_message_id, type and skip_translation on a direct message (channel-only fields)", async () => {
    const [alice, bob] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const id = await conversationId(alice, bob);
    const first = await ctx.api.post(conversationMessagesPath(id), { content: "first" }, { token: alice.token });
    const response = await ctx.api.post(
      conversationMessagesPath(id),
      { content: "with channel fields", parent_message_id: first.body.data.id, type: "notice", skip_translation: true },
      { token: alice.token },
    );
    // Observed and accepted: the fields are not part of the direct-message body and are dropped.
    expect(response.status).toBe(201);
    expect(response.body.data).toEqual(directMessage(alice, id, { content: "with channel fields" }));
    const system = await ctx.api.post(
      conversationMessagesPath(id),
      { content: "system?", type: "system" },
      { token: alice.token },
    );
    expect(system.status).toBe(201);
    expect(system.body.data.type).toBe("text");
  });

  it("lists the caller's conversations with their last message, most recent first", async () => {
    const [alice, bob, carol, dave] = await Promise.all([
      registerUser(ctx.api, { name: "Alice" }),
      registerUser(ctx.api, { name: "Bob" }),
      registerUser(ctx.api, { name: "Carol" }),
      registerUser(ctx.api, { name: "Dave" }),
    ]);
    const withBob = await conversationId(alice, bob);
    const withCarol = await conversationId(alice, carol);
    const withDave = await conversationId(dave, alice); // opened by the other side
    await conversationId(bob, carol); // not Alice's

    await ctx.api.post(conversationMessagesPath(withBob), { content: "to bob 1" }, { token: alice.token });
    await ctx.api.post(conversationMessagesPath(withCarol), { content: "to carol" }, { token: alice.token });
    const latestBob = await ctx.api.post(
      conversationMessagesPath(withBob),
      { content: "from bob" },
      { token: bob.token },
    );

    const list = await ctx.api.get("/api/v1/direct-conversations", { token: alice.token });
    expect(list.status).toBe(200);
    expect(list.body.data.map((conversation: { id: string }) => conversation.id)).toEqual([
      withBob,
      withCarol,
      withDave,
    ]);
    expect(list.body.data[0]).toEqual({
      id: withBob,
      participant: { id: bob.id, name: "Bob", email: bob.email, avatar_url: null },
      last_message: latestBob.body.data,
      created_at: expect.stringMatching(ISO_WITH_OFFSET),
      updated_at: expect.stringMatching(ISO_WITH_OFFSET),
      // Alice's read state (docs/unread.md): Bob's message is unread, and counts as a mention;
      // her position is null or her own message, whether or not the read-positions consumer ran.
      last_read_message_id: expect.toSatisfy((id: unknown) => id === null || typeof id === "string"),
      unread_count: 1,
      mention_count: 1,
      muted: false,
    });
    expect(list.body.data[1].last_message).toEqual(
      expect.objectContaining({ content: "to carol", conversation_id: withCarol }),
    );
    expect(list.body.data[2]).toEqual(
      expect.objectContaining({
        participant: { id: dave.id, name: "Dave", email: dave.email, avatar_url: null },
        last_message: null,
      }),
    );
    expect(list.body.meta).toEqual({ total: 3 });

    // A new message moves a conversation to the top.
    await ctx.api.post(conversationMessagesPath(withDave), { content: "hey dave" }, { token: alice.token });
    const again = await ctx.api.get("/api/v1/direct-conversations", { token: alice.token });
    expect(again.body.data.map((conversation: { id: string }) => conversation.id)).toEqual([
      withDave,
      withBob,
      withCarol,
    ]);
    // Bob's own list names Alice as the participant.
    const bobs = await ctx.api.get("/api/v1/direct-conversations", { token: bob.token });
    expect(bobs.body.data.find((conversation: { id: string }) => conversation.id === withBob).participant.id).toBe(
      alice.id,
    );
  });

  it("hides a conversation from a third user: 404 on its messages, GET and POST", async () => {
    const [alice, bob, eve] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api), registerUser(ctx.api)]);
    const id = await conversationId(alice, bob);
    await ctx.api.post(conversationMessagesPath(id), { content: "private" }, { token: alice.token });
    expectMessage(await ctx.api.get(conversationMessagesPath(id), { token: eve.token }), 404);
    expectMessage(await ctx.api.post(conversationMessagesPath(id), { content: "intrude" }, { token: eve.token }), 404);
    expectMessage(await ctx.api.get(conversationMessagesPath("dm_nope"), { token: alice.token }), 404);
    expect(
      (await ctx.api.get(conversationMessagesPath(id), { token: bob.token })).body.data.map((m: Message) => m.content),
    ).toEqual(["private"]);
  });

  it("answers 401 without a token", async () => {
    const [alice, bob] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const id = await conversationId(alice, bob);
    for (const response of [
      await ctx.api.get("/api/v1/direct-conversations"),
      await ctx.api.post("/api/v1/direct-conversations", { participant_user_id: bob.id }),
      await ctx.api.get(conversationMessagesPath(id)),
      await ctx.api.post(conversationMessagesPath(id), { content: "anon" }),
      await ctx.api.post("/api/v1/direct-recipients/resolve", { email: bob.email }),
    ]) {
      expect(response.status).toBe(401);
      expect(response.body).toEqual(UNAUTHENTICATED);
    }
  });
});

/** A well-formed, unique e-mail address of exactly `length` characters (labels of at most 60). */
function emailOfLength(length: number): string {
  const local = randomBytes(5).toString("hex").padEnd(64, "a");
  let rest = length - local.length - 1 - ".test".length;
  const labels: string[] = [];
  while (rest > 0) {
    const size = Math.min(60, rest - (rest > 60 ? 2 : 0));
    labels.push("c".repeat(size));
    rest -= size + 1;
  }
  return `${local}@${labels.join(".")}.test`;
}

describe("direct recipient resolve", () => {
  const resolve = (user: RegisteredUser, email: unknown) =>
    ctx.api.post("/api/v1/direct-recipients/resolve", { email }, { token: user.token });

  it("resolves a registered e-mail to the user", async () => {
    const [alice, bob] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api, { name: "Bob Builder" })]);
    const response = await resolve(alice, bob.email);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ data: { id: bob.id, name: "Bob Builder", email: bob.email, avatar_url: null } });
    // Case and surrounding spaces do not matter.
    const shouted = await resolve(alice, `  ${bob.email.toUpperCase()} `);
    expect(shouted.status).toBe(200);
    expect(shouted.body.data.id).toBe(bob.id);
  });

  it("answers 404 {message} for an unknown e-mail", async () => {
    const alice = await registerUser(ctx.api);
    expectMessage(await resolve(alice, uniqueEmail("nobody")), 404);
  });

  it("refuses a missing or invalid e-mail and one of 256 characters (422 key email); 255 is valid", async () => {
    const alice = await registerUser(ctx.api);
    expectFieldError(await resolve(alice, "not-an-email"), "email");
    expectFieldError(await resolve(alice, ""), "email");
    expectFieldError(await ctx.api.post("/api/v1/direct-recipients/resolve", {}, { token: alice.token }), "email");

    const exactly255 = emailOfLength(255);
    const exactly256 = emailOfLength(256);
    expect(exactly255).toHaveLength(255);
    expect(exactly256).toHaveLength(256);

    expectFieldError(await resolve(alice, exactly256), "email");
    // 255 passes validation: unknown, so 404; registered, so 200.
    expectMessage(await resolve(alice, exactly255), 404);
    const longUser = await registerUser(ctx.api, { email: exactly255 });
    const found = await resolve(alice, exactly255);
    expect(found.status).toBe(200);
    expect(found.body.data).toEqual({ id: longUser.id, name: longUser.name, email: exactly255, avatar_url: null });
  });
});

describe("through the typed client", () => {
  // Queries and mutations only: these clients never open a WebSocket, but are closed anyway.
  const clients: ChatClient[] = [];
  afterAll(() => {
    for (const client of clients) client.close();
  });

  function chat(token: string): ChatClient {
    const client = createChatClient({ url: ctx.server.url, token });
    clients.push(client);
    return client;
  }

  it("posts and reads channel messages, with the same record as REST", async () => {
    const { owner, member, workspace, general } = await team();
    const client = chat(owner.token);
    const posted = await client.messages.post.mutate({
      workspace_id: workspace.id,
      channel_id: general.id,
      content: "via rpc",
      skip_translation: true,
    });
    expect(posted).toEqual({
      data: channelMessage(owner, workspace.id, general.id, { content: "via rpc", skip_translation: true }),
    });
    const page = await chat(member.token).messages.list.query({ workspace_id: workspace.id, channel_id: general.id });
    expect(page).toEqual({ data: [posted.data], meta: { next_cursor: null } });
    expect((await history(member, workspace.id, general.id)).body.data).toEqual([posted.data]);
  });

  it("reports validation and access errors with their codes", async () => {
    const { owner, outsider, workspace, general } = await team();
    const blank = await rejectionOf(
      chat(owner.token).messages.post.mutate({ workspace_id: workspace.id, channel_id: general.id, content: "  " }),
    );
    expect(blank.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      httpStatus: 422,
      errors: { content: [expect.any(String)] },
    });
    const system = await rejectionOf(
      chat(owner.token).messages.post.mutate({
        workspace_id: workspace.id,
        channel_id: general.id,
        content: "x",
        type: "system",
      }),
    );
    expect(system.data).toMatchObject({ code: "UNPROCESSABLE_CONTENT", errors: { type: [expect.any(String)] } });
    const hidden = await rejectionOf(
      chat(outsider.token).messages.list.query({ workspace_id: workspace.id, channel_id: general.id }),
    );
    expect(hidden.data).toMatchObject({ code: "NOT_FOUND", httpStatus: 404 });
  });

  it("opens a direct conversation, posts in it and resolves a recipient", async () => {
    const [alice, bob] = await Promise.all([
      registerUser(ctx.api, { name: "Alice" }),
      registerUser(ctx.api, { name: "Bob" }),
    ]);
    const client = chat(alice.token);
    const { data: found } = await client.direct.resolve.mutate({ email: bob.email });
    expect(found).toEqual({ id: bob.id, name: "Bob", email: bob.email, avatar_url: null });
    const opened = await client.direct.open.mutate({ participant_user_id: String(found.id) });
    expect(opened.data).toMatchObject({ participant: found, last_message: null });
    const posted = await client.direct.post.mutate({ conversation_id: opened.data.id, content: "rpc dm" });
    expect(posted.data).toEqual(directMessage(alice, opened.data.id, { content: "rpc dm" }));
    const list = await chat(bob.token).direct.list.query();
    expect(list.data.map((conversation) => [conversation.id, conversation.last_message?.id])).toEqual([
      [opened.data.id, posted.data.id],
    ]);
    const self = await rejectionOf(client.direct.open.mutate({ participant_user_id: alice.id }));
    expect(self.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      errors: { participant_user_id: [expect.any(String)] },
    });
    const unknown = await rejectionOf(client.direct.resolve.mutate({ email: uniqueEmail("ghost") }));
    expect(unknown.data).toMatchObject({ code: "NOT_FOUND" });
  });
});
