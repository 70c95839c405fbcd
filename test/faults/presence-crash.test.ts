// Presence when a server process dies (docs/presence.md, the contract's "Presence": connections
// held by a server process that died count as closed within 60 seconds). Two `npm start`
// processes share PostgreSQL and a private Redis, with PRESENCE_OFFLINE_AFTER_SECONDS=2. A user
// connected to the first is online for a watcher (presence.onUsers) on the second; the first is
// killed with SIGKILL, so it says nothing. Each process beats every 5 s and the next beat of a
// survivor sweeps a process silent for 15 s, closing its connections as of its last heartbeat:
// the watcher hears `offline` (expected within about 20 s, asserted within the contract's 60 s),
// and GET /api/v1/presence on the survivor answers offline with the last time the user was seen.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createChatClient, type ChatClient } from "@chat-service/client";
import { RawSocket } from "../helpers/raw-socket.ts";
import { until } from "../helpers/wait.ts";
import {
  call,
  createDatabase,
  deploymentEnv,
  register,
  runTag,
  startPrivateRedis,
  startServer,
  stopAll,
  type ServerProc,
  type User,
} from "./support.ts";

/** The contract's bound for a dead process's connections. */
const DEAD_PROCESS_MS = 60_000;

type PresenceRecord = { user_id: number; status: string; last_seen_at: string | null };

let victim: ServerProc;
let survivor: ServerProc;
const clients: ChatClient[] = [];
const sockets: RawSocket[] = [];

beforeAll(async () => {
  const db = await createDatabase();
  const redis = await startPrivateRedis();
  const env = { ...deploymentEnv({ databaseUrl: db.url, redisUrl: redis.url }), PRESENCE_OFFLINE_AFTER_SECONDS: "2" };
  [victim, survivor] = await Promise.all([startServer("presence-victim", env), startServer("presence-survivor", env)]);
}, 90_000);

afterAll(async () => {
  for (const socket of sockets) socket.terminate();
  for (const client of clients) client.close();
  await stopAll();
}, 60_000);

async function presenceOn(url: string, viewer: User, userId: number): Promise<PresenceRecord> {
  const reply = await call(url, "GET", `/api/v1/presence?user_ids=${userId}`, { token: viewer.token });
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  expect(reply.body.data).toHaveLength(1);
  return reply.body.data[0];
}

describe("kill -9 of the server process holding a user's connection", () => {
  it("the watcher on the surviving process hears offline within 60 s, and every answer says offline with a last seen", async () => {
    const tag = runTag("presence");
    const [watcher, user] = await Promise.all([
      register(survivor.url, `${tag}-watcher`),
      register(survivor.url, `${tag}-user`),
    ]);
    const opened = await call(survivor.url, "POST", "/api/v1/direct-conversations", {
      body: { participant_user_id: user.id },
      token: watcher.token,
    });
    expect([200, 201], JSON.stringify(opened.body)).toContain(opened.status);

    const client = createChatClient({ url: survivor.url, token: watcher.token, webSocket: { WebSocket } });
    clients.push(client);
    const received: { at: number; presence: PresenceRecord }[] = [];
    const errors: unknown[] = [];
    client.presence.onUsers.subscribe(
      { user_ids: [user.id] },
      {
        onData: (event) => received.push({ at: Date.now(), presence: event.data.presence }),
        onError: (error) => errors.push(error),
      },
    );
    const heard = (status: string, from: number, timeoutMs: number) =>
      until(
        () => {
          if (errors.length > 0) throw new Error(`the subscription failed: ${String(errors[0])}`);
          return received.slice(from).find((event) => event.presence.status === status);
        },
        `the watcher to hear ${status}`,
        timeoutMs,
      );
    await heard("offline", 0, 15_000);

    const connectedAt = Date.now();
    sockets.push(await RawSocket.signedIn(victim.url, user.token));
    const online = await heard("online", 1, 10_000);
    expect(online.at - connectedAt, "online within 2 s of the connect").toBeLessThanOrEqual(2_000);
    expect(await presenceOn(survivor.url, watcher, user.id)).toMatchObject({ status: "online" });

    const fromKill = received.length;
    const killedAt = Date.now();
    victim.proc().kill("SIGKILL");
    await victim.proc().exited;
    const offline = await heard("offline", fromKill, DEAD_PROCESS_MS + 5_000);
    const tookMs = offline.at - killedAt;
    console.log(`presence-crash: offline heard ${tookMs} ms after the kill`);
    expect(tookMs, "offline within 60 s of the kill").toBeLessThanOrEqual(DEAD_PROCESS_MS);
    expect(received.slice(fromKill).map((event) => event.presence.status)).toEqual(["offline"]);

    // The answers agree; last seen is the dead process's last heartbeat (or later), which came
    // after the connection opened (a process's count change beats too) and before the kill.
    const record = await presenceOn(survivor.url, watcher, user.id);
    expect(record).toMatchObject({ user_id: user.id, status: "offline" });
    expect(record.last_seen_at).not.toBeNull();
    const lastSeen = Date.parse(record.last_seen_at!);
    expect(lastSeen).toBeGreaterThanOrEqual(connectedAt);
    expect(lastSeen).toBeLessThanOrEqual(killedAt);
    expect(offline.presence.last_seen_at).toBe(record.last_seen_at);
  }, 90_000);
});
