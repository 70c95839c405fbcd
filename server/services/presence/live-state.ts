// Who has open, signed-in live connections (docs/presence.md): kept beside the event log, never in
// PostgreSQL. Each process counts its own connections per user (the truth for that process) and
// shares them: in Redis when REDIS_URL is set, so that every process agrees, else in memory.
//
// In Redis (keys under `<REDIS_PREFIX>:presence:`):
// - `u:<user id>`: a hash of the user's connection count per process, and `closed`, when the
//   last of them closed (ms); it expires a while after that.
// - `p:<process id>`: a hash of this process's counts per user (what a sweep of a dead process undoes).
// - `beats`: a sorted set of process ids by their last heartbeat (ms).
// One script sets a process's count for some users and publishes each user's transition
// (the first connection anywhere opened, the last one closed) on the presence topic, in the
// order Redis ran them, so that every watcher sees transitions in one order. A process beats
// every 5 s; a process silent for 15 s is swept by the next process that beats: its users'
// connections close as of its last heartbeat. After Redis comes back, a process writes its
// whole state again.
import type { Redis } from "ioredis";
import type { Clock } from "../../clock.ts";
import { busChannel, type EventBus } from "../../events/bus.ts";
import { streams } from "../../events/streams.ts";
import type { Logger } from "../../logger.ts";

/** A user's live connections anywhere: whether any is open, and when the last one closed (ms). */
export type LiveUser = { connected: boolean; closedAt: number | null };

/** What the presence topic carries when a user's first connection opened or last one closed. */
export type LiveTransition = { user_id: number; live: "open" | "closed"; at: number };

export const NOT_CONNECTED: LiveUser = { connected: false, closedAt: null };

/** How often a process says it is alive, and how long a silent one is believed. */
export const HEARTBEAT_MS = 5_000;
export const PROCESS_TIMEOUT_MS = 15_000;

export interface LiveState {
  /** This process's count for `userId` changed from `previous` (already applied locally): share it. Never throws. */
  changed(userId: number, count: number, previous: number): void;
  /** The users' live state across every process. */
  read(userIds: readonly number[]): Promise<Map<number, LiveUser>>;
  /** Users of other (dead) processes whose connections this process closed, with when. */
  onSwept(listener: (closed: { userId: number; at: number }[]) => void): void;
  start(): void;
  close(): Promise<void>;
}

/** Connections of a user on this process, kept by Presence; the live state shares them. */
export type LocalCounts = ReadonlyMap<number, number>;

/** One process, no Redis: the local counts are the whole truth. */
export class MemoryLiveState implements LiveState {
  private readonly closedAt = new Map<number, number>();

  constructor(
    private readonly deps: { events: EventBus; clock: Clock; keepClosedMs: number },
    private readonly local: LocalCounts,
  ) {}

  changed(userId: number, count: number, previous: number): void {
    const opened = previous === 0 && count > 0;
    const closed = previous > 0 && count === 0;
    if (!opened && !closed) return;
    const at = this.deps.clock.now().getTime();
    if (opened) this.closedAt.delete(userId);
    else {
      this.closedAt.set(userId, at);
      this.forgetOldClosings(at);
    }
    const transition: LiveTransition = { user_id: userId, live: opened ? "open" : "closed", at };
    void this.deps.events.publish(streams.presence, transition);
  }

  private forgetOldClosings(now: number): void {
    if (this.closedAt.size < 1_000) return;
    for (const [userId, at] of this.closedAt) if (now - at > this.deps.keepClosedMs) this.closedAt.delete(userId);
  }

  async read(userIds: readonly number[]): Promise<Map<number, LiveUser>> {
    const state = new Map<number, LiveUser>();
    for (const userId of userIds) {
      const count = this.local.get(userId) ?? 0;
      state.set(userId, { connected: count > 0, closedAt: count > 0 ? null : (this.closedAt.get(userId) ?? null) });
    }
    return state;
  }

  onSwept(): void {
    // One process: nobody else's connections to close.
  }

  start(): void {}

  async close(): Promise<void> {}
}

/** Total connections of a user hash, `closed` aside. */
const TOTAL = `
local function total(ukey)
  local values = redis.call('HGETALL', ukey)
  local n = 0
  for i = 1, #values, 2 do
    if values[i] ~= 'closed' then n = n + tonumber(values[i + 1]) end
  end
  return n
end
local function setCount(prefix, pid, uid, count, at, channel, keep)
  local ukey = prefix .. ':u:' .. uid
  local pkey = prefix .. ':p:' .. pid
  local before = total(ukey)
  if count > 0 then
    redis.call('HSET', ukey, pid, count)
    redis.call('HSET', pkey, uid, count)
    redis.call('PERSIST', ukey)
  else
    redis.call('HDEL', ukey, pid)
    redis.call('HDEL', pkey, uid)
  end
  local after = total(ukey)
  if before == 0 and after > 0 then
    redis.call('HDEL', ukey, 'closed')
    redis.call('PUBLISH', channel, '{"user_id":' .. uid .. ',"live":"open","at":' .. at .. '}')
  elseif before > 0 and after == 0 then
    redis.call('HSET', ukey, 'closed', at)
    redis.call('PEXPIRE', ukey, keep)
    redis.call('PUBLISH', channel, '{"user_id":' .. uid .. ',"live":"closed","at":' .. at .. '}')
    return true
  end
  return false
end
`;

/** ARGV: prefix, process id, now, channel, keep ms, full ("1": users not listed go to 0), then user/count pairs. */
const SET_COUNTS = `${TOTAL}
local prefix, pid, now, channel, keep, full = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local listed = {}
for i = 7, #ARGV, 2 do
  listed[ARGV[i]] = true
  setCount(prefix, pid, ARGV[i], tonumber(ARGV[i + 1]), now, channel, keep)
end
if full == '1' then
  for _, uid in ipairs(redis.call('HKEYS', prefix .. ':p:' .. pid)) do
    if not listed[uid] then setCount(prefix, pid, uid, 0, now, channel, keep) end
  end
end
redis.call('ZADD', prefix .. ':beats', now, pid)
return 1`;

/**
 * The heartbeat, and the sweep of processes silent since `deadBefore`: their connections close
 * as of their last heartbeat. ARGV: prefix, process id, now, channel, keep ms, deadBefore.
 * Returns whether this process was still known (1 or 0), then the users whose last connection
 * closed, and when: {known, uid, at, uid, at, ...}.
 */
const BEAT = `${TOTAL}
local prefix, pid, now, channel, keep, deadBefore = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local beats = prefix .. ':beats'
-- Missing: this process was taken for dead (a long pause) and swept; it writes its state again.
local known = redis.call('ZSCORE', beats, pid) and 1 or 0
redis.call('ZADD', beats, now, pid)
local closed = {known}
local dead = redis.call('ZRANGEBYSCORE', beats, '-inf', deadBefore, 'WITHSCORES')
for i = 1, #dead, 2 do
  local other, lastBeat = dead[i], dead[i + 1]
  for _, uid in ipairs(redis.call('HKEYS', prefix .. ':p:' .. other)) do
    if setCount(prefix, other, uid, 0, lastBeat, channel, keep) then
      closed[#closed + 1] = uid
      closed[#closed + 1] = lastBeat
    end
  end
  redis.call('DEL', prefix .. ':p:' .. other)
  redis.call('ZREM', beats, other)
end
return closed`;

/** ARGV: prefix, then user ids. Returns per user {total, closed or ''}. */
const READ = `
local prefix = ARGV[1]
local out = {}
for i = 2, #ARGV do
  local values = redis.call('HGETALL', prefix .. ':u:' .. ARGV[i])
  local n, closed = 0, ''
  for j = 1, #values, 2 do
    if values[j] == 'closed' then closed = values[j + 1] else n = n + tonumber(values[j + 1]) end
  end
  out[#out + 1] = n
  out[#out + 1] = closed
end
return out`;

type PresenceCommands = {
  presenceSetCounts(...args: (string | number)[]): Promise<unknown>;
  presenceBeat(...args: (string | number)[]): Promise<(string | number)[]>;
  presenceRead(...args: (string | number)[]): Promise<(string | number)[]>;
};

/** Every process shares one view through Redis. */
export class RedisLiveState implements LiveState {
  private readonly redis: Redis & PresenceCommands;
  private readonly prefix: string;
  private readonly channel: string;
  private timer: NodeJS.Timeout | undefined;
  /** A write failed (Redis away): the whole state is written again once it is back. */
  private stale = false;
  private readonly sweptListeners: ((closed: { userId: number; at: number }[]) => void)[] = [];
  private readonly onReady = () => {
    // Back after an outage (or a first connection): write everything this process holds.
    if (this.stale) this.writeAll();
  };

  constructor(
    private readonly deps: {
      redis: Redis;
      redisPrefix: string;
      clock: Clock;
      logger: Logger;
      keepClosedMs: number;
      /** This process's id among those sharing Redis. */
      processId: string;
    },
    private readonly local: LocalCounts,
  ) {
    this.prefix = `${deps.redisPrefix}:presence`;
    this.channel = busChannel(deps.redisPrefix, streams.presence);
    const redis = deps.redis as Redis & PresenceCommands;
    if (typeof (deps.redis as Partial<PresenceCommands>).presenceSetCounts !== "function") {
      redis.defineCommand("presenceSetCounts", { numberOfKeys: 0, lua: SET_COUNTS });
      redis.defineCommand("presenceBeat", { numberOfKeys: 0, lua: BEAT });
      redis.defineCommand("presenceRead", { numberOfKeys: 0, lua: READ });
    }
    this.redis = redis;
  }

  private now(): number {
    return this.deps.clock.now().getTime();
  }

  private setCounts(full: boolean, pairs: (string | number)[]): Promise<unknown> {
    const { prefix, channel } = this;
    return this.redis.presenceSetCounts(
      prefix,
      this.deps.processId,
      this.now(),
      channel,
      this.deps.keepClosedMs,
      full ? "1" : "0",
      ...pairs,
    );
  }

  changed(userId: number, count: number): void {
    if (this.stale) return; // the whole state goes when Redis is back
    this.setCounts(false, [userId, count]).catch((error: unknown) => this.lost(error));
  }

  private lost(error: unknown): void {
    if (!this.stale) this.deps.logger.warn({ err: error }, "presence: could not share live connections; will again");
    this.stale = true;
  }

  private writeAll(): void {
    this.stale = false;
    const pairs: number[] = [];
    for (const [userId, count] of this.local) if (count > 0) pairs.push(userId, count);
    this.setCounts(true, pairs).catch((error: unknown) => this.lost(error));
  }

  async read(userIds: readonly number[]): Promise<Map<number, LiveUser>> {
    const state = new Map<number, LiveUser>();
    if (userIds.length === 0) return state;
    const values = await this.redis.presenceRead(this.prefix, ...userIds);
    userIds.forEach((userId, index) => {
      const total = Number(values[index * 2]);
      const closed = String(values[index * 2 + 1] ?? "");
      state.set(userId, { connected: total > 0, closedAt: total > 0 || closed === "" ? null : Number(closed) });
    });
    return state;
  }

  onSwept(listener: (closed: { userId: number; at: number }[]) => void): void {
    this.sweptListeners.push(listener);
  }

  private async beat(): Promise<void> {
    if (this.stale) return this.writeAll();
    const now = this.now();
    const closed = await this.redis.presenceBeat(
      this.prefix,
      this.deps.processId,
      now,
      this.channel,
      this.deps.keepClosedMs,
      now - PROCESS_TIMEOUT_MS,
    );
    if (Number(closed[0]) === 0) this.writeAll();
    if (closed.length === 1) return;
    const users: { userId: number; at: number }[] = [];
    for (let i = 1; i < closed.length; i += 2) users.push({ userId: Number(closed[i]), at: Number(closed[i + 1]) });
    this.deps.logger.info({ users: users.length }, "presence: closed the connections of a server process that stopped");
    for (const listener of this.sweptListeners) listener(users);
  }

  start(): void {
    this.stale = true;
    this.deps.redis.on("ready", this.onReady);
    if (this.deps.redis.status === "ready") this.writeAll();
    this.timer = setInterval(() => {
      this.beat().catch((error: unknown) => this.lost(error));
    }, HEARTBEAT_MS).unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.deps.redis.off("ready", this.onReady);
    // Leaving: this process's connections are closed (the app closed them), say so now.
    const pairs: number[] = [];
    for (const [userId] of this.local) pairs.push(userId, 0);
    await this.setCounts(true, pairs).catch(() => {});
    await this.redis.zrem(`${this.prefix}:beats`, this.deps.processId).catch(() => {});
  }
}
