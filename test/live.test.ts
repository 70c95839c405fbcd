// Live delivery of messages through the typed client (client/index.ts) against the real server:
// channel and conversation subscriptions over WebSocket, the user's stream following them into
// new channels and conversations, resuming with lastEventId, the end of a subscription on
// removal, typing, the SSE transport, and (with Redis) delivery across two server processes.
//
// A subscription is attached to the event bus a moment after onStarted (the server starts the
// subscription's generator after answering "started"), so each test first "pokes" (an
// ephemeral typing event, or a profile update on the user's own stream) until the first one
// comes through; from then on every event must arrive.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { EventSource } from "eventsource";
import WebSocket from "ws";
import { createChatClient, TRPCClientError, type ChatClient, type StreamEvent } from "../client/index.ts";
import { startApp, type App } from "../server/app.ts";
import { loadConfig } from "../server/config.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { startTestServer, useTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$/;

type Received = { id: string; event: StreamEvent };
type MessageCreated = Extract<StreamEvent, { type: "message.created" }>;

type Feed = {
  received: Received[];
  errors: unknown[];
  isStarted(): boolean;
  isCompleted(): boolean;
  /** The message.created events so far, in order of arrival. */
  messages(): { id: string; event: MessageCreated; content: string; messageId: string }[];
  unsubscribe(): void;
};

type Handlers = {
  onStarted: () => void;
  onData: (value: unknown) => void;
  onError: (error: unknown) => void;
  onComplete: () => void;
  onStopped: () => void;
};

const openFeeds: Feed[] = [];
const openClients: ChatClient[] = [];

afterEach(() => {
  for (const feed of openFeeds.splice(0)) feed.unsubscribe();
  for (const client of openClients.splice(0)) client.close();
});

/** Collects what a subscription delivers; tracked events arrive as { id, data } envelopes. */
function collect(subscribe: (handlers: Handlers) => { unsubscribe(): void }): Feed {
  const received: Received[] = [];
  const errors: unknown[] = [];
  let started = false;
  let completed = false;
  const subscription = subscribe({
    onStarted: () => {
      started = true;
    },
    onData: (value) => {
      const envelope = value as { id: string; data: StreamEvent };
      received.push({ id: envelope.id, event: envelope.data });
    },
    onError: (error) => errors.push(error),
    onComplete: () => {
      completed = true;
    },
    onStopped: () => {
      completed = true;
    },
  });
  const feed: Feed = {
    received,
    errors,
    isStarted: () => started,
    isCompleted: () => completed,
    messages: () =>
      received.flatMap(({ id, event }) =>
        event.type === "message.created"
          ? [{ id, event, content: event.data.message.content, messageId: event.data.message.id }]
          : [],
      ),
    unsubscribe: () => subscription.unsubscribe(),
  };
  openFeeds.push(feed);
  return feed;
}

/** Pokes (every 200 ms) until the feed shows what the poke causes: the subscription is attached. */
async function attach(feed: Feed, poke: () => Promise<unknown>, seen: (received: Received) => boolean) {
  let attempts = 0;
  await until(
    async () => {
      if (feed.errors.length > 0) throw new Error(`subscription failed: ${String(feed.errors[0])}`);
      if (feed.received.some(seen)) return true;
      if (attempts++ % 8 === 0) await poke();
      return undefined;
    },
    "the subscription to attach",
    15_000,
  );
}

/** Everything a test needs against one server. */
function world(getServer: () => { url: string }, getApi: () => RestClient) {
  const api = () => getApi();

  function chat(token: string, options: { sse?: boolean; url?: string } = {}): ChatClient {
    const client = createChatClient({
      url: options.url ?? getServer().url,
      token,
      ...(options.sse
        ? { subscriptions: { sse: { EventSource: EventSource as unknown as typeof globalThis.EventSource } } }
        : { webSocket: { WebSocket: WebSocket as unknown as typeof globalThis.WebSocket } }),
    });
    openClients.push(client);
    return client;
  }

  async function createWorkspace(owner: RegisteredUser) {
    const response = await api().post(
      "/api/v1/workspaces",
      { name: "Live", visibility: "public" },
      { token: owner.token },
    );
    if (response.status !== 201) throw new Error(`workspace: ${response.status} ${JSON.stringify(response.body)}`);
    return response.body.data as { id: string };
  }

  async function createChannel(owner: RegisteredUser, workspaceId: string, visibility: "public" | "private") {
    const response = await api().post(
      `/api/v1/workspaces/${workspaceId}/channels`,
      { name: `${visibility} ${Math.random().toString(36).slice(2, 8)}`, visibility },
      { token: owner.token },
    );
    if (response.status !== 201) throw new Error(`channel: ${response.status} ${JSON.stringify(response.body)}`);
    return response.body.data as { id: string };
  }

  async function join(user: RegisteredUser, workspaceId: string) {
    const response = await api().post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: user.token });
    if (response.status !== 200) throw new Error(`join: ${response.status} ${JSON.stringify(response.body)}`);
  }

  async function general(user: RegisteredUser, workspaceId: string) {
    const response = await api().get(`/api/v1/workspaces/${workspaceId}/channels`, { token: user.token });
    return (response.body.data as { id: string; slug: string }[]).find((channel) => channel.slug === "general")!;
  }

  /** A public workspace: its owner, a member (in #general), and #general. */
  async function team() {
    const [owner, member] = await Promise.all([
      registerUser(api(), { name: "Olive Owner" }),
      registerUser(api(), { name: "Mia Member" }),
    ]);
    const workspace = await createWorkspace(owner!);
    await join(member!, workspace.id);
    const channel = await general(owner!, workspace.id);
    return { owner: owner!, member: member!, workspace, general: channel };
  }

  async function post(user: RegisteredUser, workspaceId: string, channelId: string, content: string) {
    const response = await api().post(
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
      { content },
      { token: user.token },
    );
    if (response.status !== 201) throw new Error(`post: ${response.status} ${JSON.stringify(response.body)}`);
    return response.body.data as { id: string; content: string };
  }

  async function openConversation(user: RegisteredUser, other: RegisteredUser) {
    const response = await api().post(
      "/api/v1/direct-conversations",
      { participant_user_id: other.id },
      { token: user.token },
    );
    if (response.status !== 201 && response.status !== 200)
      throw new Error(`open: ${response.status} ${JSON.stringify(response.body)}`);
    return response.body.data.id as string;
  }

  async function postDirect(user: RegisteredUser, conversationId: string, content: string) {
    const response = await api().post(
      `/api/v1/direct-conversations/${conversationId}/messages`,
      { content },
      { token: user.token },
    );
    if (response.status !== 201) throw new Error(`dm: ${response.status} ${JSON.stringify(response.body)}`);
    return response.body.data as { id: string; content: string };
  }

  function onChannel(
    client: ChatClient,
    input: { workspace_id: string; channel_id: string; lastEventId?: string },
  ): Feed {
    return collect((handlers) => client.messages.onChannel.subscribe(input, handlers));
  }

  /** A channel feed, attached by typing pokes from `poker` (a member of the channel). */
  async function attachedChannelFeed(
    subscriber: RegisteredUser,
    poker: RegisteredUser,
    workspaceId: string,
    channelId: string,
    options: { sse?: boolean } = {},
  ): Promise<Feed> {
    const feed = onChannel(chat(subscriber.token, options), { workspace_id: workspaceId, channel_id: channelId });
    const pokerClient = chat(poker.token);
    await attach(
      feed,
      () => pokerClient.messages.typing.mutate({ workspace_id: workspaceId, channel_id: channelId }),
      ({ event }) => event.type === "typing",
    );
    return feed;
  }

  /** The user's own stream, attached by renaming them (user.updated) until it shows. */
  async function attachedUserFeed(user: RegisteredUser): Promise<Feed> {
    const feed = collect((handlers) => chat(user.token).events.onUser.subscribe(undefined, handlers));
    let attempt = 0;
    await attach(
      feed,
      () => api().patch("/api/v1/me", { name: `${user.name} (${++attempt})` }, { token: user.token }),
      ({ event }) => event.type === "user.updated",
    );
    return feed;
  }

  return {
    chat,
    createChannel,
    team,
    post,
    openConversation,
    postDirect,
    onChannel,
    attachedChannelFeed,
    attachedUserFeed,
  };
}

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

function arrived(feed: Feed, content: string, what = `the message "${content}"`) {
  return until(() => feed.messages().find((message) => message.content === content), what);
}

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
  let first: TestServer;
  let second: App;
  let api: RestClient;
  const shared = world(
    () => first,
    () => api,
  );

  beforeAll(async () => {
    first = await startTestServer();
    api = restClient(first.url);
    second = await startApp(loadConfig({ ...first.env, PORT: "0" }));
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it("a message posted on one server reaches an onChannel subscriber on the other", async () => {
    const { owner, member, workspace, general } = await shared.team();
    // The subscriber is connected to the second server; pokes and posts go to the first.
    const feed = shared.onChannel(shared.chat(member.token, { url: second.url }), {
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
