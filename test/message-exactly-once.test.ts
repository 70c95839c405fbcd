// Posting exactly once and changing a message under contention (contract: "Posting exactly
// once", and the counting rules of "Messages after they are posted"): a `client_message_id`
// repeated by its author in the same place posts nothing and answers 200 with the first
// message, over REST and typed RPC, for every kind of message, also when the repeats race;
// and reactions and deletes that race each other keep their counts and limits.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { ApiResponse } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { arrived, world, type Feed } from "./helpers/live.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

type Message = { id: string; content: string; client_message_id: string | null; [key: string]: unknown };

const unique = (label: string) => `${label} ${randomBytes(4).toString("hex")}`;
const clientId = () => `cmid-${randomBytes(8).toString("hex")}`;

function expectStatus(response: ApiResponse, status: number, what = ""): void {
  expect(response.status, `${what} ${JSON.stringify(response.body)}`).toBe(status);
}

function expectFieldError(response: ApiResponse, field: string, what = ""): void {
  expectStatus(response, 422, what);
  expect(response.body).toEqual({ message: "The given data was invalid.", errors: { [field]: [expect.any(String)] } });
}

const channelMessages = (workspaceId: string, channelId: string) =>
  `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`;

async function history(path: string, user: RegisteredUser): Promise<Message[]> {
  const response = await ctx.api.get(`${path}${path.includes("?") ? "&" : "?"}limit=100`, { token: user.token });
  expectStatus(response, 200, `history ${path}`);
  return response.body.data as Message[];
}

type Place = {
  kind: string;
  author: RegisteredUser;
  /** Where the message is posted. */
  base: string;
  /** Extra fields of every post (a thread reply's parent). */
  extra: Record<string, unknown>;
  /** Where it is listed. */
  listed: string;
};

async function places(): Promise<{ team: Awaited<ReturnType<typeof live.team>>; all: Place[] }> {
  const team = await live.team();
  const base = channelMessages(team.workspace.id, team.general.id);
  const parent = await ctx.api.post(base, { content: "a parent" }, { token: team.owner.token });
  expectStatus(parent, 201);
  const conversationId = await live.openConversation(team.member, team.owner);
  const room = await ctx.api.post("/api/v1/external/rooms", { name: "Room" }, { token: team.member.token });
  expectStatus(room, 201);
  const direct = `/api/v1/direct-conversations/${conversationId}/messages`;
  const roomBase = `/api/v1/external/rooms/${room.body.data.room_id}/messages`;
  return {
    team,
    all: [
      { kind: "channel", author: team.member, base, extra: {}, listed: base },
      {
        kind: "thread reply",
        author: team.member,
        base,
        extra: { parent_message_id: parent.body.data.id },
        listed: `${base}?parent_message_id=${parent.body.data.id}`,
      },
      { kind: "direct", author: team.member, base: direct, extra: {}, listed: direct },
      { kind: "room", author: team.member, base: roomBase, extra: {}, listed: roomBase },
    ],
  };
}

const post = (place: Place, body: Record<string, unknown>, user = place.author) =>
  ctx.api.post(place.base, { ...place.extra, ...body }, { token: user.token });

describe("client_message_id", () => {
  it("posts once per author and place: 201 first, then 200 with the first message, even with other content", async () => {
    const { all } = await places();
    for (const place of all) {
      const id = clientId();
      const first = await post(place, { content: "first", client_message_id: id });
      expectStatus(first, 201, `${place.kind} first`);
      expect(first.body.data).toMatchObject({ content: "first", client_message_id: id });
      const repeat = await post(place, { content: "first", client_message_id: id });
      expectStatus(repeat, 200, `${place.kind} repeat`);
      expect(repeat.body).toEqual({ data: first.body.data });
      const different = await post(place, { content: "something else", client_message_id: id });
      expectStatus(different, 200, `${place.kind} repeat with other content`);
      expect(different.body.data).toMatchObject({ id: first.body.data.id, content: "first", client_message_id: id });
      const listed = (await history(place.listed, place.author)).filter((m) => m.client_message_id === id);
      expect(
        listed.map((m) => m.id),
        place.kind,
      ).toEqual([first.body.data.id]);
      expect((await history(place.listed, place.author)).map((m) => m.content)).not.toContain("something else");
      // Without one, every post is new, and the record says null.
      const plain = await post(place, { content: "no id" });
      expectStatus(plain, 201);
      expect(plain.body.data.client_message_id).toBeNull();
      expectStatus(await post(place, { content: "no id" }), 201, `${place.kind} without an id, again`);
    }
  });

  it("is per author and per place: the same id elsewhere or by someone else is a new message", async () => {
    const { team } = await places();
    const { owner, member, workspace, general } = team;
    const base = channelMessages(workspace.id, general.id);
    const other = await live.createChannel(owner, workspace.id, "public");
    const otherBase = channelMessages(workspace.id, other.id);
    const id = clientId();
    const mine = await ctx.api.post(base, { content: "member's", client_message_id: id }, { token: member.token });
    const theirs = await ctx.api.post(base, { content: "owner's", client_message_id: id }, { token: owner.token });
    const elsewhere = await ctx.api.post(
      otherBase,
      { content: "elsewhere", client_message_id: id },
      { token: owner.token },
    );
    for (const response of [mine, theirs, elsewhere]) expectStatus(response, 201);
    expect(new Set([mine, theirs, elsewhere].map((r) => r.body.data.id)).size).toBe(3);
  });

  it("refuses an id that is not 1 to 64 of [A-Za-z0-9_-] with 422 client_message_id", async () => {
    const { all } = await places();
    for (const [index, place] of all.entries()) {
      for (const bad of ["a".repeat(65), "has space", "", "é", "a/b", "a.b"])
        expectFieldError(
          await post(place, { content: "x", client_message_id: bad }),
          "client_message_id",
          `${place.kind} ${bad}`,
        );
      expectFieldError(await post(place, { content: "x", client_message_id: 42 }), "client_message_id", "a number");
      // A thread reply shares its channel with top-level messages: every id here is new.
      const tag = randomBytes(4).toString("hex");
      for (const good of [`${tag}${"a".repeat(56)}`, `A-z_0-9-${tag}`, "wxyz"[index]!])
        expectStatus(await post(place, { content: "x", client_message_id: good }), 201, `${place.kind} ${good}`);
    }
  });

  it("keeps one message when 8 repeats race: one 201 and seven 200, all naming it", async () => {
    const { all } = await places();
    for (const place of [all[0]!, all[2]!, all[3]!]) {
      const id = clientId();
      const responses = await Promise.all(
        Array.from({ length: 8 }, (_, index) => post(place, { content: `racer ${index}`, client_message_id: id })),
      );
      const statuses = responses.map((response) => response.status).sort();
      expect(statuses, place.kind).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
      const ids = new Set(responses.map((response) => response.body.data.id));
      expect(ids.size, place.kind).toBe(1);
      const winner = responses.find((response) => response.status === 201)!.body.data;
      for (const response of responses)
        expect(response.body.data).toMatchObject({ id: winner.id, content: winner.content });
      expect((await history(place.listed, place.author)).filter((m) => m.client_message_id === id)).toHaveLength(1);
    }
  });

  it("frees the id once the message is deleted: the next post is 201 with a new message", async () => {
    const { all } = await places();
    for (const place of all) {
      const id = clientId();
      const first = await post(place, { content: "first", client_message_id: id });
      expectStatus(first, 201);
      expectStatus(
        await ctx.api.delete(`${place.base}/${first.body.data.id}`, { token: place.author.token }),
        204,
        `${place.kind} delete`,
      );
      const again = await post(place, { content: "again", client_message_id: id });
      expectStatus(again, 201, `${place.kind} after the delete`);
      expect(again.body.data.id).not.toBe(first.body.data.id);
      expectStatus(await post(place, { content: "and again", client_message_id: id }), 200, `${place.kind} repeat`);
    }
  });

  it("frees the id of a thread parent that stays as a tombstone", async () => {
    const { team } = await places();
    const base = channelMessages(team.workspace.id, team.general.id);
    const id = clientId();
    const parent = await ctx.api.post(base, { content: "parent", client_message_id: id }, { token: team.owner.token });
    expectStatus(parent, 201);
    const reply = await ctx.api.post(
      base,
      { content: "reply", parent_message_id: parent.body.data.id },
      { token: team.member.token },
    );
    expectStatus(reply, 201);
    expectStatus(await ctx.api.delete(`${base}/${parent.body.data.id}`, { token: team.owner.token }), 204);
    const again = await ctx.api.post(
      base,
      { content: "parent again", client_message_id: id },
      { token: team.owner.token },
    );
    expectStatus(again, 201);
    expect(again.body.data.id).not.toBe(parent.body.data.id);
  });

  it("works the same over typed RPC, and answers a REST repeat of an RPC post with 200", async () => {
    const { team, all } = await places();
    const client = live.chat(team.member.token);
    const id = clientId();
    const ids = { workspace_id: team.workspace.id, channel_id: team.general.id };
    const first = await client.messages.post.mutate({ ...ids, content: "over rpc", client_message_id: id });
    expect(first.data).toMatchObject({ content: "over rpc", client_message_id: id });
    const repeat = await client.messages.post.mutate({ ...ids, content: "over rpc, again", client_message_id: id });
    expect(repeat.data).toEqual(first.data);
    const rest = await post(all[0]!, { content: "over rest", client_message_id: id });
    expectStatus(rest, 200);
    expect(rest.body.data.id).toBe(first.data.id);

    const conversationId = all[2]!.base.split("/")[4]!;
    const dmId = clientId();
    const dm = await client.direct.post.mutate({
      conversation_id: conversationId,
      content: "dm",
      client_message_id: dmId,
    });
    expect(
      (await client.direct.post.mutate({ conversation_id: conversationId, content: "dm 2", client_message_id: dmId }))
        .data.id,
    ).toBe(dm.data.id);
    const roomId = all[3]!.base.split("/")[5]!;
    const roomMessage = await client.rooms.post.mutate({ room_id: roomId, content: "room", client_message_id: dmId });
    expect(roomMessage.data.id).not.toBe(dm.data.id);
    expect(
      (await client.rooms.post.mutate({ room_id: roomId, content: "room 2", client_message_id: dmId })).data.id,
    ).toBe(roomMessage.data.id);
  });

  it("carries the id in message.created, and a repeat sends no event", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await live.attachedChannelFeed(owner, member, workspace.id, general.id);
    const base = channelMessages(workspace.id, general.id);
    const id = clientId();
    const content = unique("pending bubble");
    const first = await ctx.api.post(base, { content, client_message_id: id }, { token: member.token });
    expectStatus(first, 201);
    const created = await arrived(feed, content);
    expect(created.event.data.message).toMatchObject({ id: first.body.data.id, client_message_id: id });
    expectStatus(await ctx.api.post(base, { content, client_message_id: id }, { token: member.token }), 200);
    const plain = unique("no id");
    await ctx.api.post(base, { content: plain }, { token: member.token });
    expect((await arrived(feed, plain)).event.data.message.client_message_id).toBeNull();
    expect(feed.messages().filter((message) => message.messageId === first.body.data.id)).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------

const reactionAt = (base: string, id: string, emoji: string) => `${base}/${id}/reactions/${encodeURIComponent(emoji)}`;

const reactionEvents = (feed: Feed, messageId: string, type: "reaction.added" | "reaction.removed") =>
  feed.received.flatMap(({ event }) =>
    event.type === type && event.data.message_id === messageId ? [event.data] : [],
  );

/** Waits until a post by `poker` arrives on the feed: everything before it was delivered. */
async function barrier(feed: Feed, poker: RegisteredUser, workspaceId: string, channelId: string) {
  const content = unique("barrier");
  await live.post(poker, workspaceId, channelId, content);
  await arrived(feed, content);
}

describe("racing changes", () => {
  it("counts 10 users reacting with one emoji at once as 10", async () => {
    const { owner, workspace, general } = await live.team();
    const base = channelMessages(workspace.id, general.id);
    const users = await Promise.all(
      Array.from({ length: 10 }, (_, index) => registerUser(ctx.api, { name: `Racer ${index}` })),
    );
    await Promise.all(
      users.map(async (user) =>
        expectStatus(await ctx.api.post(`/api/v1/workspaces/${workspace.id}/join`, {}, { token: user.token }), 200),
      ),
    );
    const feed = await live.attachedChannelFeed(owner, users[0]!, workspace.id, general.id);
    const message = await live.post(owner, workspace.id, general.id, "race me");
    const responses = await Promise.all(
      users.map((user) => ctx.api.put(reactionAt(base, message.id, "🔥"), undefined, { token: user.token })),
    );
    for (const response of responses) expectStatus(response, 200);
    const who = await ctx.api.get(`${base}/${message.id}/reactions`, { token: owner.token });
    expect(who.body.data).toHaveLength(1);
    expect(who.body.data[0]).toMatchObject({ emoji: "🔥", count: 10 });
    expect([...who.body.data[0].user_ids].sort()).toEqual(users.map((user) => user.id).sort());
    const read = await ctx.api.get(base, { token: owner.token });
    expect(
      (read.body.data as { id: string; reactions: unknown }[]).find((m) => m.id === message.id)!.reactions,
    ).toEqual([{ emoji: "🔥", count: 10, me: false }]);
    // Each reaction.added says the count after it: 1 to 10, once each.
    await barrier(feed, owner, workspace.id, general.id);
    const counts = reactionEvents(feed, message.id, "reaction.added").map((data) => data.count);
    expect([...counts].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("counts one user reacting 5 times at once as 1, with one reaction.added", async () => {
    const { owner, member, workspace, general } = await live.team();
    const base = channelMessages(workspace.id, general.id);
    const feed = await live.attachedChannelFeed(owner, member, workspace.id, general.id);
    const message = await live.post(owner, workspace.id, general.id, "once only");
    const responses = await Promise.all(
      Array.from({ length: 5 }, () =>
        ctx.api.put(reactionAt(base, message.id, "👍"), undefined, { token: member.token }),
      ),
    );
    for (const response of responses) {
      expectStatus(response, 200);
      expect(response.body.data.reactions).toEqual([{ emoji: "👍", count: 1, me: true }]);
    }
    const who = await ctx.api.get(`${base}/${message.id}/reactions`, { token: owner.token });
    expect(who.body.data).toEqual([{ emoji: "👍", count: 1, user_ids: [member.id] }]);
    await barrier(feed, owner, workspace.id, general.id);
    expect(reactionEvents(feed, message.id, "reaction.added")).toEqual([
      { message_id: message.id, emoji: "👍", user_id: member.id, count: 1 },
    ]);
  });

  it("lets exactly 50 of 60 racing distinct emoji in; the other 10 are 422 emoji", async () => {
    const { owner, workspace, general } = await live.team();
    const base = channelMessages(workspace.id, general.id);
    const message = await live.post(owner, workspace.id, general.id, "sixty");
    const responses = await Promise.all(
      Array.from({ length: 60 }, (_, index) =>
        ctx.api.put(reactionAt(base, message.id, `e${index + 1}`), undefined, { token: owner.token }),
      ),
    );
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(50);
    expect(statuses.filter((status) => status === 422)).toHaveLength(10);
    for (const response of responses.filter((r) => r.status === 422))
      expect(Object.keys(response.body.errors)).toEqual(["emoji"]);
    const who = await ctx.api.get(`${base}/${message.id}/reactions`, { token: owner.token });
    expect(who.body.data).toHaveLength(50);
    const accepted = responses.flatMap((response, index) => (response.status === 200 ? [`e${index + 1}`] : []));
    expect(who.body.data.map((r: { emoji: string }) => r.emoji).sort()).toEqual(accepted.sort());
    for (const entry of who.body.data) expect(entry).toMatchObject({ count: 1, user_ids: [owner.id] });
  });

  it("deletes a message once when 5 deletes race: one 204, the rest 404, one message.deleted", async () => {
    const { owner, member, workspace, general } = await live.team();
    const base = channelMessages(workspace.id, general.id);
    const feed = await live.attachedChannelFeed(owner, member, workspace.id, general.id);
    const message = await live.post(member, workspace.id, general.id, "delete me");
    const responses = await Promise.all([
      ...Array.from({ length: 3 }, () => ctx.api.delete(`${base}/${message.id}`, { token: member.token })),
      ...Array.from({ length: 2 }, () => ctx.api.delete(`${base}/${message.id}`, { token: owner.token })),
    ]);
    expect(responses.map((response) => response.status).sort()).toEqual([204, 404, 404, 404, 404]);
    await barrier(feed, owner, workspace.id, general.id);
    expect(
      feed.received.filter(({ event }) => event.type === "message.deleted" && event.data.id === message.id),
    ).toHaveLength(1);
  });

  it("keeps a reply's parent count right when replies and their deletes race", async () => {
    const { owner, member, workspace, general } = await live.team();
    const base = channelMessages(workspace.id, general.id);
    const parent = await live.post(owner, workspace.id, general.id, "parent");
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, index) =>
        ctx.api.post(base, { content: `reply ${index}`, parent_message_id: parent.id }, { token: member.token }),
      ),
    );
    for (const reply of replies) expectStatus(reply, 201);
    const results = await Promise.all([
      ...replies.slice(0, 3).map((reply) => ctx.api.delete(`${base}/${reply.body.data.id}`, { token: member.token })),
      ...Array.from({ length: 2 }, (_, index) =>
        ctx.api.post(base, { content: `late ${index}`, parent_message_id: parent.id }, { token: member.token }),
      ),
    ]);
    expect(results.map((result) => result.status)).toEqual([204, 204, 204, 201, 201]);
    const read = await history(base, owner);
    expect(read.find((m) => m.id === parent.id)!.reply_count).toBe(5);
    expect(await history(`${base}?parent_message_id=${parent.id}`, owner)).toHaveLength(5);
  });
});
