// Live-event test helpers: typed clients (WebSocket or SSE) that close after each test, feeds
// that collect what a subscription delivers, and a small world of users, workspaces, channels
// and conversations built through the public API.
import { afterEach } from "vitest";
import { EventSource } from "eventsource";
import WebSocket from "ws";
import { createChatClient, type ChatClient, type StreamEvent } from "@chat-service/client";
import type { RestClient } from "./api.ts";
import { registerUser, type RegisteredUser } from "./factories.ts";
import { until } from "./wait.ts";

export const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$/;

export type Received = { id: string; event: StreamEvent };
export type MessageCreated = Extract<StreamEvent, { type: "message.created" }>;

export type Feed = {
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
export function collect(subscribe: (handlers: Handlers) => { unsubscribe(): void }): Feed {
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
export async function attach(feed: Feed, poke: () => Promise<unknown>, seen: (received: Received) => boolean) {
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
export function world(getServer: () => { url: string }, getApi: () => RestClient) {
  const api = () => getApi();

  function chat(token: string, options: { sse?: boolean; url?: string } = {}): ChatClient {
    const client = createChatClient({
      url: options.url ?? getServer().url,
      token,
      ...(options.sse ? { subscriptions: { sse: { EventSource } } } : { webSocket: { WebSocket } }),
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

export function arrived(feed: Feed, content: string, what = `the message "${content}"`) {
  return until(() => feed.messages().find((message) => message.content === content), what);
}
