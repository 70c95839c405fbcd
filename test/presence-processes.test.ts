// Presence across server processes (docs/presence.md, the contract's "Presence"): two processes
// share PostgreSQL and Redis, the live state is in Redis, and the presence topic carries each
// user's first-connection-opened and last-connection-closed transitions to every process. A user
// connected to one process is `online` for a watcher (presence.onUsers) and for GET
// /api/v1/presence on the other; the grace window (PRESENCE_OFFLINE_AFTER_SECONDS) holds across
// processes: a reconnect elsewhere inside it sends nothing, and after the last close the event
// follows the window within 2 s. A process killed with SIGKILL: test/faults/presence-crash.test.ts
// (`npm run test:faults`). Without Redis there is one process, so these need DATABASE_URL and
// REDIS_URL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createChatClient, type ChatClient } from "@chat-service/client";
import { startApp, type App } from "../server/app.ts";
import { loadConfig } from "../server/config.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { RawSocket } from "./helpers/raw-socket.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const OFFLINE_AFTER_SECONDS = 3;
const WINDOW_MS = OFFLINE_AFTER_SECONDS * 1000;
/** The contract: an event follows its change within 2 s. */
const EVENT_WITHIN_MS = 2_000;

type PresenceRecord = {
  user_id: number;
  status: "online" | "offline" | "away" | "dnd";
  last_seen_at: string | null;
  status_text: string | null;
  status_emoji: string | null;
};

/** A presence.onUsers subscription over the typed client (WebSocket) and what it received, with when. */
type PresenceFeed = {
  received: { at: number; presence: PresenceRecord }[];
  errors: unknown[];
  /** The events about `userId` from index `from` on. */
  of(userId: number, from?: number): { at: number; presence: PresenceRecord }[];
  close(): void;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.runIf(process.env.DATABASE_URL && process.env.REDIS_URL)("two server processes sharing Redis", () => {
  let first: TestServer;
  let second: App;
  let api: RestClient;
  const clients: ChatClient[] = [];
  const sockets: RawSocket[] = [];

  beforeAll(async () => {
    first = await startTestServer({ PRESENCE_OFFLINE_AFTER_SECONDS: String(OFFLINE_AFTER_SECONDS) });
    api = restClient(first.url);
    second = await startApp(loadConfig({ ...first.env, PORT: "0" }));
  });
  afterAll(async () => {
    for (const socket of sockets) socket.terminate();
    for (const client of clients) client.close();
    await second?.close();
    await first?.close();
  });

  function watch(url: string, viewer: RegisteredUser, userIds: number[]): PresenceFeed {
    const client = createChatClient({ url, token: viewer.token, webSocket: { WebSocket } });
    clients.push(client);
    const received: PresenceFeed["received"] = [];
    const errors: unknown[] = [];
    const subscription = client.presence.onUsers.subscribe(
      { user_ids: userIds },
      {
        onData: (event) => received.push({ at: Date.now(), presence: event.data.presence as PresenceRecord }),
        onError: (error) => errors.push(error),
      },
    );
    return {
      received,
      errors,
      of: (userId, from = 0) => received.slice(from).filter((event) => event.presence.user_id === userId),
      close: () => {
        subscription.unsubscribe();
        client.close();
      },
    };
  }

  /** A watcher and a user who share a direct conversation (so the watcher may see them). */
  async function pair(): Promise<{ watcher: RegisteredUser; user: RegisteredUser }> {
    const [watcher, user] = await Promise.all([
      registerUser(api, { name: "Wes Watcher" }),
      registerUser(api, { name: "Uma User" }),
    ]);
    const opened = await api.post(
      "/api/v1/direct-conversations",
      { participant_user_id: user.id },
      { token: watcher.token },
    );
    expect([200, 201], JSON.stringify(opened.body)).toContain(opened.status);
    return { watcher, user };
  }

  /** GET /api/v1/presence on `url`, as `viewer`, for one user. */
  async function presenceOn(url: string, viewer: RegisteredUser, userId: number): Promise<PresenceRecord> {
    const response = await restClient(url).get(`/api/v1/presence?user_ids=${userId}`, { token: viewer.token });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body.data).toHaveLength(1);
    return response.body.data[0];
  }

  async function connect(url: string, user: RegisteredUser): Promise<RawSocket> {
    const socket = await RawSocket.signedIn(url, user.token);
    sockets.push(socket);
    return socket;
  }

  /** Waits until the live state in Redis (read through `app`) says the user is connected somewhere, or nowhere. */
  async function liveIs(app: App, userId: number, connected: boolean): Promise<void> {
    await until(
      async () =>
        (await app.deps.presence.liveStateOf([userId])).get(userId)?.connected === connected ? true : undefined,
      `user ${userId} ${connected ? "connected" : "disconnected"} in the live state`,
      5_000,
    );
  }

  async function nextStatus(feed: PresenceFeed, userId: number, status: string, from: number, timeoutMs: number) {
    return until(
      () => {
        if (feed.errors.length > 0) throw new Error(`the subscription failed: ${String(feed.errors[0])}`);
        return feed.of(userId, from).find((event) => event.presence.status === status);
      },
      `the watcher to hear that user ${userId} is ${status}`,
      timeoutMs,
    );
  }

  it("a user connected to one process is online, within 2 s, for a watcher and for GET /api/v1/presence on the other", async () => {
    const { watcher, user } = await pair();
    const feed = watch(second.url, watcher, [user.id]);
    // The first event is the user's state now: never connected.
    const initial = await nextStatus(feed, user.id, "offline", 0, 10_000);
    expect(initial.presence).toEqual({
      user_id: user.id,
      status: "offline",
      last_seen_at: null,
      status_text: null,
      status_emoji: null,
    });
    expect(await presenceOn(second.url, watcher, user.id)).toMatchObject({ status: "offline", last_seen_at: null });

    const connectedAt = Date.now();
    const socket = await connect(first.url, user);
    const online = await nextStatus(feed, user.id, "online", 1, EVENT_WITHIN_MS + 1_000);
    expect(online.at - connectedAt, "the online event came within 2 s of the connect").toBeLessThanOrEqual(
      EVENT_WITHIN_MS,
    );
    expect(feed.of(user.id)).toHaveLength(2);

    // Both processes answer the same: online, last seen now (within 60 s of now while connected).
    for (const url of [second.url, first.url]) {
      const record = await presenceOn(url, watcher, user.id);
      expect(record, url).toMatchObject({ user_id: user.id, status: "online" });
      expect(Math.abs(Date.parse(record.last_seen_at!) - Date.now()), url).toBeLessThan(60_000);
    }
    socket.socket.close();
    feed.close();
  });

  it("a reconnect on the other process inside the grace window sends nothing; after the last close, offline follows the window within 2 s", async () => {
    const { watcher, user } = await pair();
    const feed = watch(second.url, watcher, [user.id]);
    await nextStatus(feed, user.id, "offline", 0, 10_000);

    const onFirst = await connect(first.url, user);
    await nextStatus(feed, user.id, "online", 1, 10_000);
    const heard = feed.received.length;

    // The last connection (on the first process) closes: every process has seen it close …
    const closedAt = Date.now();
    onFirst.socket.close();
    await liveIs(second, user.id, false);
    // … and the user reconnects on the second process, inside the window.
    const onSecond = await connect(second.url, user);
    await liveIs(first.app, user.id, true);
    expect(Date.now() - closedAt, "the reconnect came inside the grace window").toBeLessThan(WINDOW_MS);

    // Nothing can be heard before the window has passed with the 2 s an event may take: wait that
    // long (a negative can only be waited for), then look.
    await sleep(Math.max(0, closedAt + WINDOW_MS + EVENT_WITHIN_MS + 500 - Date.now()));
    expect(feed.received.slice(heard), "no event for a reconnect inside the window").toEqual([]);
    expect(feed.errors).toEqual([]);
    for (const url of [first.url, second.url])
      expect(await presenceOn(url, watcher, user.id), url).toMatchObject({ status: "online" });

    // The final close: online for the window, then offline, the event within 2 s after it.
    const finalCloseAt = Date.now();
    onSecond.socket.close();
    await liveIs(first.app, user.id, false);
    expect(await presenceOn(first.url, watcher, user.id)).toMatchObject({ status: "online" });
    const offline = await nextStatus(feed, user.id, "offline", heard, WINDOW_MS + EVENT_WITHIN_MS + 2_000);
    const after = offline.at - finalCloseAt;
    expect(after, "offline not before the window ended").toBeGreaterThanOrEqual(WINDOW_MS);
    // The server's window starts when it saw the close, a few ms after the client closed.
    expect(after, "offline within the window and 2 s").toBeLessThanOrEqual(WINDOW_MS + EVENT_WITHIN_MS + 250);
    expect(feed.of(user.id, heard)).toHaveLength(1);
    expect(offline.presence.last_seen_at).not.toBeNull();
    expect(Date.parse(offline.presence.last_seen_at!)).toBeGreaterThanOrEqual(finalCloseAt - 1_000);

    // Every answer agrees, on both processes, with the last time the user was connected.
    for (const url of [first.url, second.url]) {
      const record = await presenceOn(url, watcher, user.id);
      expect(record, url).toMatchObject({ status: "offline", last_seen_at: offline.presence.last_seen_at });
    }
    feed.close();
  });
});
