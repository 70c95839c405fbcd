// Read state (contract: "Read state, unread counts, mentions and push preferences"; docs/unread.md):
// read positions in channels and direct conversations (POST …/read, …/unread), the counts on the
// channel list, the conversation list and GET /api/v1/unread, mentions (`<@id>`, `<!channel>`,
// `<!here>`) only for those who can read, edits and deletes, joining late, leaving, racing
// devices, and `read.updated` on the reader's own stream, live and on resume. Over REST and the
// typed client.
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { conversations, messages } from "../db/schema/index.ts";
import { newId } from "../server/ids.ts";
import { type ApiResponse } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { attach, collect, world, type Received } from "./helpers/live.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);
const api = () => ctx.api;

type Counts = { last_read_message_id: string | null; unread_count: number; mention_count: number };
type ChannelRow = Counts & { id: string; is_member: boolean; muted: boolean | null };

function expectStatus(response: ApiResponse, status: number, what = ""): void {
  expect(response.status, `${what} ${JSON.stringify(response.body)}`).toBe(status);
}

async function post(user: RegisteredUser, workspaceId: string, channelId: string, content: string, parent?: string) {
  const response = await api().post(
    `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
    { content, ...(parent && { parent_message_id: parent }) },
    { token: user.token },
  );
  expectStatus(response, 201, "post");
  return response.body.data as { id: string; mentioned_user_ids: number[]; mentions_channel: boolean };
}

async function channelRow(user: RegisteredUser, workspaceId: string, channelId: string): Promise<ChannelRow> {
  const response = await api().get(`/api/v1/workspaces/${workspaceId}/channels`, { token: user.token });
  expectStatus(response, 200, "list channels");
  return (response.body.data as ChannelRow[]).find((row) => row.id === channelId)!;
}

const counts = (row: Counts) => ({
  last_read_message_id: row.last_read_message_id,
  unread_count: row.unread_count,
  mention_count: row.mention_count,
});

async function markRead(user: RegisteredUser, workspaceId: string, channelId: string, messageId: string) {
  return api().post(
    `/api/v1/workspaces/${workspaceId}/channels/${channelId}/read`,
    { message_id: messageId },
    { token: user.token },
  );
}

async function markUnread(user: RegisteredUser, workspaceId: string, channelId: string, messageId: string) {
  return api().post(
    `/api/v1/workspaces/${workspaceId}/channels/${channelId}/unread`,
    { message_id: messageId },
    { token: user.token },
  );
}

/** The read-positions consumer moves an author's position after their post: wait for it. */
async function positionReaches(user: RegisteredUser, workspaceId: string, channelId: string, messageId: string) {
  await until(async () => {
    const row = await channelRow(user, workspaceId, channelId);
    return row.last_read_message_id === messageId ? row : undefined;
  }, `the position of ${user.name} to reach ${messageId}`);
}

describe("read positions and counts in a channel", () => {
  it("counts others' top-level messages and mentions of the reader; the reader's own post moves their position", async () => {
    const { owner, member, workspace, general } = await live.team();
    // Joining a channel starts at its newest message (none yet: null).
    const start = await channelRow(member, workspace.id, general.id);
    expect(start).toMatchObject({ is_member: true, muted: false, unread_count: 0, mention_count: 0 });

    const first = await post(owner, workspace.id, general.id, "hello");
    const mention = await post(owner, workspace.id, general.id, `hi <@${member.id}>`);
    expect(mention.mentioned_user_ids).toEqual([member.id]);
    const elsewhere = await post(owner, workspace.id, general.id, `hi <@${owner.id}>`);
    const reply = await post(owner, workspace.id, general.id, `in thread <@${member.id}>`, first.id);
    await post(owner, workspace.id, general.id, "thread only", first.id);
    const everyone = await post(owner, workspace.id, general.id, "<!channel> meeting");
    expect(everyone.mentions_channel).toBe(true);
    await post(owner, workspace.id, general.id, "<!here> anyone?");

    // Top-level: hello, mention, elsewhere, everyone, here = 5; mentions: mention, reply, channel, here = 4.
    const row = await channelRow(member, workspace.id, general.id);
    expect(counts(row)).toEqual({
      last_read_message_id: start.last_read_message_id,
      unread_count: 5,
      mention_count: 4,
    });
    // The author's own messages are never unread for them, and their position follows their post.
    await positionReaches(
      owner,
      workspace.id,
      general.id,
      (await channelRow(owner, workspace.id, general.id)).last_read_message_id!,
    );
    const ownerRow = await channelRow(owner, workspace.id, general.id);
    expect(ownerRow).toMatchObject({ unread_count: 0, mention_count: 0 });

    // Reading up to the message that mentions the member: 3 top-level and 3 mentions left (the reply is after it).
    const read = await markRead(member, workspace.id, general.id, mention.id);
    expectStatus(read, 200, "read");
    expect(read.body).toEqual({ data: { last_read_message_id: mention.id, unread_count: 3, mention_count: 3 } });
    void elsewhere;
    void reply;

    // An older id is a no-op 200 that answers where the position is.
    const older = await markRead(member, workspace.id, general.id, first.id);
    expectStatus(older, 200, "older read");
    expect(older.body.data).toEqual({ last_read_message_id: mention.id, unread_count: 3, mention_count: 3 });

    // The member posts: their position moves to their own post, so everything before it is read.
    const own = await post(member, workspace.id, general.id, "I'm here");
    await positionReaches(member, workspace.id, general.id, own.id);
    expect(counts(await channelRow(member, workspace.id, general.id))).toEqual({
      last_read_message_id: own.id,
      unread_count: 0,
      mention_count: 0,
    });
  });

  it("a reply does not move its author's position; a reply's id moves a reader's like any id", async () => {
    const { owner, member, workspace, general } = await live.team();
    const parent = await post(owner, workspace.id, general.id, "parent");
    await markRead(member, workspace.id, general.id, parent.id);
    const later = await post(owner, workspace.id, general.id, "later");
    const reply = await post(member, workspace.id, general.id, "a reply", parent.id);
    // Give the consumer its chance, then check the member's position did not move to the reply.
    const marker = await post(owner, workspace.id, general.id, "marker");
    await positionReaches(owner, workspace.id, general.id, marker.id);
    const row = await channelRow(member, workspace.id, general.id);
    expect(row.last_read_message_id).toBe(parent.id);
    expect(row.unread_count).toBe(2);
    void later;
    const moved = await markRead(member, workspace.id, general.id, reply.id);
    expect(moved.body.data).toEqual({ last_read_message_id: reply.id, unread_count: 1, mention_count: 0 });
  });

  it("mark unread moves back to just before a message, reply or not", async () => {
    const { owner, member, workspace, general } = await live.team();
    const a = await post(owner, workspace.id, general.id, "a");
    const b = await post(owner, workspace.id, general.id, `b <@${member.id}>`);
    const c = await post(owner, workspace.id, general.id, "c");
    await markRead(member, workspace.id, general.id, c.id);
    const back = await markUnread(member, workspace.id, general.id, b.id);
    expectStatus(back, 200, "unread");
    expect(back.body).toEqual({ data: { last_read_message_id: a.id, unread_count: 2, mention_count: 1 } });
    const toStart = await markUnread(member, workspace.id, general.id, a.id);
    expect(toStart.body.data.last_read_message_id).toBeNull();
    expect(toStart.body.data.unread_count).toBe(3);
  });

  it("edits re-evaluate mentions and deletes leave every count", async () => {
    const { owner, member, workspace, general } = await live.team();
    const plain = await post(owner, workspace.id, general.id, "plain");
    const edited = await api().patch(
      `/api/v1/workspaces/${workspace.id}/channels/${general.id}/messages/${plain.id}`,
      { content: `now <@${member.id}>` },
      { token: owner.token },
    );
    expectStatus(edited, 200, "edit");
    expect((await channelRow(member, workspace.id, general.id)).mention_count).toBe(1);
    const mention = await post(owner, workspace.id, general.id, `<@${member.id}> again`);
    expect(counts(await channelRow(member, workspace.id, general.id))).toMatchObject({
      unread_count: 2,
      mention_count: 2,
    });
    const removed = await api().delete(
      `/api/v1/workspaces/${workspace.id}/channels/${general.id}/messages/${mention.id}`,
      { token: owner.token },
    );
    expectStatus(removed, 204, "delete");
    expect(counts(await channelRow(member, workspace.id, general.id))).toMatchObject({
      unread_count: 1,
      mention_count: 1,
    });
    // A deleted message is not a message to read up to.
    expectStatus(await markRead(member, workspace.id, general.id, mention.id), 422, "read a deleted message");
  });

  it("joining late starts at the newest message; a mention of a non-member counts for nobody; leaving drops the counts", async () => {
    const { owner, member, workspace } = await live.team();
    const channel = await live.createChannel(owner, workspace.id, "public");
    const before = await post(owner, workspace.id, channel.id, `before <@${member.id}>`);
    // The member was not in the channel: the mention is ignored.
    expect(before.mentioned_user_ids).toEqual([]);
    // A public channel not joined: listed with nulls.
    const notJoined = await channelRow(member, workspace.id, channel.id);
    expect(notJoined).toMatchObject({
      is_member: false,
      last_read_message_id: null,
      unread_count: null,
      mention_count: null,
      muted: null,
    });
    // Reading there needs a membership: 403.
    expectStatus(await markRead(member, workspace.id, channel.id, before.id), 403, "read unjoined");

    const joined = await api().post(
      `/api/v1/workspaces/${workspace.id}/channels/${channel.id}/join`,
      {},
      { token: member.token },
    );
    expectStatus(joined, 200, "join");
    expect(counts(await channelRow(member, workspace.id, channel.id))).toEqual({
      last_read_message_id: before.id,
      unread_count: 0,
      mention_count: 0,
    });
    await post(owner, workspace.id, channel.id, `after <@${member.id}>`);
    expect(counts(await channelRow(member, workspace.id, channel.id))).toMatchObject({
      unread_count: 1,
      mention_count: 1,
    });
    const summary = await api().get("/api/v1/unread", { token: member.token });
    expect(summary.body.data.channels.map((row: { channel_id: string }) => row.channel_id)).toContain(channel.id);

    const left = await api().delete(`/api/v1/workspaces/${workspace.id}/channels/${channel.id}/members/${member.id}`, {
      token: member.token,
    });
    expect([200, 204]).toContain(left.status);
    expect(await channelRow(member, workspace.id, channel.id)).toMatchObject({ is_member: false, unread_count: null });
    const after = await api().get("/api/v1/unread", { token: member.token });
    expect(after.body.data.channels.map((row: { channel_id: string }) => row.channel_id)).not.toContain(channel.id);
  });

  it("a private channel the caller is not in is 404, and unlisted", async () => {
    const { owner, member, workspace } = await live.team();
    const secret = await live.createChannel(owner, workspace.id, "private");
    const message = await post(owner, workspace.id, secret.id, `<!channel> secret`);
    const read = await markRead(member, workspace.id, secret.id, message.id);
    expectStatus(read, 404, "read a private channel");
    expect(read.body).toEqual({ message: "Channel not found." });
    expect(await channelRow(member, workspace.id, secret.id)).toBeUndefined();
    const summary = await api().get("/api/v1/unread", { token: member.token });
    expect(summary.body.data.total_mentions).toBe(0);
  });

  it("refuses a message of another place, an unknown id and a malformed one with 422 on message_id", async () => {
    const { owner, member, workspace, general } = await live.team();
    const other = await live.createChannel(owner, workspace.id, "public");
    const elsewhere = await post(owner, workspace.id, other.id, "elsewhere");
    for (const messageId of [elsewhere.id, "msg_00000000000000000000000000", "nope"]) {
      const response = await markRead(member, workspace.id, general.id, messageId);
      expectStatus(response, 422, messageId);
      expect(response.body).toEqual({
        message: "The given data was invalid.",
        errors: { message_id: [expect.any(String)] },
      });
    }
    const missing = await api().post(
      `/api/v1/workspaces/${workspace.id}/channels/${general.id}/read`,
      {},
      { token: member.token },
    );
    expectStatus(missing, 422, "no message_id");
    expect(Object.keys(missing.body.errors)).toEqual(["message_id"]);
  });

  it("two devices racing leave the position at the further message", async () => {
    const { owner, member, workspace, general } = await live.team();
    const ids: string[] = [];
    for (let index = 0; index < 8; index++) ids.push((await post(owner, workspace.id, general.id, `m${index}`)).id);
    const answers = await Promise.all(ids.map((id) => markRead(member, workspace.id, general.id, id)));
    for (const answer of answers) expectStatus(answer, 200, "racing read");
    expect((await channelRow(member, workspace.id, general.id)).last_read_message_id).toBe(ids.at(-1));
  });
});

describe("read positions in direct conversations", () => {
  it("counts every unread message as a mention, moves with the author's post, and refuses outsiders", async () => {
    const [ada, bob, eve] = await Promise.all([
      registerUser(api(), { name: "Ada" }),
      registerUser(api(), { name: "Bob" }),
      registerUser(api(), { name: "Eve" }),
    ]);
    const conversationId = await live.openConversation(ada, bob);
    const first = await live.postDirect(ada, conversationId, "one");
    await live.postDirect(ada, conversationId, "two");
    const list = await api().get("/api/v1/direct-conversations", { token: bob.token });
    const row = (list.body.data as (Counts & { id: string; muted: boolean })[]).find(
      (item) => item.id === conversationId,
    )!;
    expect(row).toMatchObject({ last_read_message_id: null, unread_count: 2, mention_count: 2, muted: false });
    const summary = await api().get("/api/v1/unread", { token: bob.token });
    expect(summary.body.data).toMatchObject({
      total_mentions: 2,
      conversations: [{ conversation_id: conversationId, unread_count: 2, mention_count: 2, muted: false }],
    });

    const read = await api().post(
      `/api/v1/direct-conversations/${conversationId}/read`,
      { message_id: first.id },
      { token: bob.token },
    );
    expect(read.body).toEqual({ data: { last_read_message_id: first.id, unread_count: 1, mention_count: 1 } });
    const outsider = await api().post(
      `/api/v1/direct-conversations/${conversationId}/read`,
      { message_id: first.id },
      { token: eve.token },
    );
    expectStatus(outsider, 404, "outsider");
    expect(outsider.body).toEqual({ message: "Conversation not found." });

    const answer = await live.postDirect(bob, conversationId, "reply");
    await until(async () => {
      const again = await api().get("/api/v1/direct-conversations", { token: bob.token });
      const mine = (again.body.data as (Counts & { id: string })[]).find((item) => item.id === conversationId)!;
      return mine.last_read_message_id === answer.id ? mine : undefined;
    }, "bob's position to follow his post");
    const unread = await api().post(
      `/api/v1/direct-conversations/${conversationId}/unread`,
      { message_id: answer.id },
      { token: bob.token },
    );
    expect(unread.body.data).toMatchObject({ unread_count: 0, mention_count: 0 });
  });
});

describe("GET /api/v1/unread", () => {
  it("lists what is unread with sums per workspace and total_mentions, through REST and the typed client", async () => {
    const { owner, member, workspace, general } = await live.team();
    const other = await live.createChannel(owner, workspace.id, "public");
    await api().post(`/api/v1/workspaces/${workspace.id}/channels/${other.id}/join`, {}, { token: member.token });
    await post(owner, workspace.id, general.id, "one");
    await post(owner, workspace.id, general.id, `<@${member.id}> two`);
    await post(owner, workspace.id, other.id, "<!here> three");
    const conversationId = await live.openConversation(owner, member);
    await live.postDirect(owner, conversationId, "dm");

    const response = await api().get("/api/v1/unread", { token: member.token });
    expectStatus(response, 200, "unread");
    expect(response.body.data).toEqual({
      total_mentions: 3,
      workspaces: [{ workspace_id: workspace.id, unread_count: 3, mention_count: 2 }],
      channels: expect.arrayContaining([
        {
          workspace_id: workspace.id,
          channel_id: general.id,
          last_read_message_id: null,
          unread_count: 2,
          mention_count: 1,
          muted: false,
        },
        {
          workspace_id: workspace.id,
          channel_id: other.id,
          last_read_message_id: null,
          unread_count: 1,
          mention_count: 1,
          muted: false,
        },
      ]),
      conversations: [
        {
          conversation_id: conversationId,
          last_read_message_id: null,
          unread_count: 1,
          mention_count: 1,
          muted: false,
        },
      ],
    });
    const rpc = await live.chat(member.token).readState.summary.query();
    expect(rpc.data).toEqual(response.body.data);

    const newest = await api().get(`/api/v1/workspaces/${workspace.id}/channels/${other.id}/messages`, {
      token: member.token,
    });
    const rpcRead = await live.chat(member.token).readState.readChannel.mutate({
      workspace_id: workspace.id,
      id: other.id,
      message_id: newest.body.data[0].id,
    });
    expect(rpcRead.data).toMatchObject({ unread_count: 0, mention_count: 0 });
    const rejected = await rejectionOf(
      live
        .chat(member.token)
        .readState.readChannel.mutate({ workspace_id: workspace.id, id: other.id, message_id: "nope" }),
    );
    expect(rejected.data?.httpStatus).toBe(422);
  });
});

describe("read.updated", () => {
  it("reaches the reader's other devices live and on resume, and nobody else", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await live.attachedUserFeed(member);
    const ownerFeed = await live.attachedUserFeed(owner);
    // A second device of the member's, over server-sent events.
    const sse = collect((handlers) =>
      live.chat(member.token, { sse: true }).events.onUser.subscribe(undefined, handlers),
    );
    await attach(
      sse,
      () => api().patch("/api/v1/me", { name: `Mia ${Date.now()}` }, { token: member.token }),
      ({ event }) => event.type === "user.updated",
    );
    const message = await post(owner, workspace.id, general.id, `<@${member.id}> look`);
    const read = await markRead(member, workspace.id, general.id, message.id);
    expectStatus(read, 200, "read");
    const isRead = ({ event }: Received) => event.type === "read.updated";
    const seen = await until(() => feed.received.find(isRead), "read.updated live");
    expect(seen.event).toMatchObject({
      type: "read.updated",
      workspace_id: workspace.id,
      channel_id: general.id,
      data: { last_read_message_id: message.id, unread_count: 0, mention_count: 0 },
    });
    const overSse = await until(() => sse.received.find(isRead), "read.updated over SSE");
    expect(overSse.id).toBe(seen.id);
    // A no-op read sends nothing.
    await markRead(member, workspace.id, general.id, message.id);
    const before = feed.received.findIndex(isRead);

    // Resume from before the read: it is replayed.
    const lastBefore = feed.received[before - 1]!.id;
    const resumed = collect((handlers) =>
      live.chat(member.token).events.onUser.subscribe({ lastEventId: lastBefore }, handlers),
    );
    const replayed = await until(() => resumed.received.find(isRead), "read.updated on resume");
    expect(replayed.id).toBe(seen.id);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(feed.received.filter(isRead)).toHaveLength(1);
    expect(ownerFeed.received.filter(isRead)).toHaveLength(0);
  });
});

describe("the 1,000 cap", () => {
  /**
   * Messages written straight into the messages table, a millisecond apart and oldest first, with
   * the columns a top-level post writes (server/services/messaging/post-message.ts): place,
   * author, content, language, mentioned_user_ids, mentions_channel, times; in a conversation also
   * its last_message_id. No events: counts are read from the messages themselves. Answers their
   * ids in order.
   */
  async function insertMessages(
    place: { workspaceId: string; channelId: string } | { conversationId: string },
    authorId: number,
    count: number,
    shape: (index: number) => { content: string; mentionedUserIds?: number[]; mentionsChannel?: boolean },
  ): Promise<string[]> {
    // In the past (a second or two ago), so that anything posted after through the API sorts later.
    const start = Date.now() - 2 * count - 1_000;
    const rows = Array.from({ length: count }, (_, index) => {
      const at = new Date(start + index);
      const { content, mentionedUserIds = [], mentionsChannel = false } = shape(index);
      return {
        id: newId("message", at.getTime()),
        workspaceId: "workspaceId" in place ? place.workspaceId : null,
        channelId: "channelId" in place ? place.channelId : null,
        conversationId: "conversationId" in place ? place.conversationId : null,
        authorUserId: authorId,
        content,
        language: "en" as const,
        mentionedUserIds,
        mentionsChannel,
        createdAt: at,
        updatedAt: at,
      };
    });
    const db = ctx.server.app.deps.db;
    for (let offset = 0; offset < rows.length; offset += 500) {
      await db.insert(messages).values(rows.slice(offset, offset + 500));
    }
    if ("conversationId" in place) {
      await db
        .update(conversations)
        .set({ lastMessageId: rows.at(-1)!.id, updatedAt: rows.at(-1)!.createdAt })
        .where(eq(conversations.id, place.conversationId));
    }
    return rows.map((row) => row.id);
  }

  it("unread_count and mention_count stop at 1,000 on the lists and in GET /api/v1/unread, whose sums and badge add the capped counts", async () => {
    const { owner, member, workspace, general } = await live.team();
    const busy = await live.createChannel(owner, workspace.id, "public");
    expectStatus(
      await api().post(`/api/v1/workspaces/${workspace.id}/channels/${busy.id}/join`, {}, { token: member.token }),
      200,
      "join",
    );
    const conversationId = await live.openConversation(owner, member);
    // Nothing yet: the member's positions are null, so every message below is after them.
    expect(counts(await channelRow(member, workspace.id, busy.id))).toEqual({
      last_read_message_id: null,
      unread_count: 0,
      mention_count: 0,
    });

    // #busy: 1,005 top-level messages by the owner; all but the first 3 mention the member (1,002 mentions).
    const busyIds = await insertMessages({ workspaceId: workspace.id, channelId: busy.id }, owner.id, 1_005, (index) =>
      index < 3
        ? { content: `plain ${index}` }
        : { content: `<@${member.id}> ${index}`, mentionedUserIds: [member.id] },
    );
    // #general: 1,005 top-level messages, 12 of them mentions (10 of the member, 2 `<!channel>`), and
    // 3 messages of the member's own: over the cap unread, exact in mentions.
    await insertMessages({ workspaceId: workspace.id, channelId: general.id }, owner.id, 1_005, (index) =>
      index % 100 === 7
        ? { content: `<@${member.id}> ${index}`, mentionedUserIds: [member.id] }
        : index === 500 || index === 900
          ? { content: `<!channel> ${index}`, mentionsChannel: true }
          : { content: `general ${index}` },
    );
    await insertMessages({ workspaceId: workspace.id, channelId: general.id }, member.id, 3, (index) => ({
      content: `mine ${index}`,
    }));
    // The conversation: 1,003 direct messages by the owner (each one a mention of the member).
    await insertMessages({ conversationId }, owner.id, 1_003, (index) => ({ content: `dm ${index}` }));

    const busyRow = await channelRow(member, workspace.id, busy.id);
    expect(counts(busyRow)).toEqual({ last_read_message_id: null, unread_count: 1000, mention_count: 1000 });
    const generalRow = await channelRow(member, workspace.id, general.id);
    expect(counts(generalRow)).toEqual({ last_read_message_id: null, unread_count: 1000, mention_count: 12 });
    // The author's own messages are never unread for them, however many.
    expect(await channelRow(owner, workspace.id, busy.id)).toMatchObject({ unread_count: 0, mention_count: 0 });

    const list = await api().get("/api/v1/direct-conversations", { token: member.token });
    expectStatus(list, 200, "conversations");
    expect((list.body.data as (Counts & { id: string })[]).find((row) => row.id === conversationId)).toMatchObject({
      last_read_message_id: null,
      unread_count: 1000,
      mention_count: 1000,
    });

    // The summary: each place capped, the workspace the sum of its channels' capped counts, and
    // the badge the sum of the capped mention counts (1,000 + 12 + 1,000).
    const summary = await api().get("/api/v1/unread", { token: member.token });
    expectStatus(summary, 200, "unread");
    expect(summary.body.data).toEqual({
      total_mentions: 2012,
      workspaces: [{ workspace_id: workspace.id, unread_count: 2000, mention_count: 1012 }],
      channels: expect.arrayContaining([
        {
          workspace_id: workspace.id,
          channel_id: busy.id,
          last_read_message_id: null,
          unread_count: 1000,
          mention_count: 1000,
          muted: false,
        },
        {
          workspace_id: workspace.id,
          channel_id: general.id,
          last_read_message_id: null,
          unread_count: 1000,
          mention_count: 12,
          muted: false,
        },
      ]),
      conversations: [
        {
          conversation_id: conversationId,
          last_read_message_id: null,
          unread_count: 1000,
          mention_count: 1000,
          muted: false,
        },
      ],
    });
    expect(summary.body.data.channels).toHaveLength(2);
    expect((await live.chat(member.token).readState.summary.query()).data).toEqual(summary.body.data);

    // At the edge: with exactly 1,000 messages after the position the count is 1,000, with 999 it is 999.
    const atCap = await markRead(member, workspace.id, busy.id, busyIds[4]!);
    expectStatus(atCap, 200, "read to the 5th");
    expect(atCap.body.data).toEqual({ last_read_message_id: busyIds[4], unread_count: 1000, mention_count: 1000 });
    const underCap = await markRead(member, workspace.id, busy.id, busyIds[5]!);
    expect(underCap.body.data).toEqual({ last_read_message_id: busyIds[5], unread_count: 999, mention_count: 999 });
    expect(counts(await channelRow(member, workspace.id, busy.id))).toEqual({
      last_read_message_id: busyIds[5],
      unread_count: 999,
      mention_count: 999,
    });
    const after = await api().get("/api/v1/unread", { token: member.token });
    expect(after.body.data).toMatchObject({
      total_mentions: 999 + 12 + 1000,
      workspaces: [{ workspace_id: workspace.id, unread_count: 1999, mention_count: 1011 }],
    });
  });
});

describe("read.updated on a second device of the reader", () => {
  /** Another sign-in of the same user: a device of its own, with its own token. */
  async function device(user: RegisteredUser, name: string): Promise<RegisteredUser> {
    const response = await api().post("/api/v1/auth/app/login", {
      email: user.email,
      password: user.password,
      device_name: name,
    });
    expectStatus(response, 200, `sign in on ${name}`);
    return { ...user, token: response.body.access_token };
  }

  /** events.onUser on `client`, with the moment (performance.now()) each event arrived. */
  function timedUserFeed(client: ReturnType<typeof live.chat>, input?: { lastEventId: string }) {
    const arrivals: number[] = [];
    const feed = collect((handlers) =>
      client.events.onUser.subscribe(input, {
        ...handlers,
        onData: (value) => {
          arrivals.push(performance.now());
          handlers.onData(value);
        },
      }),
    );
    return { feed, arrivals };
  }

  const isRead = ({ event }: Received) => event.type === "read.updated";

  it("sees its badge fall within a second of the read's answer on the other device, live", async () => {
    const { owner, member, workspace, general } = await live.team();
    const phone = await device(member, "phone");
    const laptop = await device(member, "laptop");
    const { feed, arrivals } = timedUserFeed(live.chat(phone.token));
    let rename = 0;
    await attach(
      feed,
      () => api().patch("/api/v1/me", { name: `Mia ${++rename}` }, { token: phone.token }),
      ({ event }) => event.type === "user.updated",
    );
    const message = await post(owner, workspace.id, general.id, `<@${member.id}> look`);
    const badge = await api().get("/api/v1/unread", { token: phone.token });
    expect(badge.body.data.total_mentions).toBe(1);

    const read = await markRead(laptop, workspace.id, general.id, message.id);
    const answeredAt = performance.now();
    expectStatus(read, 200, "read on the laptop");
    const seen = await until(() => feed.received.find(isRead), "read.updated on the phone", 5_000);
    const latency = arrivals[feed.received.indexOf(seen)]! - answeredAt;
    expect(latency, `read.updated reached the phone ${Math.round(latency)} ms after the answer`).toBeLessThanOrEqual(
      1000,
    );
    expect(seen.event).toMatchObject({
      type: "read.updated",
      workspace_id: workspace.id,
      channel_id: general.id,
      data: { last_read_message_id: message.id, unread_count: 0, mention_count: 0 },
    });
    expect((await api().get("/api/v1/unread", { token: phone.token })).body.data.total_mentions).toBe(0);
  });

  it("sees its badge fall within a second of subscribing again with lastEventId, after a read made while it was away", async () => {
    const { owner, member, workspace, general } = await live.team();
    const phone = await device(member, "phone");
    const laptop = await device(member, "laptop");
    const phoneClient = live.chat(phone.token);
    const first = timedUserFeed(phoneClient);
    let rename = 0;
    await attach(
      first.feed,
      () => api().patch("/api/v1/me", { name: `Mia ${++rename}` }, { token: phone.token }),
      ({ event }) => event.type === "user.updated",
    );
    const lastEventId = first.feed.received.at(-1)!.id;
    // The phone goes away (the app in the background); meanwhile a mention arrives and is read on the laptop.
    first.feed.unsubscribe();
    const message = await post(owner, workspace.id, general.id, `<@${member.id}> while you were away`);
    const read = await markRead(laptop, workspace.id, general.id, message.id);
    expectStatus(read, 200, "read on the laptop");
    expect(read.body.data).toEqual({ last_read_message_id: message.id, unread_count: 0, mention_count: 0 });

    const subscribedAt = performance.now();
    const resumed = timedUserFeed(phoneClient, { lastEventId });
    const seen = await until(() => resumed.feed.received.find(isRead), "read.updated on resume", 5_000);
    const latency = resumed.arrivals[resumed.feed.received.indexOf(seen)]! - subscribedAt;
    expect(latency, `read.updated reached the phone ${Math.round(latency)} ms after it subscribed`).toBeLessThanOrEqual(
      1000,
    );
    expect(seen.event).toMatchObject({
      type: "read.updated",
      workspace_id: workspace.id,
      channel_id: general.id,
      data: { last_read_message_id: message.id, unread_count: 0, mention_count: 0 },
    });
    // Exactly once, and not on the subscription it had left.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(resumed.feed.received.filter(isRead)).toHaveLength(1);
    expect(first.feed.received.filter(isRead)).toHaveLength(0);
  });
});
