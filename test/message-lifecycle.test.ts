// Messages after they are posted (contract: "Messages after they are posted: edit, delete,
// reactions", and the Mentions rule of "Read state…"): edit, delete, react, take back and list
// reactions on every kind of message (channel, thread reply, direct, temporary room), over
// REST and through the typed client; who may do what; tombstones of thread parents; files of a
// deleted message; the live events (message.updated, message.deleted, reaction.added,
// reaction.removed) on a channel's stream, the user's stream and a resumed subscription;
// outbound webhook deliveries of them; and the new translation of an edited message.
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attachments, fileDeletions } from "../db/schema/index.ts";
import { type ApiResponse, type RestClient } from "./helpers/api.ts";
import { registerUser, stageTextFile, type RegisteredUser } from "./helpers/factories.ts";
import { arrived, collect, ISO_WITH_OFFSET, world, type Feed, type Received } from "./helpers/live.ts";
import { startReceiver, type Receiver } from "./helpers/receiver.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { useTestServer, useTranslatingServer, type TestServer } from "./helpers/server.ts";
import type { FakeTranslator } from "./helpers/translation.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

const NOT_FOUND = { message: "Message not found." };
const VALIDATION_MESSAGE = "The given data was invalid.";

type Reaction = { emoji: string; count: number; me?: boolean };
type Attachment = { id: string; download_url: string };
type Message = {
  id: string;
  content: string;
  parent_message_id: string | null;
  reply_count: number;
  attachments: Attachment[];
  reactions: Reaction[];
  edited_at: string | null;
  deleted_at: string | null;
  mentioned_user_ids: number[];
  mentions_channel: boolean;
  client_message_id: string | null;
  [key: string]: unknown;
};

const unique = (label: string) => `${label} ${randomBytes(4).toString("hex")}`;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function expectStatus(response: ApiResponse, status: number, what = ""): void {
  expect(response.status, `${what} ${JSON.stringify(response.body)}`).toBe(status);
}

function expectFieldError(response: ApiResponse, field: string, what = ""): void {
  expectStatus(response, 422, what);
  expect(response.body).toEqual({ message: VALIDATION_MESSAGE, errors: { [field]: [expect.any(String)] } });
}

function expectRefusal(response: ApiResponse, status: 403 | 404, what = ""): void {
  expectStatus(response, status, what);
  if (status === 404) expect(response.body).toEqual(NOT_FOUND);
  else expect(response.body).toEqual({ message: expect.any(String) });
}

// ---------------------------------------------------------------------------------------------
// Places: where a message lives, and the five verbs at its own path.

type Kind = "channel" | "thread reply" | "direct" | "room";
const KINDS: Kind[] = ["channel", "thread reply", "direct", "room"];

type Place = {
  kind: Kind;
  /** Posts the message under test. */
  author: RegisteredUser;
  /** Another user who reads the place and may post there, but is no moderator of it. */
  other: RegisteredUser;
  /** The messages path of the place (…/messages). */
  base: string;
  /** A thread reply's parent. */
  parentId?: string;
  post(user: RegisteredUser, body: Record<string, unknown>): Promise<ApiResponse>;
  /** The messages a user reads where the message is listed (the thread for a reply). */
  history(user: RegisteredUser): Promise<Message[]>;
  workspaceId?: string;
  channelId?: string;
  conversationId?: string;
  roomId?: string;
};

async function postOk(place: Place, user: RegisteredUser, content: string, extra: Record<string, unknown> = {}) {
  const response = await place.post(user, { content, ...extra });
  expectStatus(response, 201, `post in ${place.kind}`);
  return response.body.data as Message;
}

async function listOf(path: string, user: RegisteredUser): Promise<Message[]> {
  const response = await ctx.api.get(path, { token: user.token });
  expectStatus(response, 200, `history ${path}`);
  return response.body.data as Message[];
}

const channelMessages = (workspaceId: string, channelId: string) =>
  `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`;

async function channelPlace(): Promise<Place & { workspaceId: string; channelId: string }> {
  const { owner, member, workspace, general } = await live.team();
  const base = channelMessages(workspace.id, general.id);
  return {
    kind: "channel",
    author: member,
    other: owner,
    base,
    workspaceId: workspace.id,
    channelId: general.id,
    post: (user, body) => ctx.api.post(base, body, { token: user.token }),
    history: (user) => listOf(base, user),
  };
}

async function threadPlace(): Promise<Place> {
  const channel = await channelPlace();
  const parent = await postOk(channel, channel.other, unique("thread parent"));
  return {
    ...channel,
    kind: "thread reply",
    parentId: parent.id,
    post: (user, body) => ctx.api.post(channel.base, { parent_message_id: parent.id, ...body }, { token: user.token }),
    history: (user) => listOf(`${channel.base}?parent_message_id=${parent.id}`, user),
  };
}

async function directPlace(): Promise<Place & { conversationId: string }> {
  const [author, other] = await Promise.all([
    registerUser(ctx.api, { name: "Dana Direct" }),
    registerUser(ctx.api, { name: "Omar Other" }),
  ]);
  const conversationId = await live.openConversation(author, other);
  const base = `/api/v1/direct-conversations/${conversationId}/messages`;
  return {
    kind: "direct",
    author,
    other,
    base,
    conversationId,
    post: (user, body) => ctx.api.post(base, body, { token: user.token }),
    history: (user) => listOf(base, user),
  };
}

/** A room of `owner` (the `other`, a moderator there) that `author` joined. */
async function roomPlace(): Promise<Place & { roomId: string }> {
  const [owner, guest] = await Promise.all([
    registerUser(ctx.api, { name: "Rhea Roomowner" }),
    registerUser(ctx.api, { name: "Gio Guest" }),
  ]);
  const created = await ctx.api.post(
    "/api/v1/external/rooms",
    { name: unique("Support"), duration_hours: 24 },
    { token: owner.token },
  );
  expectStatus(created, 201, "room");
  const roomId = created.body.data.room_id as string;
  expectStatus(await ctx.api.post(`/api/v1/external/rooms/${roomId}/join`, {}, { token: guest.token }), 200, "join");
  const base = `/api/v1/external/rooms/${roomId}/messages`;
  return {
    kind: "room",
    author: guest,
    other: owner,
    base,
    roomId,
    post: (user, body) => ctx.api.post(base, body, { token: user.token }),
    history: (user) => listOf(base, user),
  };
}

function placeOf(kind: Kind): Promise<Place> {
  if (kind === "channel") return channelPlace();
  if (kind === "thread reply") return threadPlace();
  if (kind === "direct") return directPlace();
  return roomPlace();
}

const token = (user: RegisteredUser | undefined) => (user ? { token: user.token } : {});
const messageAt = (base: string, id: string) => `${base}/${id}`;
const reactionAt = (base: string, id: string, emoji: string) => `${base}/${id}/reactions/${encodeURIComponent(emoji)}`;

const verbs = {
  edit: (base: string, user: RegisteredUser | undefined, id: string, body: Record<string, unknown>) =>
    ctx.api.patch(messageAt(base, id), body, token(user)),
  remove: (base: string, user: RegisteredUser | undefined, id: string) =>
    ctx.api.delete(messageAt(base, id), token(user)),
  react: (base: string, user: RegisteredUser | undefined, id: string, emoji: string) =>
    ctx.api.put(reactionAt(base, id, emoji), undefined, token(user)),
  unreact: (base: string, user: RegisteredUser | undefined, id: string, emoji: string) =>
    ctx.api.delete(reactionAt(base, id, emoji), token(user)),
  reactions: (base: string, user: RegisteredUser | undefined, id: string) =>
    ctx.api.get(`${base}/${id}/reactions`, token(user)),
};

/** Every verb, as `user`, on the message `id` under `base`: [name, response]. */
async function everyVerb(base: string, user: RegisteredUser | undefined, id: string) {
  return [
    ["PATCH", await verbs.edit(base, user, id, { content: "changed" })],
    ["DELETE", await verbs.remove(base, user, id)],
    ["PUT reaction", await verbs.react(base, user, id, "👍")],
    ["DELETE reaction", await verbs.unreact(base, user, id, "👍")],
    ["GET reactions", await verbs.reactions(base, user, id)],
  ] as const;
}

async function reactOk(base: string, user: RegisteredUser, id: string, emoji: string): Promise<Message> {
  const response = await verbs.react(base, user, id, emoji);
  expectStatus(response, 200, `react ${emoji}`);
  return response.body.data as Message;
}

// ---------------------------------------------------------------------------------------------

describe("every verb on every kind of message", () => {
  for (const kind of KINDS) {
    it(`edits, reacts, lists reactions, takes a reaction back and deletes a ${kind}`, async () => {
      const place = await placeOf(kind);
      const { author, other, base } = place;
      const original = await postOk(place, author, unique("original"));
      expect(original).toMatchObject({ edited_at: null, deleted_at: null, reactions: [] });

      // The same text is a no-op: 200, edited_at stays null.
      const same = await verbs.edit(base, author, original.id, { content: original.content });
      expectStatus(same, 200, "same text");
      expect(same.body.data).toMatchObject({ id: original.id, content: original.content, edited_at: null });

      const editedText = unique("edited");
      const edited = await verbs.edit(base, author, original.id, { content: editedText });
      expectStatus(edited, 200, "edit");
      expect(Object.keys(edited.body)).toEqual(["data"]);
      expect(edited.body.data).toMatchObject({
        id: original.id,
        content: editedText,
        edited_at: expect.stringMatching(ISO_WITH_OFFSET),
        deleted_at: null,
        created_at: original.created_at,
      });
      const editedAt = edited.body.data.edited_at as string;
      expect((await place.history(other)).find((m) => m.id === original.id)).toMatchObject({
        content: editedText,
        edited_at: editedAt,
      });
      // Again the same text, after an edit: edited_at stays the first edit's.
      await pause(5);
      const again = await verbs.edit(base, author, original.id, { content: editedText });
      expectStatus(again, 200, "same text after an edit");
      expect(again.body.data.edited_at).toBe(editedAt);

      // Reactions: reacting twice counts once; `me` is the caller's.
      const first = await reactOk(base, other, original.id, "👍");
      expect(first).toMatchObject({ id: original.id, content: editedText });
      expect(first.reactions).toEqual([{ emoji: "👍", count: 1, me: true }]);
      expect((await reactOk(base, other, original.id, "👍")).reactions).toEqual([{ emoji: "👍", count: 1, me: true }]);
      expect((await reactOk(base, author, original.id, "tada")).reactions).toEqual([
        { emoji: "👍", count: 1, me: false },
        { emoji: "tada", count: 1, me: true },
      ]);
      expect((await reactOk(base, author, original.id, "👍")).reactions).toEqual([
        { emoji: "👍", count: 2, me: true },
        { emoji: "tada", count: 1, me: true },
      ]);
      expect((await place.history(other)).find((m) => m.id === original.id)!.reactions).toEqual([
        { emoji: "👍", count: 2, me: true },
        { emoji: "tada", count: 1, me: false },
      ]);
      const who = await verbs.reactions(base, other, original.id);
      expectStatus(who, 200, "GET reactions");
      expect(who.body).toEqual({
        data: [
          { emoji: "👍", count: 2, user_ids: [other.id, author.id] },
          { emoji: "tada", count: 1, user_ids: [author.id] },
        ],
        meta: {},
      });
      // A reaction is not an edit.
      expect((await place.history(author)).find((m) => m.id === original.id)!.edited_at).toBe(editedAt);

      // Taking a reaction back: 204, and 204 again when it is no longer there.
      const taken = await verbs.unreact(base, other, original.id, "👍");
      expectStatus(taken, 204, "unreact");
      expect(taken.body).toBeUndefined();
      expectStatus(await verbs.unreact(base, other, original.id, "👍"), 204, "unreact again");
      expectStatus(await verbs.unreact(base, other, original.id, "never-used"), 204, "unreact unknown");
      expect((await verbs.reactions(base, author, original.id)).body.data).toEqual([
        { emoji: "👍", count: 1, user_ids: [author.id] },
        { emoji: "tada", count: 1, user_ids: [author.id] },
      ]);

      // Delete: 204, gone from history; a second message stays.
      const kept = await postOk(place, author, unique("kept"));
      const deleted = await verbs.remove(base, author, original.id);
      expectStatus(deleted, 204, "delete");
      expect(deleted.body).toBeUndefined();
      for (const reader of [author, other]) {
        const ids = (await place.history(reader)).map((m) => m.id);
        expect(ids).not.toContain(original.id);
        expect(ids).toContain(kept.id);
      }
      // A deleted message answers 404 to every verb.
      for (const [verb, response] of await everyVerb(base, author, original.id)) expectRefusal(response, 404, verb);
    });
  }

  it("answers 401 to every verb without a token, on every kind", async () => {
    for (const kind of KINDS) {
      const place = await placeOf(kind);
      const message = await postOk(place, place.author, "hello");
      for (const [verb, response] of await everyVerb(place.base, undefined, message.id)) {
        expectStatus(response, 401, `${kind} ${verb}`);
        expect(response.body).toEqual({ message: "Unauthenticated." });
      }
      // Nothing changed.
      expect((await place.history(place.author)).find((m) => m.id === message.id)).toMatchObject({
        content: "hello",
        edited_at: null,
        reactions: [],
      });
    }
  });

  it("serves the same verbs over typed RPC: channelMessage, directMessage and roomMessage", async () => {
    const channel = await channelPlace();
    const message = await postOk(channel, channel.author, "rpc original");
    const client = live.chat(channel.author.token);
    const ids = { workspace_id: channel.workspaceId, channel_id: channel.channelId, message_id: message.id };
    const edited = await client.channelMessage.edit.mutate({ ...ids, content: "rpc edited" });
    expect(edited.data).toMatchObject({ id: message.id, content: "rpc edited", edited_at: expect.any(String) });
    const reacted = await client.channelMessage.react.mutate({ ...ids, emoji: "🎉" });
    expect(reacted.data.reactions).toEqual([{ emoji: "🎉", count: 1, me: true }]);
    expect(await client.channelMessage.reactions.query(ids)).toEqual({
      data: [{ emoji: "🎉", count: 1, user_ids: [channel.author.id] }],
      meta: {},
    });
    await client.channelMessage.unreact.mutate({ ...ids, emoji: "🎉" });
    expect((await client.channelMessage.reactions.query(ids)).data).toEqual([]);
    const otherClient = live.chat(channel.other.token);
    expect(
      (await rejectionOf(otherClient.channelMessage.edit.mutate({ ...ids, content: "not mine" }))).data?.code,
    ).toBe("FORBIDDEN");
    expect((await rejectionOf(client.channelMessage.react.mutate({ ...ids, emoji: "not an emoji" }))).data?.code).toBe(
      "UNPROCESSABLE_CONTENT",
    );
    await client.channelMessage.delete.mutate(ids);
    expect((await rejectionOf(client.channelMessage.reactions.query(ids))).data?.code).toBe("NOT_FOUND");

    const direct = await directPlace();
    const dm = await postOk(direct, direct.author, "dm original");
    const dmClient = live.chat(direct.author.token);
    const dmIds = { conversation_id: direct.conversationId, message_id: dm.id };
    expect((await dmClient.directMessage.edit.mutate({ ...dmIds, content: "dm edited" })).data.content).toBe(
      "dm edited",
    );
    expect(
      (await live.chat(direct.other.token).directMessage.react.mutate({ ...dmIds, emoji: "ok" })).data,
    ).toMatchObject({ reactions: [{ emoji: "ok", count: 1, me: true }] });
    await dmClient.directMessage.delete.mutate(dmIds);
    expect((await direct.history(direct.other)).map((m) => m.id)).not.toContain(dm.id);

    const room = await roomPlace();
    const said = await postOk(room, room.author, "room original");
    const roomClient = live.chat(room.author.token);
    const roomIds = { room_id: room.roomId, message_id: said.id };
    expect((await roomClient.roomMessage.edit.mutate({ ...roomIds, content: "room edited" })).data.content).toBe(
      "room edited",
    );
    expect((await roomClient.roomMessage.react.mutate({ ...roomIds, emoji: "👀" })).data.reactions).toEqual([
      { emoji: "👀", count: 1, me: true },
    ]);
    expect((await roomClient.roomMessage.reactions.query(roomIds)).data).toEqual([
      { emoji: "👀", count: 1, user_ids: [room.author.id] },
    ]);
    await live.chat(room.other.token).roomMessage.delete.mutate(roomIds);
    expect((await room.history(room.author)).map((m) => m.id)).not.toContain(said.id);
  });
});

// ---------------------------------------------------------------------------------------------

async function memberIdOf(workspaceId: string, owner: RegisteredUser, user: RegisteredUser): Promise<string> {
  const response = await ctx.api.get(`/api/v1/workspaces/${workspaceId}/members`, { token: owner.token });
  return (response.body.data as { id: string; user_id: number }[]).find((m) => m.user_id === user.id)!.id;
}

async function joinWorkspace(user: RegisteredUser, workspaceId: string) {
  expectStatus(await ctx.api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: user.token }), 200, "join");
}

describe("who may do what", () => {
  it("answers 404 to a non-member of the workspace, and to a workspace member outside a private channel", async () => {
    const channel = await channelPlace();
    const outsider = await registerUser(ctx.api, { name: "Oscar Outsider" });
    const message = await postOk(channel, channel.author, "members only");
    for (const [verb, response] of await everyVerb(channel.base, outsider, message.id))
      expectRefusal(response, 404, `outsider ${verb}`);

    const { owner, member } = { owner: channel.other, member: channel.author };
    const secret = await live.createChannel(owner, channel.workspaceId, "private");
    const secretBase = channelMessages(channel.workspaceId, secret.id);
    const hidden = await ctx.api.post(secretBase, { content: "private" }, { token: owner.token });
    expectStatus(hidden, 201);
    for (const [verb, response] of await everyVerb(secretBase, member, hidden.body.data.id))
      expectRefusal(response, 404, `private ${verb}`);
    // The owner, a member of it, was not affected.
    expect((await listOf(secretBase, owner)).map((m) => m.content)).toEqual(["private"]);
  });

  it("answers 404 to a direct or room message for anyone outside it", async () => {
    const direct = await directPlace();
    const room = await roomPlace();
    const stranger = await registerUser(ctx.api, { name: "Stu Stranger" });
    for (const place of [direct, room]) {
      const message = await postOk(place, place.author, "just us");
      for (const [verb, response] of await everyVerb(place.base, stranger, message.id))
        expectRefusal(response, 404, `${place.kind} ${verb}`);
    }
  });

  it("answers 404 for a message id under another place's path, even one the caller can read", async () => {
    const channel = await channelPlace();
    const author = channel.author;
    const inChannel = await postOk(channel, author, "in the channel");
    const second = await live.createChannel(channel.other, channel.workspaceId, "public");
    const secondBase = channelMessages(channel.workspaceId, second.id);
    expectStatus(
      await ctx.api.post(
        `/api/v1/workspaces/${channel.workspaceId}/channels/${second.id}/join`,
        {},
        { token: author.token },
      ),
      200,
      "join the second channel",
    );
    const conversationId = await live.openConversation(author, channel.other);
    const directBase = `/api/v1/direct-conversations/${conversationId}/messages`;
    const dm = await ctx.api.post(directBase, { content: "a dm" }, { token: author.token });
    expectStatus(dm, 201);
    const created = await ctx.api.post("/api/v1/external/rooms", { name: "Room" }, { token: author.token });
    const roomBase = `/api/v1/external/rooms/${created.body.data.room_id}/messages`;
    const roomMessage = await ctx.api.post(roomBase, { content: "a room message" }, { token: author.token });
    expectStatus(roomMessage, 201);

    const cases: [string, string, string][] = [
      ["a channel message under another channel", secondBase, inChannel.id],
      ["a channel message under a conversation", directBase, inChannel.id],
      ["a channel message under a room", roomBase, inChannel.id],
      ["a direct message under a channel", channel.base, dm.body.data.id],
      ["a room message under a channel", channel.base, roomMessage.body.data.id],
      ["an unknown id", channel.base, "msg_00000000000000000000000000"],
      // An id that is not shaped like a message's names no message either: 404, as for any path id.
      ["a malformed id under a channel", channel.base, "nope"],
      ["a channel's id under a channel", channel.base, second.id],
      ["a malformed id under a conversation", directBase, "nope"],
      ["a malformed id under a room", roomBase, "nope"],
    ];
    for (const [what, base, id] of cases)
      for (const [verb, response] of await everyVerb(base, author, id)) expectRefusal(response, 404, `${what} ${verb}`);
    // The messages are untouched.
    expect((await channel.history(author)).find((m) => m.id === inChannel.id)).toMatchObject({
      content: "in the channel",
      reactions: [],
    });
  });

  it("lets only the author edit (403 to any other reader, owners included), on every kind", async () => {
    for (const kind of KINDS) {
      const place = await placeOf(kind);
      const message = await postOk(place, place.author, "mine");
      const refused = await verbs.edit(place.base, place.other, message.id, { content: "yours now" });
      expectRefusal(refused, 403, `${kind} edit by another`);
      expect((await place.history(place.author)).find((m) => m.id === message.id)!.content).toBe("mine");
    }
  });

  it("lets the author, the workspace's owners and admins delete a channel message; another member 403", async () => {
    const channel = await channelPlace();
    const { workspaceId } = channel;
    const owner = channel.other;
    const member = channel.author;
    const [admin, bystander] = await Promise.all([
      registerUser(ctx.api, { name: "Ada Admin" }),
      registerUser(ctx.api, { name: "Bea Bystander" }),
    ]);
    await joinWorkspace(admin, workspaceId);
    await joinWorkspace(bystander, workspaceId);
    const promoted = await ctx.api.put(
      `/api/v1/workspaces/${workspaceId}/members/${await memberIdOf(workspaceId, owner, admin)}`,
      { role: "admin" },
      { token: owner.token },
    );
    expectStatus(promoted, 200, "promote");

    const byMember = await postOk(channel, member, "member's words");
    expectRefusal(await verbs.remove(channel.base, bystander, byMember.id), 403, "bystander deletes");
    expectStatus(
      await verbs.remove(channel.base, admin, (await postOk(channel, owner, "owner's")).id),
      204,
      "admin deletes the owner's",
    );
    const second = await postOk(channel, member, "member's second");
    const byOwner = await postOk(channel, owner, "owner's words");
    expectRefusal(await verbs.remove(channel.base, member, byOwner.id), 403, "member deletes the owner's");
    expectStatus(await verbs.remove(channel.base, owner, byMember.id), 204, "owner deletes a member's");
    expectStatus(await verbs.remove(channel.base, admin, second.id), 204, "admin deletes a member's");
    expectStatus(await verbs.remove(channel.base, owner, byOwner.id), 204, "owner deletes their own");
    const left = (await channel.history(owner)).map((m) => m.content);
    expect(left).not.toContain("member's words");
    expect(left).not.toContain("member's second");
    expect(left).not.toContain("owner's words");
    // A moderator deletes, but does not edit.
    const third = await postOk(channel, member, "member's third");
    expectRefusal(await verbs.edit(channel.base, admin, third.id, { content: "moderated" }), 403, "admin edits");
  });

  it("lets a room's owner delete any of its messages; a guest only their own; nobody else in a conversation", async () => {
    const room = await roomPlace();
    const byOwner = await postOk(room, room.other, "owner speaks");
    const byGuest = await postOk(room, room.author, "guest speaks");
    expectRefusal(await verbs.remove(room.base, room.author, byOwner.id), 403, "guest deletes the owner's");
    expectStatus(await verbs.remove(room.base, room.other, byGuest.id), 204, "room owner deletes a guest's");
    expect((await room.history(room.other)).map((m) => m.content)).toEqual(["owner speaks"]);

    const direct = await directPlace();
    const dm = await postOk(direct, direct.author, "dm");
    expectRefusal(await verbs.remove(direct.base, direct.other, dm.id), 403, "the other participant deletes");
    expect((await direct.history(direct.other)).map((m) => m.id)).toEqual([dm.id]);
  });

  it("answers 403 to reacting in a public channel not joined; reading its reactions is allowed", async () => {
    const channel = await channelPlace();
    const owner = channel.other;
    const notJoined = channel.author;
    const open = await live.createChannel(owner, channel.workspaceId, "public");
    const openBase = channelMessages(channel.workspaceId, open.id);
    const message = await ctx.api.post(openBase, { content: "open to read" }, { token: owner.token });
    expectStatus(message, 201);
    const id = message.body.data.id as string;
    expectStatus(await verbs.react(openBase, owner, id, "👍"), 200);
    expectRefusal(await verbs.react(openBase, notJoined, id, "👍"), 403, "react without joining");
    const who = await verbs.reactions(openBase, notJoined, id);
    expectStatus(who, 200, "GET reactions without joining");
    expect(who.body.data).toEqual([{ emoji: "👍", count: 1, user_ids: [owner.id] }]);
    // Once joined, they may.
    expectStatus(
      await ctx.api.post(`/api/v1/workspaces/${channel.workspaceId}/channels/${open.id}/join`, {}, token(notJoined)),
      200,
    );
    expect((await reactOk(openBase, notJoined, id, "👍")).reactions).toEqual([{ emoji: "👍", count: 2, me: true }]);
  });

  it("refuses to edit a bot's message (403) while an owner may delete it", async () => {
    const owner = await registerUser(ctx.api, { name: "Olga Owner" });
    const created = await ctx.api.post(
      "/api/v1/workspaces",
      { name: unique("Bots"), visibility: "public" },
      { token: owner.token },
    );
    const workspaceId = created.body.data.id as string;
    const channels = await ctx.api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
    const channelId = (channels.body.data as { id: string; slug: string }[]).find((c) => c.slug === "general")!.id;
    const hook = await ctx.api.post(
      `/api/v1/workspaces/${workspaceId}/webhooks`,
      { name: "CI", default_channel_id: channelId, bot_name: "CI bot" },
      { token: owner.token },
    );
    expectStatus(hook, 201, "webhook");
    const response = await fetch(`${ctx.server.url}/webhooks/${hook.body.data.id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Service-Webhook-Secret": hook.body.data.secret },
      body: JSON.stringify({ content: "Build 42 passed" }),
    });
    expect(response.status).toBe(201);
    const bot = ((await response.json()) as { data: Message }).data;
    expect(bot.author).toMatchObject({ type: "bot" });
    const base = channelMessages(workspaceId, channelId);
    expectRefusal(await verbs.edit(base, owner, bot.id, { content: "Build 42 failed" }), 403, "edit a bot's message");
    const member = await registerUser(ctx.api, { name: "Mo Member" });
    await joinWorkspace(member, workspaceId);
    expectRefusal(await verbs.edit(base, member, bot.id, { content: "Build 42 failed" }), 403, "member edits");
    expectRefusal(await verbs.remove(base, member, bot.id), 403, "member deletes a bot's message");
    // Reacting to it is fine.
    expectStatus(await verbs.react(base, member, bot.id, "✅"), 200, "react to a bot");
    expectStatus(await verbs.remove(base, owner, bot.id), 204, "owner deletes a bot's message");
    expect((await listOf(base, owner)).map((m) => m.id)).not.toContain(bot.id);
  });
});

// ---------------------------------------------------------------------------------------------

function stage(user: RegisteredUser, text = "the notes"): Promise<Attachment> {
  return stageTextFile<Attachment>(ctx.server.url, user, text);
}

const download = (url: string, user: RegisteredUser) =>
  fetch(url, { headers: { Authorization: `Bearer ${user.token}` } }).then(async (response) => ({
    status: response.status,
    text: await response.text(),
  }));

async function storageKeyOf(attachmentId: string): Promise<string> {
  const [row] = await ctx.server.app.deps.db.select().from(attachments).where(eq(attachments.id, attachmentId));
  return row!.storageKey;
}

/**
 * Waits until the stored bytes under `storageKey` are gone: their deletion may run after the
 * answer (file_deletions, then the storage), but not as late as the 15-minute maintenance job.
 */
async function fileGone(storageKey: string) {
  const { db, storage } = ctx.server.app.deps;
  let state = "";
  await until(async () => {
    const queued = await db.select().from(fileDeletions).where(eq(fileDeletions.storageKey, storageKey));
    const stored = await storage.get(storageKey).then(
      () => true,
      () => false,
    );
    state = `queued in file_deletions: ${queued.length > 0}, still in storage: ${stored}`;
    return queued.length === 0 && !stored ? true : undefined;
  }, `the stored file to be deleted`).catch((error: Error) => {
    throw new Error(`${error.message} (${state})`);
  });
}

describe("validation", () => {
  it("answers 422 content to an empty edit or one over 40,000 characters; 40,000 is fine", async () => {
    const place = await channelPlace();
    const message = await postOk(place, place.author, "words");
    for (const body of [{ content: "" }, { content: "   " }, {}, { content: "x".repeat(40_001) }]) {
      expectFieldError(
        await verbs.edit(place.base, place.author, message.id, body),
        "content",
        JSON.stringify(body).slice(0, 40),
      );
    }
    const long = await verbs.edit(place.base, place.author, message.id, { content: "y".repeat(40_000) });
    expectStatus(long, 200, "40,000 characters");
    expect(long.body.data.content).toHaveLength(40_000);
  });

  it("takes an empty edit of a message with attachments, and ignores attachment_ids in an edit", async () => {
    const place = await channelPlace();
    const file = await stage(place.author);
    const message = await postOk(place, place.author, "see attached", { attachment_ids: [file.id] });
    expect(message.attachments.map((a) => a.id)).toEqual([file.id]);
    const another = await stage(place.author, "other file");
    const emptied = await verbs.edit(place.base, place.author, message.id, {
      content: "",
      attachment_ids: [another.id],
    });
    expectStatus(emptied, 200, "empty edit with attachments");
    expect(emptied.body.data).toMatchObject({ content: "", edited_at: expect.stringMatching(ISO_WITH_OFFSET) });
    expect(emptied.body.data.attachments.map((a: Attachment) => a.id)).toEqual([file.id]);
    // The other file was not claimed: it can still be posted.
    expect((await postOk(place, place.author, "", { attachment_ids: [another.id] })).attachments).toHaveLength(1);
  });

  it("answers 422 emoji to anything that is not one emoji or a short name", async () => {
    const place = await channelPlace();
    const message = await postOk(place, place.author, "react to me");
    for (const emoji of ["not an emoji", "👍👍", "Thumbsup", "a".repeat(65), "x!", ":smile:", "a👍", "\uFE0F👍"]) {
      expectFieldError(await verbs.react(place.base, place.other, message.id, emoji), "emoji", emoji);
      expectFieldError(await verbs.unreact(place.base, place.other, message.id, emoji), "emoji", `unreact ${emoji}`);
    }
    for (const emoji of ["+1", "thumbs_up", "a".repeat(64), "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵", "1\uFE0F\u20E3"])
      expectStatus(await verbs.react(place.base, place.other, message.id, emoji), 200, emoji);
    const who = await verbs.reactions(place.base, place.other, message.id);
    expect(who.body.data.map((r: { emoji: string }) => r.emoji)).toEqual([
      "+1",
      "thumbs_up",
      "a".repeat(64),
      "👍🏽",
      "👨‍👩‍👧‍👦",
      "🇯🇵",
      "1\u20E3",
    ]);
  });

  it("strips U+FE0F: ❤️ and ❤ are one reaction; a short name and an emoji are two", async () => {
    const place = await channelPlace();
    const message = await postOk(place, place.author, "love it");
    expect((await reactOk(place.base, place.author, message.id, "❤️")).reactions).toEqual([
      { emoji: "❤", count: 1, me: true },
    ]);
    expect((await reactOk(place.base, place.other, message.id, "❤")).reactions).toEqual([
      { emoji: "❤", count: 2, me: true },
    ]);
    expect((await reactOk(place.base, place.other, message.id, "heart")).reactions).toEqual([
      { emoji: "❤", count: 2, me: true },
      { emoji: "heart", count: 1, me: true },
    ]);
    expectStatus(await verbs.unreact(place.base, place.author, message.id, "❤"), 204);
    expectStatus(await verbs.unreact(place.base, place.other, message.id, "❤️"), 204);
    expect((await verbs.reactions(place.base, place.author, message.id)).body.data).toEqual([
      { emoji: "heart", count: 1, user_ids: [place.other.id] },
    ]);
  });

  it("keeps an emoji's place while anyone has it; once nobody has it, its next use goes to the end", async () => {
    const place = await channelPlace();
    const { author, other, base } = place;
    const message = await postOk(place, author, "order");
    await reactOk(base, author, message.id, "a");
    await reactOk(base, other, message.id, "b");
    await reactOk(base, other, message.id, "a");
    expectStatus(await verbs.unreact(base, author, message.id, "a"), 204);
    expect((await reactOk(base, author, message.id, "c")).reactions.map((r) => r.emoji)).toEqual(["a", "b", "c"]);
    expectStatus(await verbs.unreact(base, other, message.id, "a"), 204);
    expect((await reactOk(base, author, message.id, "a")).reactions).toEqual([
      { emoji: "b", count: 1, me: false },
      { emoji: "c", count: 1, me: true },
      { emoji: "a", count: 1, me: true },
    ]);
  });

  it("allows 50 distinct emoji on a message: the 51st is 422 emoji, an emoji already there still counts", async () => {
    const place = await channelPlace();
    const message = await postOk(place, place.author, "fifty");
    for (let index = 1; index <= 50; index++)
      expectStatus(await verbs.react(place.base, place.author, message.id, `e${index}`), 200, `e${index}`);
    expectFieldError(await verbs.react(place.base, place.author, message.id, "e51"), "emoji", "the 51st");
    expectFieldError(await verbs.react(place.base, place.other, message.id, "👍"), "emoji", "the 51st by another");
    const existing = await reactOk(place.base, place.other, message.id, "e50");
    expect(existing.reactions).toHaveLength(50);
    expect(existing.reactions[49]).toEqual({ emoji: "e50", count: 2, me: true });
    // Freeing a slot lets a new one in.
    expectStatus(await verbs.unreact(place.base, place.author, message.id, "e1"), 204);
    expect((await reactOk(place.base, place.other, message.id, "e51")).reactions.at(-1)).toEqual({
      emoji: "e51",
      count: 1,
      me: true,
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe("deleting", () => {
  it("leaves a thread parent with replies as a tombstone, which goes with its last reply", async () => {
    const channel = await channelPlace();
    const { author: member, other: owner, base } = channel;
    const feed = await live.attachedChannelFeed(member, owner, channel.workspaceId, channel.channelId);
    const file = await stage(owner, "parent file");
    const parent = await postOk(channel, owner, unique("parent"), { attachment_ids: [file.id] });
    const storageKey = await storageKeyOf(file.id);
    await reactOk(base, member, parent.id, "👍");
    const reply = (content: string) => postOk(channel, member, content, { parent_message_id: parent.id });
    const first = await reply("first reply");
    const second = await reply("second reply");
    expect((await channel.history(owner)).find((m) => m.id === parent.id)!.reply_count).toBe(2);

    expectStatus(await verbs.remove(base, owner, parent.id), 204, "delete the parent");
    const tombstone = (await channel.history(member)).find((m) => m.id === parent.id);
    expect(tombstone).toMatchObject({
      id: parent.id,
      content: "",
      attachments: [],
      reactions: [],
      reply_count: 2,
      deleted_at: expect.stringMatching(ISO_WITH_OFFSET),
    });
    // Its thread is still readable.
    expect((await listOf(`${base}?parent_message_id=${parent.id}`, member)).map((m) => m.id).sort()).toEqual(
      [first.id, second.id].sort(),
    );
    // Its file and reactions went with it (the stored bytes are checked at the end).
    expect((await download(file.download_url, owner)).status).toBe(404);
    // A tombstone is a deleted message to every verb.
    for (const user of [owner, member])
      for (const [verb, response] of await everyVerb(base, user, parent.id)) expectRefusal(response, 404, verb);

    expectStatus(await verbs.remove(base, member, first.id), 204, "delete the first reply");
    expect((await channel.history(owner)).find((m) => m.id === parent.id)).toMatchObject({
      reply_count: 1,
      deleted_at: expect.any(String),
    });
    expectStatus(await verbs.remove(base, member, second.id), 204, "delete the last reply");
    expect((await channel.history(owner)).map((m) => m.id)).not.toContain(parent.id);

    // Live: the parent's delete, each reply's, and after the last one's a second one for the parent.
    const deletes = await until(() => {
      const found = feed.received.filter(({ event }) => event.type === "message.deleted");
      return found.length >= 4 ? found : undefined;
    }, "four message.deleted events");
    const scope = {
      workspace_id: channel.workspaceId,
      channel_id: channel.channelId,
      conversation_id: null,
      room_id: null,
    };
    expect(deletes.map(({ event }) => event.data)).toEqual([
      { id: parent.id, parent_message_id: null, ...scope },
      { id: first.id, parent_message_id: parent.id, ...scope },
      { id: second.id, parent_message_id: parent.id, ...scope },
      { id: parent.id, parent_message_id: null, ...scope },
    ]);
    await fileGone(storageKey);
  });

  it("lowers the parent's reply_count when a reply goes; the parent stays as it was", async () => {
    const channel = await channelPlace();
    const parent = await postOk(channel, channel.other, "parent");
    const replies = [];
    for (const content of ["one", "two", "three"])
      replies.push(await postOk(channel, channel.author, content, { parent_message_id: parent.id }));
    expectStatus(await verbs.remove(channel.base, channel.author, replies[1]!.id), 204);
    expect((await channel.history(channel.other)).find((m) => m.id === parent.id)).toMatchObject({
      content: "parent",
      reply_count: 2,
      deleted_at: null,
    });
    expect(
      (await listOf(`${channel.base}?parent_message_id=${parent.id}`, channel.other)).map((m) => m.content),
    ).toEqual(["three", "one"]);
    // A parent without replies is simply gone.
    expectStatus(await verbs.remove(channel.base, channel.author, replies[0]!.id), 204);
    expectStatus(await verbs.remove(channel.base, channel.author, replies[2]!.id), 204);
    expect((await channel.history(channel.other)).find((m) => m.id === parent.id)!.reply_count).toBe(0);
    expectStatus(await verbs.remove(channel.base, channel.other, parent.id), 204);
    expect((await channel.history(channel.other)).map((m) => m.id)).not.toContain(parent.id);
  });

  it("moves a conversation's last_message back to the one before, and to null", async () => {
    const direct = await directPlace();
    const older = await postOk(direct, direct.author, "older");
    const newer = await postOk(direct, direct.other, "newer");
    const lastOf = async (user: RegisteredUser) => {
      const response = await ctx.api.get("/api/v1/direct-conversations", { token: user.token });
      expectStatus(response, 200);
      return (response.body.data as { id: string; last_message: Message | null }[]).find(
        (conversation) => conversation.id === direct.conversationId,
      )!.last_message;
    };
    expect((await lastOf(direct.author))?.id).toBe(newer.id);
    expectStatus(await verbs.remove(direct.base, direct.other, newer.id), 204);
    for (const user of [direct.author, direct.other])
      expect(await lastOf(user)).toMatchObject({ id: older.id, content: "older" });
    // An edit of the last message shows in it.
    expectStatus(await verbs.edit(direct.base, direct.author, older.id, { content: "older, edited" }), 200);
    expect(await lastOf(direct.other)).toMatchObject({ id: older.id, content: "older, edited" });
    expectStatus(await verbs.remove(direct.base, direct.author, older.id), 204);
    expect(await lastOf(direct.author)).toBeNull();
  });

  it("deletes a message's files: the download answers 404 and the stored bytes go", async () => {
    const storageKeys: string[] = [];
    for (const kind of ["channel", "direct", "room"] as const) {
      const place = await placeOf(kind);
      const file = await stage(place.author, `bytes of ${kind}`);
      const message = await postOk(place, place.author, `with a file (${kind})`, { attachment_ids: [file.id] });
      const url = message.attachments[0]!.download_url;
      expect(await download(url, place.other)).toEqual({ status: 200, text: `bytes of ${kind}` });
      const storageKey = await storageKeyOf(file.id);
      expectStatus(await verbs.remove(place.base, place.author, message.id), 204, kind);
      expect((await download(url, place.author)).status, kind).toBe(404);
      expect((await download(url, place.other)).status, kind).toBe(404);
      storageKeys.push(storageKey);
    }
    for (const storageKey of storageKeys) await fileGone(storageKey);
  });
});

// ---------------------------------------------------------------------------------------------

const eventsOf = (feed: Feed, messageId: string): Received[] =>
  feed.received.filter(({ event }) => {
    const data = event.data as Record<string, unknown> & { message?: { id: string } };
    return data.message?.id === messageId || data.message_id === messageId || data.id === messageId;
  });

describe("live events", () => {
  it("sends a channel's subscriber message.updated, reaction.added/removed and message.deleted, nothing for a no-op", async () => {
    const { owner, member, workspace, general } = await live.team();
    const base = channelMessages(workspace.id, general.id);
    const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id);
    const message = await live.post(owner, workspace.id, general.id, unique("live original"));
    await arrived(feed, message.content);

    expectStatus(await verbs.edit(base, owner, message.id, { content: message.content }), 200, "no-op edit");
    expectStatus(await verbs.react(base, member, message.id, "👍"), 200);
    const editedText = unique("live edited");
    const edited = await verbs.edit(base, owner, message.id, { content: editedText });
    expectStatus(edited, 200);
    expectStatus(await verbs.react(base, owner, message.id, "👍"), 200);
    expectStatus(await verbs.unreact(base, member, message.id, "👍"), 204);
    expectStatus(await verbs.unreact(base, member, message.id, "👍"), 204, "a reaction no longer there");
    expectStatus(await verbs.remove(base, owner, message.id), 204);

    const events = await until(() => {
      const found = eventsOf(feed, message.id);
      return found.some(({ event }) => event.type === "message.deleted") ? found : undefined;
    }, "the message.deleted event");
    expect(events.map(({ event }) => event.type)).toEqual([
      "message.created",
      "reaction.added",
      "message.updated",
      "reaction.added",
      "reaction.removed",
      "message.deleted",
    ]);
    for (const { event } of events) expect(event).toMatchObject({ workspace_id: workspace.id, channel_id: general.id });
    const [, added, updated, addedAgain, removed, deleted] = events.map(({ event }) => event);
    expect(added!.data).toEqual({ message_id: message.id, emoji: "👍", user_id: member.id, count: 1 });
    expect(addedAgain!.data).toEqual({ message_id: message.id, emoji: "👍", user_id: owner.id, count: 2 });
    expect(removed!.data).toEqual({ message_id: message.id, emoji: "👍", user_id: member.id, count: 1 });
    const updatedMessage = (updated!.data as { message: Message }).message;
    expect(Object.keys(updated!.data)).toEqual(["message"]);
    expect(updatedMessage).toMatchObject({
      id: message.id,
      content: editedText,
      edited_at: edited.body.data.edited_at,
      deleted_at: null,
      author: { type: "user", id: owner.id },
    });
    expect(updatedMessage.reactions).toEqual([{ emoji: "👍", count: 1 }]);
    expect(deleted!.data).toEqual({
      id: message.id,
      parent_message_id: null,
      workspace_id: workspace.id,
      channel_id: general.id,
      conversation_id: null,
      room_id: null,
    });
    expect(Object.keys(deleted!.data).sort()).toEqual(
      ["id", "parent_message_id", "workspace_id", "channel_id", "conversation_id", "room_id"].sort(),
    );
  });

  it("sends a reply's message.deleted with its parent_message_id", async () => {
    const channel = await channelPlace();
    const feed = await live.attachedChannelFeed(channel.author, channel.other, channel.workspaceId, channel.channelId);
    const parent = await postOk(channel, channel.other, "parent");
    const reply = await postOk(channel, channel.author, "reply", { parent_message_id: parent.id });
    const edited = await verbs.edit(channel.base, channel.author, reply.id, { content: "reply, edited" });
    expectStatus(edited, 200);
    expectStatus(await verbs.remove(channel.base, channel.author, reply.id), 204);
    const deleted = await until(
      () => eventsOf(feed, reply.id).find(({ event }) => event.type === "message.deleted"),
      "the reply's message.deleted",
    );
    expect(deleted.event.data).toMatchObject({ id: reply.id, parent_message_id: parent.id });
    const updated = eventsOf(feed, reply.id).find(({ event }) => event.type === "message.updated")!;
    expect((updated.event.data as { message: Message }).message).toMatchObject({
      content: "reply, edited",
      parent_message_id: parent.id,
    });
  });

  it("sends direct and room events to their subscribers", async () => {
    const direct = await directPlace();
    const room = await roomPlace();
    const directFeed = collect((handlers) =>
      live
        .chat(direct.other.token)
        .direct.onConversation.subscribe({ conversation_id: direct.conversationId }, handlers),
    );
    const roomFeed = collect((handlers) =>
      live.chat(room.other.token).rooms.onRoom.subscribe({ room_id: room.roomId }, handlers),
    );
    await until(() => (directFeed.isStarted() && roomFeed.isStarted() ? true : undefined), "the subscriptions");
    for (const [place, feed] of [
      [direct, directFeed],
      [room, roomFeed],
    ] as const) {
      const message = await postOk(place, place.author, "hello there");
      await until(() => feed.messages().find((m) => m.messageId === message.id), `${place.kind} message.created`);
      expectStatus(await verbs.edit(place.base, place.author, message.id, { content: "hello, edited" }), 200);
      expectStatus(await verbs.react(place.base, place.other, message.id, "wave"), 200);
      expectStatus(await verbs.unreact(place.base, place.other, message.id, "wave"), 204);
      expectStatus(await verbs.remove(place.base, place.author, message.id), 204);
      const events = await until(() => {
        const found = eventsOf(feed, message.id);
        return found.length >= 5 ? found : undefined;
      }, `${place.kind} events`);
      expect(events.map(({ event }) => event.type)).toEqual([
        "message.created",
        "message.updated",
        "reaction.added",
        "reaction.removed",
        "message.deleted",
      ]);
      expect(events[4]!.event.data).toEqual({
        id: message.id,
        parent_message_id: null,
        workspace_id: null,
        channel_id: null,
        conversation_id: place.conversationId ?? null,
        room_id: place.roomId ?? null,
      });
      expect(events[2]!.event.data).toEqual({
        message_id: message.id,
        emoji: "wave",
        user_id: place.other.id,
        count: 1,
      });
    }
  });

  it("keeps a private channel's changes from a workspace member outside it, on events.onUser", async () => {
    const { owner, member: outside, workspace, general } = await live.team();
    const secret = await live.createChannel(owner, workspace.id, "private");
    const secretBase = channelMessages(workspace.id, secret.id);
    const ownerFeed = await live.attachedUserFeed(owner);
    const outsideFeed = await live.attachedUserFeed(outside);
    const message = await live.post(owner, workspace.id, secret.id, unique("secret"));
    expectStatus(await verbs.react(secretBase, owner, message.id, "🤫"), 200);
    expectStatus(await verbs.edit(secretBase, owner, message.id, { content: unique("secret edited") }), 200);
    expectStatus(await verbs.unreact(secretBase, owner, message.id, "🤫"), 204);
    expectStatus(await verbs.remove(secretBase, owner, message.id), 204);
    const barrier = unique("barrier");
    await live.post(owner, workspace.id, general.id, barrier);
    await Promise.all([arrived(ownerFeed, barrier), arrived(outsideFeed, barrier)]);

    expect(eventsOf(ownerFeed, message.id).map(({ event }) => event.type)).toEqual([
      "message.created",
      "reaction.added",
      "message.updated",
      "reaction.removed",
      "message.deleted",
    ]);
    const leaked = outsideFeed.received.filter(({ event }) => JSON.stringify(event).includes(secret.id));
    expect(leaked.map(({ event }) => event.type)).toEqual([]);
    expect(eventsOf(outsideFeed, message.id)).toEqual([]);
  });

  it("replays an edit and a delete to a subscriber that resumes from before them", async () => {
    const { owner, member, workspace, general } = await live.team();
    const base = channelMessages(workspace.id, general.id);
    const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id);
    const message = await live.post(owner, workspace.id, general.id, unique("before the gap"));
    const created = await arrived(feed, message.content);
    feed.unsubscribe();

    const editedText = unique("edited in the gap");
    expectStatus(await verbs.edit(base, owner, message.id, { content: editedText }), 200);
    expectStatus(await verbs.react(base, owner, message.id, "👋"), 200);
    expectStatus(await verbs.remove(base, owner, message.id), 204);

    const resumed = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: created.id,
    });
    const events = await until(() => {
      const found = eventsOf(resumed, message.id);
      return found.some(({ event }) => event.type === "message.deleted") ? found : undefined;
    }, "the replayed message.deleted");
    expect(events.map(({ event }) => event.type)).toEqual(["message.updated", "reaction.added", "message.deleted"]);
    expect((events[0]!.event.data as { message: Message }).message.content).toBe(editedText);
    // The ids follow the original order.
    const ids = events.map(({ id }) => BigInt(id));
    expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);
    expect(ids[0]! > BigInt(created.id)).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------

describe("mentions", () => {
  it("lists the channel members <@id> names, in order and once each; others are ignored", async () => {
    const channel = await channelPlace();
    const { author: member, other: owner } = channel;
    const outsider = await registerUser(ctx.api, { name: "Out Sider" });
    const posted = await postOk(
      channel,
      member,
      `hi <@${owner.id}> and <@${outsider.id}>, <@${member.id}>, again <@${owner.id}>, <@999999999> <@abc>`,
    );
    expect(posted).toMatchObject({ mentioned_user_ids: [owner.id, member.id], mentions_channel: false });
    expect((await channel.history(owner)).find((m) => m.id === posted.id)).toMatchObject({
      mentioned_user_ids: [owner.id, member.id],
      mentions_channel: false,
    });
    for (const content of ["<!channel> look", "look <!here>"])
      expect(await postOk(channel, member, content)).toMatchObject({ mentioned_user_ids: [], mentions_channel: true });
    expect(await postOk(channel, member, "<!everyone> <!chan> <@>")).toMatchObject({
      mentioned_user_ids: [],
      mentions_channel: false,
    });
  });

  it("ignores a workspace member who is not in the private channel", async () => {
    const channel = await channelPlace();
    const { author: member, other: owner } = channel;
    const secret = await live.createChannel(owner, channel.workspaceId, "private");
    const posted = await ctx.api.post(
      channelMessages(channel.workspaceId, secret.id),
      { content: `<@${member.id}> <@${owner.id}>` },
      { token: owner.token },
    );
    expectStatus(posted, 201);
    expect(posted.body.data.mentioned_user_ids).toEqual([owner.id]);
  });

  it("counts the participants of a conversation or room only", async () => {
    const stranger = await registerUser(ctx.api, { name: "Stranger" });
    for (const kind of ["direct", "room"] as const) {
      const place = await placeOf(kind);
      const posted = await postOk(place, place.author, `<@${stranger.id}> <@${place.other.id}> <!here>`);
      expect(posted, kind).toMatchObject({ mentioned_user_ids: [place.other.id], mentions_channel: true });
    }
  });

  it("evaluates mentions again on an edit", async () => {
    const channel = await channelPlace();
    const { author: member, other: owner, base } = channel;
    const posted = await postOk(channel, member, `hey <@${owner.id}>`);
    expect(posted.mentioned_user_ids).toEqual([owner.id]);
    const first = await verbs.edit(base, member, posted.id, { content: `<!channel> and <@${member.id}>` });
    expect(first.body.data).toMatchObject({ mentioned_user_ids: [member.id], mentions_channel: true });
    expect((await channel.history(owner)).find((m) => m.id === posted.id)).toMatchObject({
      mentioned_user_ids: [member.id],
      mentions_channel: true,
    });
    const second = await verbs.edit(base, member, posted.id, { content: "nobody in particular" });
    expect(second.body.data).toMatchObject({ mentioned_user_ids: [], mentions_channel: false });
  });
});

// ---------------------------------------------------------------------------------------------

describe("outbound webhooks", () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(() => receiver?.stop());

  it("delivers message.updated, message.deleted, reaction.added and reaction.removed of a channel message", async () => {
    const channel = await channelPlace();
    const { other: owner, author: member, base, workspaceId } = channel;
    const path = `/lifecycle-${randomBytes(4).toString("hex")}`;
    const hook = await ctx.api.post(
      `/api/v1/workspaces/${workspaceId}/outbound-webhooks`,
      {
        url: `${receiver.url}${path}`,
        events: ["message.updated", "message.deleted", "reaction.added", "reaction.removed"],
      },
      { token: owner.token },
    );
    expectStatus(hook, 201, "outbound webhook");
    const message = await postOk(channel, member, unique("outbound original"));
    const editedText = unique("outbound edited");
    expectStatus(await verbs.edit(base, member, message.id, { content: editedText }), 200);
    expectStatus(await verbs.react(base, owner, message.id, "🚀"), 200);
    expectStatus(await verbs.unreact(base, owner, message.id, "🚀"), 204);
    expectStatus(await verbs.remove(base, member, message.id), 204);

    const received = (await receiver.waitFor(4, path, 15_000)).sort((a, b) => (a.json.id < b.json.id ? -1 : 1));
    expect(received.map((request) => request.json.event)).toEqual([
      "message.updated",
      "reaction.added",
      "reaction.removed",
      "message.deleted",
    ]);
    const [updated, added, removed, deleted] = received.map((request) => request.json);
    for (const delivery of [updated, added, removed, deleted]) expect(delivery.workspace_id).toBe(workspaceId);
    expect(updated.data.message).toMatchObject({ id: message.id, content: editedText, translation: null });
    expect(updated.data.message.edited_at).toMatch(ISO_WITH_OFFSET);
    expect(added.data).toEqual({ message_id: message.id, emoji: "🚀", user_id: owner.id, count: 1 });
    expect(removed.data).toEqual({ message_id: message.id, emoji: "🚀", user_id: owner.id, count: 0 });
    expect(deleted.data).toEqual({
      id: message.id,
      parent_message_id: null,
      workspace_id: workspaceId,
      channel_id: channel.channelId,
      conversation_id: null,
      room_id: null,
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe("translation of an edited message", () => {
  let fake: FakeTranslator;
  let server: TestServer;
  let api: RestClient;
  const translated = world(
    () => server,
    () => api,
  );
  const translating = useTranslatingServer();
  beforeAll(() => ({ fake, server, api } = translating));

  const requestsFor = (text: string) => fake.requests.filter((request) => request.texts.some((t) => t.includes(text)));

  it("translates it again: the reader sees pending in message.updated, then translation.ready with the new text", async () => {
    const [owner, reader] = await Promise.all([
      registerUser(api, { name: "Owen", preferred_language: "en" }),
      registerUser(api, { name: "Rika", preferred_language: "ja" }),
    ]);
    const created = await api.post(
      "/api/v1/workspaces",
      { name: unique("Team"), visibility: "public" },
      { token: owner.token },
    );
    const workspaceId = created.body.data.id as string;
    expectStatus(await api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: reader.token }), 200);
    const channels = await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
    const channelId = (channels.body.data as { id: string; slug: string }[]).find((c) => c.slug === "general")!.id;
    const base = channelMessages(workspaceId, channelId);
    const readAs = async (user: RegisteredUser, id: string) => {
      const response = await api.get(base, { token: user.token });
      return (response.body.data as Message[]).find((m) => m.id === id)! as Message & {
        translation: { language: string; status: string; content: string | null } | null;
      };
    };

    const feed = await translated.attachedChannelFeed(reader, owner, workspaceId, channelId);
    const before = unique("Good morning");
    const posted = await api.post(base, { content: before }, { token: owner.token });
    expectStatus(posted, 201);
    const id = posted.body.data.id as string;
    const readyFor = (content: string) =>
      until(
        () =>
          feed.received.find(
            ({ event }) =>
              event.type === "translation.ready" && event.data.message_id === id && event.data.content === content,
          ),
        `translation.ready with ${content}`,
      );
    await readyFor(`[ja] ${before}`);

    const after = unique("Good evening");
    const edited = await api.patch(`${base}/${id}`, { content: after }, { token: owner.token });
    expectStatus(edited, 200);
    expect(edited.body.data.translation).toEqual({ language: "en", content: null, status: "not_needed" });
    // Never the old text's translation again.
    const right = (await readAs(reader, id)).translation!;
    expect(right.language).toBe("ja");
    expect(["pending", "done"]).toContain(right.status);
    expect(right.content).not.toBe(`[ja] ${before}`);

    const ready = await readyFor(`[ja] ${after}`);
    const updated = feed.received.find(
      ({ event }) => event.type === "message.updated" && event.data.message.id === id,
    )!;
    expect(updated, "message.updated").toBeDefined();
    expect((updated.event.data as { message: Message }).message).toMatchObject({
      content: after,
      translation: { language: "ja", content: null, status: "pending" },
    });
    expect(BigInt(updated.id) < BigInt(ready.id)).toBe(true);
    expect(ready.event.data).toMatchObject({ message_id: id, language: "ja", status: "done" });
    await until(async () => {
      const read = await readAs(reader, id);
      return read.translation?.status === "done" ? read : undefined;
    }, "the new translation over REST");
    expect((await readAs(reader, id)).translation).toEqual({
      language: "ja",
      content: `[ja] ${after}`,
      status: "done",
    });
    expect(requestsFor(after)).toHaveLength(1);

    // The same text again costs no provider call and no new translation.
    expectStatus(await api.patch(`${base}/${id}`, { content: after }, { token: owner.token }), 200);
    const barrier = unique("barrier");
    expectStatus(await api.post(base, { content: barrier }, { token: owner.token }), 201);
    await until(
      () =>
        feed.received.find(
          ({ event }) => event.type === "translation.ready" && event.data.content === `[ja] ${barrier}`,
        ),
      "the barrier's translation",
    );
    expect(requestsFor(after)).toHaveLength(1);
    expect(
      feed.received.filter(({ event }) => event.type === "translation.ready" && event.data.message_id === id),
    ).toHaveLength(2);
  });
});
