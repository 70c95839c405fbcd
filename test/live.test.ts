// Live delivery of messages through the typed client (@chat-service/client) against the real server:
// channel and conversation subscriptions over WebSocket, the user's stream following them into
// new channels and conversations, resuming with lastEventId, the end of a subscription on
// removal, typing, the SSE transport, and (with Redis) delivery across two server processes.
//
// Over SSE a subscription is attached to the event bus a moment after onStarted (tRPC's HTTP
// adapter starts iterating after answering), so each test first "pokes" (an ephemeral typing
// event, or a profile update on the user's own stream) until the first one comes through;
// from then on every event must arrive.
import { describe, expect, it } from "vitest";
import { TRPCClientError } from "@chat-service/client";
import { registerUser } from "./helpers/factories.ts";
import { arrived, attach, collect, ISO_WITH_OFFSET, world } from "./helpers/live.ts";
import { useTestServer, useTwoServers } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

describe("messages.onChannel over WebSocket", () => {
  it("delivers a REST post as a message.created event with its id, scope and record", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id);

    const posted = await live.post(owner, workspace.id, general.id, "Hello, live world");
    const received = await arrived(feed, "Hello, live world");
    expect(received.event).toEqual({
      id: expect.stringMatching(/^\d+$/),
      type: "message.created",
      workspace_id: workspace.id,
      channel_id: general.id,
      created_at: expect.stringMatching(ISO_WITH_OFFSET),
      data: { message: posted },
    });
    // The tracked id is the event's id.
    expect(received.id).toBe(received.event.id);

    // Later events have increasing ids.
    await live.post(member, workspace.id, general.id, "second");
    await live.post(owner, workspace.id, general.id, "third");
    await arrived(feed, "third");
    const ids = feed.messages().map(({ id }) => Number(id));
    expect(feed.messages().map(({ content }) => content)).toEqual(["Hello, live world", "second", "third"]);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    expect(feed.errors).toEqual([]);
  });

  it("delivers thread replies on the channel's stream too", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id);
    const parent = await live.post(owner, workspace.id, general.id, "parent");
    const reply = await ctx.api.post(
      `/api/v1/workspaces/${workspace.id}/channels/${general.id}/messages`,
      { content: "reply", parent_message_id: parent.id },
      { token: owner.token },
    );
    expect(reply.status).toBe(201);
    const received = await arrived(feed, "reply");
    expect(received.event.data.message).toEqual(reply.body.data);
  });

  it("refuses a subscription to a channel the caller cannot see (NOT_FOUND)", async () => {
    const { owner, workspace } = await live.team();
    const secret = await live.createChannel(owner, workspace.id, "private");
    const stranger = await registerUser(ctx.api);
    const feed = live.onChannel(live.chat(stranger.token), { workspace_id: workspace.id, channel_id: secret.id });
    const error = await until(() => feed.errors[0], "the subscription error");
    expect(error).toBeInstanceOf(TRPCClientError);
    expect((error as TRPCClientError<any>).data?.code).toBe("NOT_FOUND");
    expect(feed.received).toEqual([]);
  });

  it("resumes after unsubscribing: lastEventId gives exactly the missed events, then live ones", async () => {
    const { owner, member, workspace, general } = await live.team();
    const first = await live.attachedChannelFeed(member, owner, workspace.id, general.id);
    await live.post(owner, workspace.id, general.id, "seen 1");
    await live.post(owner, workspace.id, general.id, "seen 2");
    const lastSeen = await arrived(first, "seen 2");
    first.unsubscribe();

    // While away: three messages, and workspace changes that are not this channel's messages.
    const newcomer = await registerUser(ctx.api, { name: "Newcomer" });
    await ctx.api.post(`/api/v1/workspaces/${workspace.id}/join`, {}, { token: newcomer.token });
    const missed = [];
    for (const content of ["missed 1", "missed 2", "missed 3"]) {
      missed.push(await live.post(content === "missed 2" ? newcomer : owner, workspace.id, general.id, content));
    }

    const resumed = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: lastSeen.id,
    });
    await arrived(resumed, "missed 3");
    // Replayed events are the whole stream after the last one seen: only these three.
    expect(resumed.received.map(({ event }) => event.type)).toEqual([
      "message.created",
      "message.created",
      "message.created",
    ]);
    expect(resumed.messages().map(({ event }) => event.data.message)).toEqual(missed);

    // Then live ones, on the same subscription.
    await live.post(member, workspace.id, general.id, "live again");
    await arrived(resumed, "live again");
    expect(resumed.messages().map(({ content }) => content)).toEqual([
      "missed 1",
      "missed 2",
      "missed 3",
      "live again",
    ]);
    const ids = resumed.messages().map(({ id }) => Number(id));
    expect(ids[0]).toBeGreaterThan(Number(lastSeen.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(4);
    expect(resumed.errors).toEqual([]);
  });

  it("resumes after the client was closed, on a new client", async () => {
    const { owner, member, workspace, general } = await live.team();
    const client = live.chat(member.token);
    const first = live.onChannel(client, { workspace_id: workspace.id, channel_id: general.id });
    const poker = live.chat(owner.token);
    await attach(
      first,
      () => poker.messages.typing.mutate({ workspace_id: workspace.id, channel_id: general.id }),
      ({ event }) => event.type === "typing",
    );
    await live.post(owner, workspace.id, general.id, "before close");
    const lastSeen = await arrived(first, "before close");
    first.unsubscribe();
    client.close();

    await live.post(owner, workspace.id, general.id, "while closed 1");
    await live.post(owner, workspace.id, general.id, "while closed 2");
    await live.post(owner, workspace.id, general.id, "while closed 3");

    const again = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: lastSeen.id,
    });
    await arrived(again, "while closed 3");
    await live.post(owner, workspace.id, general.id, "after reopen");
    await arrived(again, "after reopen");
    expect(again.messages().map(({ content }) => content)).toEqual([
      "while closed 1",
      "while closed 2",
      "while closed 3",
      "after reopen",
    ]);
  });

  it("ends the subscription of a member removed from a private channel, after the removal event", async () => {
    const { owner, member, workspace } = await live.team();
    const secret = await live.createChannel(owner, workspace.id, "private");
    const added = await ctx.api.post(
      `/api/v1/workspaces/${workspace.id}/channels/${secret.id}/members`,
      { user_id: member.id },
      { token: owner.token },
    );
    expect([200, 201]).toContain(added.status);

    const memberFeed = await live.attachedChannelFeed(member, owner, workspace.id, secret.id);
    const ownerFeed = await live.attachedChannelFeed(owner, member, workspace.id, secret.id);
    await live.post(owner, workspace.id, secret.id, "before removal");
    await arrived(memberFeed, "before removal");

    const removed = await ctx.api.delete(
      `/api/v1/workspaces/${workspace.id}/channels/${secret.id}/members/${member.id}`,
      {
        token: owner.token,
      },
    );
    expect(removed.status).toBe(204);
    // The removal event is the last one delivered, then the subscription ends.
    const removal = await until(
      () => memberFeed.received.find(({ event }) => event.type === "channel.member_left"),
      "the removal event",
    );
    expect(removal.event).toMatchObject({
      type: "channel.member_left",
      workspace_id: workspace.id,
      data: { channel_id: secret.id, user_id: member.id },
    });
    await until(() => (memberFeed.isCompleted() ? true : undefined), "the subscription to end");
    expect(memberFeed.received.at(-1)).toBe(removal);

    // A later post reaches the owner's subscription, not the removed member's.
    await live.post(owner, workspace.id, secret.id, "after removal");
    await arrived(ownerFeed, "after removal");
    expect(memberFeed.messages().map(({ content }) => content)).toEqual(["before removal"]);
    expect(memberFeed.received.at(-1)).toBe(removal);
    expect(memberFeed.errors).toEqual([]);

    // Subscribing again is refused: the channel is private and no longer theirs.
    const again = live.onChannel(live.chat(member.token), { workspace_id: workspace.id, channel_id: secret.id });
    const error = await until(() => again.errors[0], "the refusal");
    expect((error as TRPCClientError<any>).data?.code).toBe("NOT_FOUND");
  });
});

describe("typing", () => {
  it("reaches the channel's subscribers as a typing event naming the user", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id);
    const typing = feed.received.find(({ event }) => event.type === "typing")!;
    expect(typing.event).toMatchObject({
      type: "typing",
      workspace_id: workspace.id,
      channel_id: general.id,
      created_at: expect.stringMatching(ISO_WITH_OFFSET),
      data: { user: { id: owner.id, name: owner.name } },
    });
    // Typing is not stored: it is not a message and history is unchanged.
    const history = await ctx.api.get(`/api/v1/workspaces/${workspace.id}/channels/${general.id}/messages`, {
      token: member.token,
    });
    expect(history.body.data).toEqual([]);
    expect(feed.messages()).toEqual([]);
  });

  it("carries a resume position that replays nothing from before the subscription", async () => {
    const { owner, member, workspace, general } = await live.team();
    await live.post(owner, workspace.id, general.id, "old 1");
    await live.post(owner, workspace.id, general.id, "old 2");
    // Published before the subscription starts: an event committed before it but published
    // after it started (the relay batches commits for up to 20 ms) reaches it live, as it should.
    await ctx.server.app.deps.relay.flush();
    // A fresh subscription whose first event is a typing event (no message since subscribing).
    const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id);
    const typing = feed.received[0]!;
    expect(typing.event.type).toBe("typing");
    feed.unsubscribe();

    // Reconnecting from that position (what tRPC's link sends as lastEventId) must not replay
    // what was posted before the first subscription, which the client never missed.
    const resumed = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: typing.id,
    });
    await live.post(owner, workspace.id, general.id, "new");
    await arrived(resumed, "new");
    expect(resumed.messages().map(({ content }) => content)).toEqual(["new"]);
  });

  it("is refused for a channel the caller cannot see (NOT_FOUND)", async () => {
    const { owner, workspace } = await live.team();
    const secret = await live.createChannel(owner, workspace.id, "private");
    const stranger = await registerUser(ctx.api);
    const error = await live
      .chat(stranger.token)
      .messages.typing.mutate({ workspace_id: workspace.id, channel_id: secret.id })
      .then(
        () => undefined,
        (reason: unknown) => reason,
      );
    expect(error).toBeInstanceOf(TRPCClientError);
    expect((error as TRPCClientError<any>).data?.code).toBe("NOT_FOUND");
  });
});

describe("events.onUser", () => {
  it("follows the user's channels and conversations, also new ones, and nothing else", async () => {
    const { owner, member, workspace, general } = await live.team();
    const elsewhere = await live.createChannel(owner, workspace.id, "public"); // member has not joined
    const secret = await live.createChannel(owner, workspace.id, "private");
    const [friend, stranger] = await Promise.all([
      registerUser(ctx.api, { name: "Friend" }),
      registerUser(ctx.api, { name: "Stranger" }),
    ]);
    const friendDm = await live.openConversation(friend, member);
    const strangersDm = await live.openConversation(stranger, friend); // not the member's

    const feed = await live.attachedUserFeed(member);

    // The member's channel and conversation.
    const inGeneral = await live.post(owner, workspace.id, general.id, "in general");
    const inDm = await live.postDirect(friend, friendDm, "in the dm");
    // Not the member's: a public channel not joined, a private channel, someone else's DM.
    await live.post(owner, workspace.id, elsewhere.id, "not joined");
    await live.post(owner, workspace.id, secret.id, "not added yet");
    await live.postDirect(stranger, strangersDm, "someone else's dm");
    // Posted last: once it is here, the others would have been too.
    await live.post(owner, workspace.id, general.id, "barrier 1");
    await arrived(feed, "barrier 1");
    expect(feed.messages().map(({ content }) => content)).toEqual(["in general", "in the dm", "barrier 1"]);
    expect(feed.messages()[0]!.event).toMatchObject({
      type: "message.created",
      workspace_id: workspace.id,
      channel_id: general.id,
      data: { message: inGeneral },
    });
    expect(feed.messages()[1]!.event).toMatchObject({
      type: "message.created",
      conversation_id: friendDm,
      data: { message: inDm },
    });

    // Added to the private channel: its messages follow, posted right after the addition.
    const added = await ctx.api.post(
      `/api/v1/workspaces/${workspace.id}/channels/${secret.id}/members`,
      { user_id: member.id },
      { token: owner.token },
    );
    expect([200, 201]).toContain(added.status);
    await live.post(owner, workspace.id, secret.id, "now added");
    await arrived(feed, "now added");

    // A new conversation opened to them by someone else: its messages follow too.
    const newDm = await live.openConversation(stranger, member);
    await live.postDirect(stranger, newDm, "new dm");
    await arrived(feed, "new dm");
    expect(feed.received.some(({ event }) => event.type === "conversation.created")).toBe(true);

    await live.post(owner, workspace.id, elsewhere.id, "still not joined");
    await live.post(owner, workspace.id, general.id, "barrier 2");
    await arrived(feed, "barrier 2");
    expect(feed.messages().map(({ content }) => content)).toEqual([
      "in general",
      "in the dm",
      "barrier 1",
      "now added",
      "new dm",
      "barrier 2",
    ]);
    const ids = feed.received.map(({ id }) => Number(id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(feed.errors).toEqual([]);
  });
});

describe("direct.onConversation", () => {
  it("delivers the other participant's posts; a third user is refused with NOT_FOUND", async () => {
    const [alice, bob, eve] = await Promise.all([
      registerUser(ctx.api, { name: "Alice" }),
      registerUser(ctx.api, { name: "Bob" }),
      registerUser(ctx.api, { name: "Eve" }),
    ]);
    const conversationId = await live.openConversation(alice, bob);
    const bobFeed = collect((handlers) =>
      live.chat(bob.token).direct.onConversation.subscribe({ conversation_id: conversationId }, handlers),
    );
    const aliceClient = live.chat(alice.token);
    await attach(
      bobFeed,
      () => aliceClient.messages.typing.mutate({ conversation_id: conversationId }),
      ({ event }) => event.type === "typing",
    );
    expect(bobFeed.received[0]!.event).toMatchObject({
      type: "typing",
      conversation_id: conversationId,
      data: { user: { id: alice.id, name: "Alice" } },
    });

    const posted = await live.postDirect(alice, conversationId, "Hi Bob, live");
    const received = await arrived(bobFeed, "Hi Bob, live");
    expect(received.event).toEqual({
      id: expect.stringMatching(/^\d+$/),
      type: "message.created",
      conversation_id: conversationId,
      created_at: expect.stringMatching(ISO_WITH_OFFSET),
      data: { message: posted },
    });
    expect(received.id).toBe(received.event.id);

    const eveFeed = collect((handlers) =>
      live.chat(eve.token).direct.onConversation.subscribe({ conversation_id: conversationId }, handlers),
    );
    const error = await until(() => eveFeed.errors[0], "eve's subscription error");
    expect(error).toBeInstanceOf(TRPCClientError);
    expect((error as TRPCClientError<any>).data?.code).toBe("NOT_FOUND");
    expect(eveFeed.received).toEqual([]);
  });
});

describe("server-sent events", () => {
  it("delivers the same onChannel subscription over SSE", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id, { sse: true });
    const posted = await live.post(owner, workspace.id, general.id, "over sse");
    const received = await arrived(feed, "over sse");
    expect(received.event).toEqual({
      id: expect.stringMatching(/^\d+$/),
      type: "message.created",
      workspace_id: workspace.id,
      channel_id: general.id,
      created_at: expect.stringMatching(ISO_WITH_OFFSET),
      data: { message: posted },
    });
    expect(received.id).toBe(received.event.id);
    expect(feed.errors).toEqual([]);
  });
});

describe.runIf(process.env.REDIS_URL && process.env.DATABASE_URL)("two servers sharing PostgreSQL and Redis", () => {
  const servers = useTwoServers();
  const shared = world(
    () => servers.first,
    () => servers.api,
  );

  it("a message posted on one server reaches an onChannel subscriber on the other", async () => {
    const { owner, member, workspace, general } = await shared.team();
    // The subscriber is connected to the second server; pokes and posts go to the first.
    const feed = shared.onChannel(shared.chat(member.token, { url: servers.second.url }), {
      workspace_id: workspace.id,
      channel_id: general.id,
    });
    const poker = shared.chat(owner.token);
    await attach(
      feed,
      () => poker.messages.typing.mutate({ workspace_id: workspace.id, channel_id: general.id }),
      ({ event }) => event.type === "typing",
    );
    const posted = await shared.post(owner, workspace.id, general.id, "across servers");
    const received = await until(
      () => feed.messages().find((message) => message.content === "across servers"),
      "the message on the other server",
      15_000,
    );
    expect(received.event).toMatchObject({
      type: "message.created",
      workspace_id: workspace.id,
      channel_id: general.id,
      data: { message: posted },
    });
    expect(feed.errors).toEqual([]);
  });
});
