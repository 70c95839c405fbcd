// History pages forward (`after`) and around a message (`around`), next to the old backward
// pages (`before`), for every history: a channel's top-level messages, a thread, a direct
// conversation and a temporary room; over REST and through the typed client. The contract's
// last bullet of "Read state, unread counts, mentions and push preferences" and
// docs/messaging.md ("Paging forward and around a message").
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { createChatClient, type ChatClient } from "@chat-service/client";
import type { ApiResponse } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { useTestServer } from "./helpers/server.ts";
import { besidesTokenLookup, measureRequest } from "./helpers/statements.ts";

const ctx = useTestServer();

const VALIDATION_MESSAGE = "The given data was invalid.";
const UNKNOWN_ID = `msg_${"0".repeat(10)}${"A".repeat(16)}`;

type Message = { id: string; content: string; parent_message_id: string | null; [key: string]: unknown };

const clients: ChatClient[] = [];
afterAll(() => {
  for (const client of clients) client.close();
});

function chat(user: RegisteredUser): ChatClient {
  const client = createChatClient({ url: ctx.server.url, token: user.token });
  clients.push(client);
  return client;
}

function expectFieldError(response: ApiResponse, field: string): void {
  expect(response.status, JSON.stringify(response.body)).toBe(422);
  expect(response.body).toEqual({ message: VALIDATION_MESSAGE, errors: { [field]: [expect.any(String)] } });
}

async function expectRpcFieldError(call: Promise<unknown>, field: string): Promise<void> {
  const error = await rejectionOf(call);
  expect(error.message).toBe(VALIDATION_MESSAGE);
  expect(error.data).toMatchObject({ code: "UNPROCESSABLE_CONTENT", httpStatus: 422 });
  expect(error.data?.errors).toEqual({ [field]: [expect.any(String)] });
}

const ids = (messages: Message[]) => messages.map((message) => message.id);

// --- places ------------------------------------------------------------------------------------

type ChannelPlace = { workspaceId: string; channelId: string };

async function workspaceWithChannel(owner: RegisteredUser): Promise<ChannelPlace> {
  const created = await ctx.api.post(
    "/api/v1/workspaces",
    { name: `Team ${randomBytes(3).toString("hex")}` },
    { token: owner.token },
  );
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const workspaceId: string = created.body.data.id;
  const channels = await ctx.api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
  const general = (channels.body.data as { id: string; slug: string }[]).find((channel) => channel.slug === "general")!;
  return { workspaceId, channelId: general.id };
}

async function otherChannel(owner: RegisteredUser, workspaceId: string): Promise<ChannelPlace> {
  const created = await ctx.api.post(
    `/api/v1/workspaces/${workspaceId}/channels`,
    { name: `Other ${randomBytes(3).toString("hex")}` },
    { token: owner.token },
  );
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return { workspaceId, channelId: created.body.data.id };
}

const channelMessages = (place: ChannelPlace) =>
  `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages`;

async function postTo(user: RegisteredUser, path: string, body: Record<string, unknown>): Promise<Message> {
  const response = await ctx.api.post(path, body, { token: user.token });
  if (response.status !== 201) throw new Error(`post: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.data;
}

/** Posts `count` messages in order; answers them oldest first, as history sorts them (by id). */
async function postMany(user: RegisteredUser, path: string, count: number, extra: Record<string, unknown> = {}) {
  const posted: Message[] = [];
  for (let index = 0; index < count; index++) posted.push(await postTo(user, path, { content: `m${index}`, ...extra }));
  return posted.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

const get = (user: RegisteredUser, path: string, query: string) =>
  ctx.api.get(`${path}${query}`, { token: user.token });

/** The whole history (newest first, up to 100): what every page is checked against. */
async function everything(user: RegisteredUser, path: string, query = ""): Promise<Message[]> {
  const response = await get(user, path, `?limit=100${query}`);
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  expect(response.body.meta).toEqual({ next_cursor: null });
  return response.body.data;
}

async function openConversation(a: RegisteredUser, b: RegisteredUser): Promise<string> {
  const opened = await ctx.api.post("/api/v1/direct-conversations", { participant_user_id: b.id }, { token: a.token });
  expect([200, 201]).toContain(opened.status);
  return opened.body.data.id;
}

async function createRoom(owner: RegisteredUser): Promise<string> {
  const created = await ctx.api.post("/api/v1/external/rooms", { name: "Paging room" }, { token: owner.token });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.data.room_id;
}

// --- the shared checks, for any history path ----------------------------------------------------

/** Walks forward from the oldest message with `after`: every later message once, oldest first. */
async function walkForward(user: RegisteredUser, path: string, oldestFirst: Message[], limit: number, query = "") {
  const seen: Message[] = [];
  const sizes: number[] = [];
  let cursor: string | null = oldestFirst[0]!.id;
  for (let pages = 0; cursor !== null && pages < 20; pages++) {
    const page = await get(user, path, `?limit=${limit}&after=${cursor}${query}`);
    expect(page.status, JSON.stringify(page.body)).toBe(200);
    expect(Object.keys(page.body.meta)).toEqual(["next_cursor"]);
    sizes.push(page.body.data.length);
    seen.push(...page.body.data);
    cursor = page.body.meta.next_cursor;
    if (cursor !== null) expect(cursor).toBe(page.body.data.at(-1).id);
  }
  expect(cursor).toBeNull();
  expect(seen).toEqual(oldestFirst.slice(1));
  return sizes;
}

/** `around` the message at `index` (of oldestFirst), checked against the whole history. */
async function expectAround(
  user: RegisteredUser,
  path: string,
  oldestFirst: Message[],
  index: number,
  limit: number,
  query = "",
) {
  const half = Math.floor(limit / 2);
  const from = Math.max(0, index - half);
  const to = Math.min(oldestFirst.length - 1, index + half);
  const expected = oldestFirst.slice(from, to + 1).reverse();
  const page = await get(user, path, `?limit=${limit}&around=${oldestFirst[index]!.id}${query}`);
  expect(page.status, JSON.stringify(page.body)).toBe(200);
  expect(page.body).toEqual({
    data: expected,
    meta: {
      before_cursor: from > 0 ? expected.at(-1)!.id : null,
      after_cursor: to < oldestFirst.length - 1 ? expected[0]!.id : null,
    },
  });
  return page.body as { data: Message[]; meta: { before_cursor: string | null; after_cursor: string | null } };
}

// --- channel top-level history -------------------------------------------------------------------

describe("channel history: after", () => {
  it("pages forward oldest first to the end, next_cursor then null (7 after the first: 3, 3, 1)", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    await postMany(owner, path, 8);
    const oldestFirst = (await everything(owner, path)).reverse();
    expect(oldestFirst).toHaveLength(8);
    expect(await walkForward(owner, path, oldestFirst, 3)).toEqual([3, 3, 1]);
  });

  it("ends with next_cursor null when the last page is exactly full, and answers nothing after the newest", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    await postMany(owner, path, 7);
    const oldestFirst = (await everything(owner, path)).reverse();
    expect(await walkForward(owner, path, oldestFirst, 3)).toEqual([3, 3]);

    const first = await get(owner, path, `?limit=3&after=${oldestFirst[0]!.id}`);
    expect(first.body).toEqual({ data: oldestFirst.slice(1, 4), meta: { next_cursor: oldestFirst[3]!.id } });
    // 50 by default.
    expect((await get(owner, path, `?after=${oldestFirst[2]!.id}`)).body).toEqual({
      data: oldestFirst.slice(3),
      meta: { next_cursor: null },
    });
    expect((await get(owner, path, `?after=${oldestFirst.at(-1)!.id}`)).body).toEqual({
      data: [],
      meta: { next_cursor: null },
    });
  });

  it("answers the same page through the typed client", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    await postMany(owner, path, 5);
    const oldestFirst = (await everything(owner, path)).reverse();
    const client = chat(owner);
    const page = await client.messages.list.query({
      workspace_id: place.workspaceId,
      channel_id: place.channelId,
      after: oldestFirst[1]!.id,
      limit: 2,
    });
    expect(page).toEqual({ data: oldestFirst.slice(2, 4), meta: { next_cursor: oldestFirst[3]!.id } });
    expect(page).toEqual((await get(owner, path, `?limit=2&after=${oldestFirst[1]!.id}`)).body);
    const last = await client.messages.list.query({
      workspace_id: place.workspaceId,
      channel_id: place.channelId,
      after: page.meta.next_cursor!,
      limit: 2,
    });
    expect(last).toEqual({ data: oldestFirst.slice(4), meta: { next_cursor: null } });
  });
});

describe("channel history: around", () => {
  it("answers the message with floor(limit / 2) on each side, newest first, for odd and even limits", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    await postMany(owner, path, 9);
    const oldestFirst = (await everything(owner, path)).reverse();
    // In the middle: 2 on each side with limit 5 and limit 4 alike, both cursors set.
    const five = await expectAround(owner, path, oldestFirst, 4, 5);
    expect(ids(five.data)).toEqual(ids(oldestFirst.slice(2, 7).reverse()));
    expect(five.meta).toEqual({ before_cursor: oldestFirst[2]!.id, after_cursor: oldestFirst[6]!.id });
    const four = await expectAround(owner, path, oldestFirst, 4, 4);
    expect(four).toEqual(five);
    await expectAround(owner, path, oldestFirst, 4, 3);
    await expectAround(owner, path, oldestFirst, 4, 2);
    // limit 1: the message alone, and it is both cursors.
    const one = await expectAround(owner, path, oldestFirst, 4, 1);
    expect(one).toEqual({
      data: [oldestFirst[4]],
      meta: { before_cursor: oldestFirst[4]!.id, after_cursor: oldestFirst[4]!.id },
    });
    // Everything fits: nothing lies beyond on either side.
    const all = await expectAround(owner, path, oldestFirst, 4, 100);
    expect(all).toEqual({ data: [...oldestFirst].reverse(), meta: { before_cursor: null, after_cursor: null } });
    // Default limit 50.
    const byDefault = await get(owner, path, `?around=${oldestFirst[4]!.id}`);
    expect(byDefault.body).toEqual(all);
  });

  it("at the newest message: after_cursor null; at the oldest: before_cursor null", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    await postMany(owner, path, 9);
    const oldestFirst = (await everything(owner, path)).reverse();
    const newest = await expectAround(owner, path, oldestFirst, 8, 5);
    expect(newest.data).toEqual(oldestFirst.slice(6).reverse());
    expect(newest.meta).toEqual({ before_cursor: oldestFirst[6]!.id, after_cursor: null });
    const oldest = await expectAround(owner, path, oldestFirst, 0, 6);
    expect(oldest.data).toEqual(oldestFirst.slice(0, 4).reverse());
    expect(oldest.meta).toEqual({ before_cursor: null, after_cursor: oldestFirst[3]!.id });
    // One step in from each end, with the side that just fits: still null.
    await expectAround(owner, path, oldestFirst, 7, 2);
    await expectAround(owner, path, oldestFirst, 1, 2);
    await expectAround(owner, path, oldestFirst, 6, 4);
    await expectAround(owner, path, oldestFirst, 2, 4);
  });

  it("its cursors continue with before and after, covering the history without gaps", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    await postMany(owner, path, 9);
    const oldestFirst = (await everything(owner, path)).reverse();
    const page = await expectAround(owner, path, oldestFirst, 4, 3);
    const older = await get(owner, path, `?limit=50&before=${page.meta.before_cursor}`);
    expect(older.body).toEqual({ data: oldestFirst.slice(0, 3).reverse(), meta: { next_cursor: null } });
    const newer = await get(owner, path, `?limit=50&after=${page.meta.after_cursor}`);
    expect(newer.body).toEqual({ data: oldestFirst.slice(6), meta: { next_cursor: null } });
  });

  it("answers the same page through the typed client", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    await postMany(owner, path, 6);
    const oldestFirst = (await everything(owner, path)).reverse();
    const client = chat(owner);
    const middle = await client.messages.list.query({
      workspace_id: place.workspaceId,
      channel_id: place.channelId,
      around: oldestFirst[2]!.id,
      limit: 3,
    });
    expect(middle).toEqual({
      data: oldestFirst.slice(1, 4).reverse(),
      meta: { before_cursor: oldestFirst[1]!.id, after_cursor: oldestFirst[3]!.id },
    });
    expect(middle).toEqual((await get(owner, path, `?limit=3&around=${oldestFirst[2]!.id}`)).body);
    const newest = await client.messages.list.query({
      workspace_id: place.workspaceId,
      channel_id: place.channelId,
      around: oldestFirst[5]!.id,
      limit: 4,
    });
    expect(newest).toEqual({
      data: oldestFirst.slice(3).reverse(),
      meta: { before_cursor: oldestFirst[3]!.id, after_cursor: null },
    });
  });

  it("lists a thread parent's tombstone as before, and pages around it", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    const [before] = await postMany(owner, path, 1);
    const parent = await postTo(owner, path, { content: "parent" });
    await postTo(owner, path, { content: "reply", parent_message_id: parent.id });
    const [later] = await postMany(owner, path, 1);
    const deleted = await ctx.api.delete(`${path}/${parent.id}`, { token: owner.token });
    expect(deleted.status).toBe(204);
    const all = await everything(owner, path);
    expect(ids(all)).toEqual([later!.id, parent.id, before!.id]);
    expect(all[1]!.deleted_at).not.toBeNull();
    expect((await get(owner, path, `?limit=2&around=${parent.id}`)).body).toEqual({
      data: all,
      meta: { before_cursor: null, after_cursor: null },
    });
    expect((await get(owner, path, `?after=${before!.id}`)).body).toEqual({
      data: [all[1], all[0]],
      meta: { next_cursor: null },
    });
  });
});

describe("channel history around a thread reply", () => {
  it("takes a reply's id as a position: after it (a read position), around it (a search hit)", async () => {
    const [owner, reader] = await Promise.all([
      registerUser(ctx.api, { name: "Ada" }),
      registerUser(ctx.api, { name: "Rita" }),
    ]);
    const created = await ctx.api.post(
      "/api/v1/workspaces",
      { name: `Open ${randomBytes(3).toString("hex")}`, visibility: "public" },
      { token: owner.token },
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const workspaceId: string = created.body.data.id;
    const joined = await ctx.api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: reader.token });
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    const channels = await ctx.api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
    const general = (channels.body.data as { id: string; slug: string }[]).find((channel) => channel.slug === "general")!;
    const place = { workspaceId, channelId: general.id };
    const path = channelMessages(place);
    const [first] = await postMany(owner, path, 1);
    const parent = await postTo(owner, path, { content: "parent" });
    const reply = await postTo(owner, path, { content: "a reply in the thread", parent_message_id: parent.id });
    const [after1, after2] = await postMany(owner, path, 2);

    // The reader has read up to the reply (a reply's id moves the position like any message id).
    const read = await ctx.api.post(`${path.replace(/\/messages$/, "")}/read`, { message_id: reply.id }, { token: reader.token });
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body.data).toMatchObject({ last_read_message_id: reply.id, unread_count: 2 });
    // "Jump to the first unread": the top-level messages after it.
    const unread = await get(reader, path, `?after=${reply.id}`);
    expect(unread.status, JSON.stringify(unread.body)).toBe(200);
    expect(unread.body).toEqual({ data: [after1, after2].map((m) => expect.objectContaining({ id: m!.id })), meta: { next_cursor: null } });
    const one = await get(reader, path, `?after=${reply.id}&limit=1`);
    expect(ids(one.body.data)).toEqual([after1!.id]);
    expect(one.body.meta).toEqual({ next_cursor: after1!.id });

    // A search hit that is a reply: the reply itself, with the top-level messages around its id.
    const around = await get(reader, path, `?around=${reply.id}&limit=2`);
    expect(around.status, JSON.stringify(around.body)).toBe(200);
    expect(ids(around.body.data)).toEqual([after1!.id, reply.id, parent.id]);
    expect(around.body.data[1]).toMatchObject({ id: reply.id, parent_message_id: parent.id });
    expect(around.body.meta).toEqual({ before_cursor: parent.id, after_cursor: after1!.id });
    const wide = await get(reader, path, `?around=${reply.id}`);
    expect(ids(wide.body.data)).toEqual([after2!.id, after1!.id, reply.id, parent.id, first!.id]);
    expect(wide.body.meta).toEqual({ before_cursor: null, after_cursor: null });

    // The same through the typed client.
    const client = chat(reader);
    const at = { workspace_id: place.workspaceId, channel_id: place.channelId };
    expect(ids((await client.messages.list.query({ ...at, after: reply.id })).data as Message[])).toEqual([
      after1!.id,
      after2!.id,
    ]);
    expect(ids((await client.messages.list.query({ ...at, around: reply.id, limit: 2 })).data as Message[])).toEqual([
      after1!.id,
      reply.id,
      parent.id,
    ]);
  });
});

// --- threads -------------------------------------------------------------------------------------

describe("thread history (parent_message_id)", () => {
  it("pages a thread's replies after and around a reply, never leaving the thread", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    const parent = await postTo(owner, path, { content: "parent" });
    const otherParent = await postTo(owner, path, { content: "other parent" });
    // Replies of both threads and top-level messages, interleaved.
    for (let index = 0; index < 6; index++) {
      await postTo(owner, path, { content: `reply ${index}`, parent_message_id: parent.id });
      await postTo(owner, path, { content: `other ${index}`, parent_message_id: otherParent.id });
      await postTo(owner, path, { content: `top ${index}` });
    }
    const thread = `&parent_message_id=${parent.id}`;
    const oldestFirst = (await everything(owner, path, thread)).reverse();
    expect(oldestFirst.map((message) => message.content)).toEqual([0, 1, 2, 3, 4, 5].map((n) => `reply ${n}`));
    expect(await walkForward(owner, path, oldestFirst, 2, thread)).toEqual([2, 2, 1]);
    await expectAround(owner, path, oldestFirst, 3, 2, thread);
    await expectAround(owner, path, oldestFirst, 0, 4, thread);
    await expectAround(owner, path, oldestFirst, 5, 5, thread);

    // Top-level history around the parent: top-level messages only.
    const topLevel = (await everything(owner, path)).reverse();
    expect(topLevel.every((message) => message.parent_message_id === null)).toBe(true);
    await expectAround(owner, path, topLevel, 0, 4);
    await walkForward(owner, path, topLevel, 3);

    const client = chat(owner);
    expect(
      await client.messages.list.query({
        workspace_id: place.workspaceId,
        channel_id: place.channelId,
        parent_message_id: parent.id,
        after: oldestFirst[3]!.id,
      }),
    ).toEqual({ data: oldestFirst.slice(4), meta: { next_cursor: null } });
    expect(
      await client.messages.list.query({
        workspace_id: place.workspaceId,
        channel_id: place.channelId,
        parent_message_id: parent.id,
        around: oldestFirst[1]!.id,
        limit: 2,
      }),
    ).toEqual({
      data: oldestFirst.slice(0, 3).reverse(),
      meta: { before_cursor: null, after_cursor: oldestFirst[2]!.id },
    });
  });

  it("is 422 for a message not in that thread: its parent, a top-level message, another thread's reply", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    const parent = await postTo(owner, path, { content: "parent" });
    const otherParent = await postTo(owner, path, { content: "other parent" });
    await postTo(owner, path, { content: "reply", parent_message_id: parent.id });
    const otherReply = await postTo(owner, path, { content: "other reply", parent_message_id: otherParent.id });
    const thread = `&parent_message_id=${parent.id}`;
    for (const key of ["after", "around"]) {
      for (const id of [parent.id, otherParent.id, otherReply.id, UNKNOWN_ID])
        expectFieldError(await get(owner, path, `?${key}=${id}${thread}`), key);
    }
    await expectRpcFieldError(
      chat(owner).messages.list.query({
        workspace_id: place.workspaceId,
        channel_id: place.channelId,
        parent_message_id: parent.id,
        around: otherReply.id,
      }),
      "around",
    );
  });
});

// --- direct conversations and rooms ------------------------------------------------------------

describe("direct conversation history", () => {
  it("pages after and around a message, over REST and the typed client", async () => {
    const [alice, bob] = await Promise.all([
      registerUser(ctx.api, { name: "Alice" }),
      registerUser(ctx.api, { name: "Bob" }),
    ]);
    const conversationId = await openConversation(alice, bob);
    const path = `/api/v1/direct-conversations/${conversationId}/messages`;
    for (let index = 0; index < 7; index++) await postTo(index % 2 ? bob : alice, path, { content: `dm ${index}` });
    const oldestFirst = (await everything(bob, path)).reverse();
    expect(oldestFirst).toHaveLength(7);
    expect(await walkForward(bob, path, oldestFirst, 4)).toEqual([4, 2]);
    await expectAround(alice, path, oldestFirst, 3, 3);
    await expectAround(alice, path, oldestFirst, 6, 4);
    await expectAround(alice, path, oldestFirst, 0, 5);

    const client = chat(alice);
    expect(
      await client.direct.messages.query({ conversation_id: conversationId, after: oldestFirst[0]!.id, limit: 3 }),
    ).toEqual({ data: oldestFirst.slice(1, 4), meta: { next_cursor: oldestFirst[3]!.id } });
    expect(
      await client.direct.messages.query({ conversation_id: conversationId, around: oldestFirst[5]!.id, limit: 2 }),
    ).toEqual({
      data: oldestFirst.slice(4, 7).reverse(),
      meta: { before_cursor: oldestFirst[4]!.id, after_cursor: null },
    });
  });

  it("is 422 for a message of another conversation, of a channel, or an unknown id", async () => {
    const [alice, bob, carol] = await Promise.all([
      registerUser(ctx.api, { name: "Alice" }),
      registerUser(ctx.api, { name: "Bob" }),
      registerUser(ctx.api, { name: "Carol" }),
    ]);
    const conversationId = await openConversation(alice, bob);
    const path = `/api/v1/direct-conversations/${conversationId}/messages`;
    await postTo(alice, path, { content: "hi" });
    const elsewhere = await postTo(
      alice,
      `/api/v1/direct-conversations/${await openConversation(alice, carol)}/messages`,
      {
        content: "hi carol",
      },
    );
    const inChannel = await postTo(alice, channelMessages(await workspaceWithChannel(alice)), { content: "team" });
    for (const key of ["after", "around"])
      for (const id of [elsewhere.id, inChannel.id, UNKNOWN_ID])
        expectFieldError(await get(alice, path, `?${key}=${id}`), key);
    await expectRpcFieldError(
      chat(alice).direct.messages.query({ conversation_id: conversationId, after: elsewhere.id }),
      "after",
    );
    // A stranger still gets the conversation's 404 first.
    const stranger = await get(carol, path, `?after=${elsewhere.id}`);
    expect(stranger.status).toBe(404);
  });
});

describe("temporary room history", () => {
  it("pages after and around a message, over REST and the typed client", async () => {
    const owner = await registerUser(ctx.api, { name: "Omar" });
    const roomId = await createRoom(owner);
    const path = `/api/v1/external/rooms/${roomId}/messages`;
    await postMany(owner, path, 6);
    const oldestFirst = (await everything(owner, path)).reverse();
    expect(await walkForward(owner, path, oldestFirst, 5)).toEqual([5]);
    expect(await walkForward(owner, path, oldestFirst, 2)).toEqual([2, 2, 1]);
    await expectAround(owner, path, oldestFirst, 2, 3);
    await expectAround(owner, path, oldestFirst, 5, 6);
    await expectAround(owner, path, oldestFirst, 0, 1);

    const client = chat(owner);
    expect(await client.rooms.messages.query({ room_id: roomId, after: oldestFirst[4]!.id })).toEqual({
      data: oldestFirst.slice(5),
      meta: { next_cursor: null },
    });
    expect(await client.rooms.messages.query({ room_id: roomId, around: oldestFirst[2]!.id, limit: 4 })).toEqual({
      data: oldestFirst.slice(0, 5).reverse(),
      meta: { before_cursor: null, after_cursor: oldestFirst[4]!.id },
    });
  });

  it("is 422 for a message of another room or an unknown id, and keeps the exclusions", async () => {
    const owner = await registerUser(ctx.api, { name: "Omar" });
    const roomId = await createRoom(owner);
    const path = `/api/v1/external/rooms/${roomId}/messages`;
    const [message] = await postMany(owner, path, 1);
    const elsewhere = await postTo(owner, `/api/v1/external/rooms/${await createRoom(owner)}/messages`, {
      content: "other room",
    });
    for (const key of ["after", "around"])
      for (const id of [elsewhere.id, UNKNOWN_ID]) expectFieldError(await get(owner, path, `?${key}=${id}`), key);
    expectFieldError(await get(owner, path, `?before=${message!.id}&after=${message!.id}`), "after");
    expectFieldError(await get(owner, path, `?after=${message!.id}&around=${message!.id}`), "around");
    await expectRpcFieldError(chat(owner).rooms.messages.query({ room_id: roomId, around: elsewhere.id }), "around");
  });
});

// --- the 422s ------------------------------------------------------------------------------------

describe("validation of before, after and around", () => {
  it("excludes each other: 422 with the later key of before, after, around (REST)", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    const [a, b] = await postMany(owner, path, 2);
    expectFieldError(await get(owner, path, `?before=${b!.id}&after=${a!.id}`), "after");
    expectFieldError(await get(owner, path, `?before=${b!.id}&around=${a!.id}`), "around");
    expectFieldError(await get(owner, path, `?after=${a!.id}&around=${b!.id}`), "around");
    expectFieldError(await get(owner, path, `?before=${b!.id}&after=${a!.id}&around=${a!.id}`), "around");
    // Also when the cursors name no message of the place: the exclusion is reported.
    expectFieldError(await get(owner, path, `?before=${b!.id}&after=${UNKNOWN_ID}`), "after");
    // Direct conversations too.
    const bob = await registerUser(ctx.api, { name: "Bob" });
    const dm = `/api/v1/direct-conversations/${await openConversation(owner, bob)}/messages`;
    const [x, y] = await postMany(owner, dm, 2);
    expectFieldError(await get(owner, dm, `?before=${y!.id}&after=${x!.id}`), "after");
    expectFieldError(await get(owner, dm, `?before=${y!.id}&around=${x!.id}`), "around");
    expectFieldError(await get(owner, dm, `?after=${x!.id}&around=${y!.id}`), "around");
  });

  it("excludes each other through the typed client too", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    const [a, b] = await postMany(owner, path, 2);
    const client = chat(owner);
    const at = { workspace_id: place.workspaceId, channel_id: place.channelId };
    await expectRpcFieldError(client.messages.list.query({ ...at, before: b!.id, after: a!.id }), "after");
    await expectRpcFieldError(client.messages.list.query({ ...at, before: b!.id, around: a!.id }), "around");
    await expectRpcFieldError(client.messages.list.query({ ...at, after: a!.id, around: b!.id }), "around");
  });

  it("is 422 for an id of another channel, an unknown id, or no message id", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    const parent = await postTo(owner, path, { content: "parent" });
    const reply = await postTo(owner, path, { content: "reply", parent_message_id: parent.id });
    const other = await otherChannel(owner, place.workspaceId);
    const inOther = await postTo(owner, channelMessages(other), { content: "elsewhere" });
    const inOtherWorkspace = await postTo(owner, channelMessages(await workspaceWithChannel(owner)), {
      content: "far away",
    });
    for (const key of ["after", "around"]) {
      for (const id of [inOther.id, inOtherWorkspace.id, UNKNOWN_ID])
        expectFieldError(await get(owner, path, `?${key}=${id}`), key);
      expectFieldError(await get(owner, path, `?${key}=not-a-message`), key);
      expectFieldError(await get(owner, path, `?${key}=`), key);
    }
    // The same ids are fine where they belong.
    expect((await get(owner, path, `?around=${parent.id}`)).status).toBe(200);
    expect((await get(owner, channelMessages(other), `?around=${inOther.id}`)).status).toBe(200);
    expect((await get(owner, path, `?around=${reply.id}&parent_message_id=${parent.id}`)).status).toBe(200);
    // `before` stays a bare position: any message id is accepted.
    expect((await get(owner, path, `?before=${UNKNOWN_ID}`)).body).toEqual({ data: [], meta: { next_cursor: null } });

    const client = chat(owner);
    const at = { workspace_id: place.workspaceId, channel_id: place.channelId };
    await expectRpcFieldError(client.messages.list.query({ ...at, after: inOther.id }), "after");
    await expectRpcFieldError(client.messages.list.query({ ...at, around: UNKNOWN_ID }), "around");
    await expectRpcFieldError(client.messages.list.query({ ...at, after: "nope" }), "after");
    // A reply of another channel is no message of this one.
    const otherParent = await postTo(owner, channelMessages(other), { content: "other parent" });
    const otherReply = await postTo(owner, channelMessages(other), { content: "r", parent_message_id: otherParent.id });
    await expectRpcFieldError(client.messages.list.query({ ...at, around: otherReply.id }), "around");
    expect(reply.parent_message_id).toBe(parent.id);
  });

  it("answers 404 before any 422 to a caller who cannot see the channel", async () => {
    const [owner, outsider] = await Promise.all([
      registerUser(ctx.api, { name: "Ada" }),
      registerUser(ctx.api, { name: "Oscar" }),
    ]);
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    const [a, b] = await postMany(owner, path, 2);
    expect((await get(outsider, path, `?after=${a!.id}`)).status).toBe(404);
    expect((await get(outsider, path, `?before=${b!.id}&after=${a!.id}`)).status).toBe(404);
  });
});

// --- cost ----------------------------------------------------------------------------------------

describe("cost", () => {
  it("runs as many statements for an after or around page as for a before page (one for the rows)", async () => {
    const owner = await registerUser(ctx.api, { name: "Ada" });
    const place = await workspaceWithChannel(owner);
    const path = channelMessages(place);
    await postMany(owner, path, 12);
    const oldestFirst = (await everything(owner, path)).reverse();
    const measure = async (query: string) => {
      const measured = await measureRequest(ctx.server, (headers) =>
        ctx.api.get(`${path}${query}`, { token: owner.token, headers }),
      );
      expect(measured.response.status).toBe(200);
      expect(measured.complete).toBe(true);
      return measured;
    };
    const backward = await measure(`?limit=5&before=${oldestFirst[8]!.id}`);
    const forward = await measure(`?limit=5&after=${oldestFirst[2]!.id}`);
    const around = await measure(`?limit=5&around=${oldestFirst[6]!.id}`);
    expect(forward.response.body.data).toHaveLength(5);
    expect(around.response.body.data).toHaveLength(5);
    // (The token's lookup aside: one of the three may find it in the process's memory.)
    expect(besidesTokenLookup(forward)).toBe(besidesTokenLookup(backward));
    expect(besidesTokenLookup(around)).toBe(besidesTokenLookup(backward));
    // The rows of each page, the anchor's check included, in one statement (an after or around
    // page: the union of the anchor and its sides; only the start of a statement is recorded).
    const messageReads = (statements: { text: string }[]) =>
      statements.filter((statement) => /^\(*select "messages"\./.test(statement.text)).map((s) => s.text.startsWith("("));
    expect(messageReads(around.statements)).toEqual([true]);
    expect(messageReads(forward.statements)).toEqual([true]);
    expect(messageReads(backward.statements)).toEqual([false]);
  });
});
