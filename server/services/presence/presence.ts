// Presence (docs/presence.md), one per server process, on `deps.presence`:
// - counts this process's signed-in live connections per user (`connect`), shares them through
//   the live state (Redis, or memory), and writes last_seen_at in batches (one statement a
//   minute at most, none while nobody is connected);
// - serves the watchers (`presence.onUsers`): for every user some local watcher follows, it keeps
//   the stored settings (read once when the watch starts, then kept by the presence topic) and the
//   live state (kept by the transitions on the presence topic), and tells the watchers who may
//   see that user when what they see changes: at most once a second per user, after the grace
//   window, at an expiry. No event costs PostgreSQL a statement.
import type { Redis } from "ioredis";
import type { Database } from "../../../db/client.ts";
import type { Clock } from "../../clock.ts";
import { listen, type EventBus } from "../../events/bus.ts";
import { streams, type BusEvent } from "../../events/streams.ts";
import type { Logger } from "../../logger.ts";
import { workspaceIdsOf } from "../../policy/people.ts";
import {
  MemoryLiveState,
  NOT_CONNECTED,
  RedisLiveState,
  type LiveState,
  type LiveTransition,
  type LiveUser,
} from "./live-state.ts";
import {
  nextLapse,
  presenceRecord,
  recordLastSeen,
  storedPresences,
  visiblePresence,
  watchedKey,
  type PresenceRecord,
  type StoredPresence,
} from "./settings.ts";

/** How often the last-seen times gathered here are written (a user at most once per period). */
export const LAST_SEEN_FLUSH_MS = 60_000;
/** A user's changes reach a watcher at most this often (the last state wins). */
export const MERGE_MS = 1_000;
/** Membership changes that may change whom a watcher sees are looked at after this pause, together. */
const RECHECK_DELAY_MS = 100;
/** setTimeout's longest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A stored presence as the presence topic carries it, after a change of the settings. */
type SettingsMessage = { user_id: number; stored: StoredPresence };

/** What a watcher receives. */
export type PresenceChanged = { type: "presence.changed"; data: { presence: PresenceRecord } };

export type PresenceSink = {
  event(event: PresenceChanged): void;
  fail(error: unknown): void;
};

/** A user some local watcher follows. */
type Watched = {
  userId: number;
  /** Undefined until a watcher's first read (or a settings message) brought it. */
  stored: StoredPresence | undefined;
  live: LiveUser;
  /** A transition was heard: a read that started before it is older. */
  liveHeard: boolean;
  watchers: Set<PresenceWatch>;
  lastEmitAt: number;
  emitTimer: NodeJS.Timeout | undefined;
  graceTimer: NodeJS.Timeout | undefined;
  /** The next expiry of its dnd or status, or null. */
  lapseAt: number | null;
};

type PresenceOptions = {
  db: Database;
  clock: Clock;
  logger: Logger;
  events: EventBus;
  redis: Redis | undefined;
  config: { presenceOfflineAfterSeconds: number; redisPrefix: string };
  /** This process among those sharing Redis. */
  processId: string;
};

export class Presence {
  readonly offlineAfterMs: number;
  /** This process's open signed-in live connections per user. */
  private readonly counts = new Map<number, number>();
  private readonly live: LiveState;
  /** Last-seen times to write (users whose connections here closed, or a dead process's). */
  private readonly seen = new Map<number, number>();
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private readonly watched = new Map<number, Watched>();
  private expiryTimer: NodeJS.Timeout | undefined;
  private expiryAt = Number.POSITIVE_INFINITY;
  private readonly cleanups: (() => void)[] = [];

  constructor(readonly options: PresenceOptions) {
    const { config } = options;
    this.offlineAfterMs = config.presenceOfflineAfterSeconds * 1000;
    // A user's `closed` time is kept a while past the window: answers and watchers read it.
    const keepClosedMs = this.offlineAfterMs + 2 * LAST_SEEN_FLUSH_MS;
    this.live = options.redis
      ? new RedisLiveState(
          {
            redis: options.redis,
            redisPrefix: config.redisPrefix,
            clock: options.clock,
            logger: options.logger,
            keepClosedMs,
            processId: options.processId,
          },
          this.counts,
        )
      : new MemoryLiveState({ events: options.events, clock: options.clock, keepClosedMs }, this.counts);
  }

  private now(): number {
    return this.options.clock.now().getTime();
  }

  async start(): Promise<void> {
    const { events } = this.options;
    this.live.onSwept((closed) => {
      for (const { userId, at } of closed) this.seen.set(userId, Math.max(this.seen.get(userId) ?? 0, at));
    });
    this.live.start();
    this.flushTimer = setInterval(() => void this.flushLastSeen(), LAST_SEEN_FLUSH_MS).unref();
    this.cleanups.push(
      await listen(events, streams.presence, (message) => this.heard(message)),
      // Messages published while the bus was away never arrived: read again what watchers show.
      events.onResubscribed(() => void this.refreshWatched()),
    );
  }

  /** A signed-in live connection of `userId` opened here; call the answer when it closes (once is enough). */
  connect(userId: number): () => void {
    const count = (this.counts.get(userId) ?? 0) + 1;
    this.counts.set(userId, count);
    this.live.changed(userId, count, count - 1);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      const left = (this.counts.get(userId) ?? 1) - 1;
      if (left > 0) this.counts.set(userId, left);
      else {
        this.counts.delete(userId);
        this.seen.set(userId, this.now());
      }
      this.live.changed(userId, left, left + 1);
    };
  }

  /** Whether `userId` has a live connection open anywhere. */
  async liveStateOf(userIds: readonly number[]): Promise<Map<number, LiveUser>> {
    return this.live.read(userIds);
  }

  /** The records of those of `userIds` `viewerId` may see, in the order asked, once each. */
  async records(viewerId: number, userIds: readonly number[]): Promise<PresenceRecord[]> {
    const unique = [...new Set(userIds)];
    const stored = await visiblePresence(this.options.db, viewerId, unique);
    const visible = unique.filter((userId) => stored.has(userId));
    const live = await this.live.read(visible);
    const now = this.now();
    return visible.map((userId) =>
      presenceRecord(userId, stored.get(userId)!, live.get(userId) ?? NOT_CONNECTED, now, this.offlineAfterMs),
    );
  }

  /** After a change of a user's settings (committed): every process's watchers hear of it. */
  async settingsChanged(userId: number, stored: StoredPresence): Promise<void> {
    const message: SettingsMessage = { user_id: userId, stored };
    await this.options.events.publish(streams.presence, message).catch((error: unknown) => {
      // The change is stored; watchers elsewhere see it when the bus is back (they read again).
      this.options.logger.warn({ err: error }, "presence: could not publish a settings change");
    });
  }

  /** Starts a watch (presence.onUsers); deliveries begin once `attach` gave it a sink. */
  watch(viewerId: number, userIds: readonly number[], signal: AbortSignal | undefined): PresenceWatch {
    return new PresenceWatch(this, viewerId, [...new Set(userIds)], signal);
  }

  // --- watchers -------------------------------------------------------------------------------

  /** @internal Registers `watch` for its users and sends their state now to those it may see. */
  async begin(watch: PresenceWatch): Promise<void> {
    for (const userId of watch.userIds) this.follow(userId).watchers.add(watch);
    await this.recheck(watch, true);
  }

  /** @internal */
  end(watch: PresenceWatch): void {
    for (const userId of watch.userIds) {
      const entry = this.watched.get(userId);
      if (!entry) continue;
      entry.watchers.delete(watch);
      if (entry.watchers.size === 0) {
        clearTimeout(entry.emitTimer);
        clearTimeout(entry.graceTimer);
        this.watched.delete(userId);
      }
    }
  }

  /**
   * @internal Decides again whom `watch` may see (at its start, and after a membership change),
   * brings in the state of the users it sees now, and sends theirs to it: all of them at the
   * start, the newly visible ones after.
   */
  async recheck(watch: PresenceWatch, first: boolean): Promise<void> {
    const { db } = this.options;
    const stored = await visiblePresence(db, watch.viewerId, watch.userIds);
    if (watch.closed) return;
    const reading = watch.userIds.filter((userId) => stored.has(userId) && !this.watched.get(userId)?.liveHeard);
    const live = await this.live.read(reading);
    if (watch.closed) return;
    const now = this.now();
    const added: number[] = [];
    for (const userId of watch.userIds) {
      const entry = this.watched.get(userId);
      const row = stored.get(userId);
      if (!entry) continue;
      if (!row) {
        watch.visible.delete(userId);
        watch.sent.delete(userId);
        continue;
      }
      if (!entry.stored || row.version > entry.stored.version) this.setStored(entry, row, now);
      const read = live.get(userId);
      if (read && !entry.liveHeard) entry.live = read;
      if (!watch.visible.has(userId)) {
        watch.visible.add(userId);
        added.push(userId);
      }
      this.armGrace(entry, now);
    }
    // Their state now, in the order asked (at the start, every visible user).
    for (const userId of first ? watch.userIds : added) {
      const entry = this.watched.get(userId);
      if (!entry?.stored || !watch.visible.has(userId)) continue;
      const record = presenceRecord(userId, entry.stored, entry.live, now, this.offlineAfterMs);
      watch.deliver(record, watchedKey(record));
    }
  }

  private follow(userId: number): Watched {
    let entry = this.watched.get(userId);
    if (!entry) {
      entry = {
        userId,
        stored: undefined,
        live: NOT_CONNECTED,
        liveHeard: false,
        watchers: new Set(),
        lastEmitAt: 0,
        emitTimer: undefined,
        graceTimer: undefined,
        lapseAt: null,
      };
      this.watched.set(userId, entry);
    }
    return entry;
  }

  private setStored(entry: Watched, stored: StoredPresence, now: number): void {
    entry.stored = stored;
    entry.lapseAt = nextLapse(stored, now);
    if (entry.lapseAt !== null && entry.lapseAt < this.expiryAt) this.armExpiry(entry.lapseAt, now);
  }

  /** A message on the presence topic: a live transition or a settings change. */
  private heard(message: unknown): void {
    const { user_id: userId } = message as { user_id: number };
    const entry = this.watched.get(userId);
    if (!entry) return;
    const now = this.now();
    if ("live" in (message as object)) {
      const { live, at } = message as LiveTransition;
      entry.live = live === "open" ? { connected: true, closedAt: null } : { connected: false, closedAt: Number(at) };
      entry.liveHeard = true;
    } else {
      const { stored } = message as SettingsMessage;
      if (entry.stored && stored.version <= entry.stored.version) return;
      this.setStored(entry, stored, now);
    }
    this.changed(entry, now);
  }

  /** Tells the entry's watchers what changed for them, at most once per MERGE_MS. */
  private changed(entry: Watched, now: number): void {
    this.armGrace(entry, now);
    if (!entry.stored || entry.emitTimer) return;
    const wait = entry.lastEmitAt + MERGE_MS - now;
    if (wait > 0) {
      entry.emitTimer = setTimeout(() => {
        entry.emitTimer = undefined;
        this.changed(entry, this.now());
      }, wait);
      return;
    }
    const record = presenceRecord(entry.userId, entry.stored, entry.live, now, this.offlineAfterMs);
    const key = watchedKey(record);
    let told = false;
    for (const watch of entry.watchers) {
      if (!watch.visible.has(entry.userId) || watch.sent.get(entry.userId) === key) continue;
      watch.deliver(record, key);
      told = true;
    }
    if (told) entry.lastEmitAt = now;
  }

  /** An `auto` user whose last connection closed turns offline when the window ends: look then. */
  private armGrace(entry: Watched, now: number): void {
    clearTimeout(entry.graceTimer);
    entry.graceTimer = undefined;
    const { closedAt } = entry.live;
    if (entry.live.connected || closedAt === null) return;
    const ends = closedAt + this.offlineAfterMs;
    if (ends <= now) return;
    entry.graceTimer = setTimeout(
      () => {
        entry.graceTimer = undefined;
        this.changed(entry, this.now());
      },
      ends - now + 1,
    );
  }

  /** One timer for the earliest expiry (dnd_until, status_expires_at) among the watched users. */
  private armExpiry(at: number, now: number): void {
    clearTimeout(this.expiryTimer);
    this.expiryAt = at;
    this.expiryTimer = setTimeout(() => this.expire(), Math.min(Math.max(0, at - now) + 1, MAX_TIMER_MS));
  }

  private expire(): void {
    this.expiryTimer = undefined;
    this.expiryAt = Number.POSITIVE_INFINITY;
    const now = this.now();
    let next = Number.POSITIVE_INFINITY;
    for (const entry of this.watched.values()) {
      if (entry.lapseAt !== null && entry.lapseAt <= now && entry.stored) {
        entry.lapseAt = nextLapse(entry.stored, now);
        this.changed(entry, now);
      }
      if (entry.lapseAt !== null) next = Math.min(next, entry.lapseAt);
    }
    if (next !== Number.POSITIVE_INFINITY) this.armExpiry(next, now);
  }

  /** After the bus came back: the settings and live state of every watched user, read again. */
  private async refreshWatched(): Promise<void> {
    const userIds = [...this.watched.keys()];
    if (userIds.length === 0) return;
    try {
      const [stored, live] = await Promise.all([storedPresences(this.options.db, userIds), this.live.read(userIds)]);
      const now = this.now();
      for (const userId of userIds) {
        const entry = this.watched.get(userId);
        if (!entry) continue;
        const row = stored.get(userId);
        if (row && (!entry.stored || row.version > entry.stored.version)) this.setStored(entry, row, now);
        entry.live = live.get(userId) ?? NOT_CONNECTED;
        this.changed(entry, now);
      }
    } catch (error) {
      this.options.logger.warn({ err: error }, "presence: could not read the watched users again");
    }
  }

  // --- last seen ------------------------------------------------------------------------------

  /** Writes the last-seen times gathered: users connected here now, and those who left. One statement, or none. */
  flushLastSeen(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.counts.size === 0 && this.seen.size === 0) return;
      const now = this.now();
      const seen = new Map(this.seen);
      this.seen.clear();
      for (const userId of this.counts.keys()) seen.set(userId, now);
      try {
        await recordLastSeen(this.options.db, seen);
      } catch (error) {
        for (const [userId, at] of seen) if (!this.seen.has(userId)) this.seen.set(userId, at);
        this.options.logger.warn({ err: error }, "presence: could not write last seen times; will again");
      }
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.flushTimer);
    clearTimeout(this.expiryTimer);
    for (const cleanup of this.cleanups.splice(0)) cleanup();
    for (const entry of this.watched.values()) {
      clearTimeout(entry.emitTimer);
      clearTimeout(entry.graceTimer);
    }
    this.watched.clear();
    await this.flushLastSeen();
    await this.live.close();
  }
}

/** Membership events after which a watcher's visible users may differ. */
function changesWhomTheySee(event: BusEvent["event"], watch: PresenceWatch): boolean {
  switch (event.type) {
    case "workspace.joined":
    case "conversation.created":
      return true;
    case "member.left": {
      const { user_id: userId } = event.data as { user_id: number };
      return userId === watch.viewerId || watch.requested.has(userId);
    }
    case "member.joined": {
      const { member } = event.data as { member: { user_id: number } };
      return member.user_id === watch.viewerId || watch.requested.has(member.user_id);
    }
    default:
      return false;
  }
}

/**
 * One `presence.onUsers` subscription: its users' state now, then each change it may see. It
 * follows the viewer's own stream and their workspaces' streams: a membership change that
 * concerns the viewer or one of the users decides again whom it may see (one statement).
 */
export class PresenceWatch {
  readonly visible = new Set<number>();
  /** What each user last looked like to this watcher. */
  readonly sent = new Map<number, string>();
  readonly requested: ReadonlySet<number>;
  closed = false;
  private sink: PresenceSink | undefined;
  private readonly cleanups: (() => void)[] = [];
  private readonly topics = new Map<string, () => void>();
  private recheckTimer: NodeJS.Timeout | undefined;
  private rechecking: Promise<void> = Promise.resolve();

  constructor(
    private readonly hub: Presence,
    readonly viewerId: number,
    readonly userIds: readonly number[],
    private readonly signal: AbortSignal | undefined,
  ) {
    this.requested = new Set(userIds);
  }

  /** Starts delivery to `sink`. Once only. */
  attach(sink: PresenceSink): void {
    if (this.sink) throw new Error("PresenceWatch.attach: already attached");
    this.sink = sink;
    if (this.signal?.aborted) return this.close();
    this.signal?.addEventListener("abort", () => this.close(), { once: true });
    this.rechecking = this.start().catch((error: unknown) => this.fail(error));
  }

  private async start(): Promise<void> {
    await this.followMemberships();
    if (this.closed) return;
    await this.hub.begin(this);
  }

  /** The viewer's own stream and their workspaces' streams (membership events). */
  private async followMemberships(): Promise<void> {
    const { events, db } = this.hub.options;
    const wanted = new Set([
      streams.user(this.viewerId),
      ...(await workspaceIdsOf(db, this.viewerId)).map((id) => streams.workspace(id)),
    ]);
    for (const [topic, unsubscribe] of this.topics)
      if (!wanted.has(topic)) {
        unsubscribe();
        this.topics.delete(topic);
      }
    for (const topic of wanted) {
      if (this.topics.has(topic) || this.closed) continue;
      const unsubscribe = await listen(events, topic, (message) => {
        if (!this.closed && changesWhomTheySee((message as BusEvent).event, this)) this.scheduleRecheck();
      });
      if (this.closed) unsubscribe();
      else this.topics.set(topic, unsubscribe);
    }
  }

  private scheduleRecheck(): void {
    if (this.recheckTimer) return;
    this.recheckTimer = setTimeout(() => {
      this.recheckTimer = undefined;
      this.rechecking = this.rechecking
        .then(async () => {
          if (this.closed) return;
          await this.followMemberships();
          await this.hub.recheck(this, false);
        })
        .catch((error: unknown) => this.fail(error));
    }, RECHECK_DELAY_MS);
  }

  /** @internal */
  deliver(record: PresenceRecord, key: string): void {
    if (this.closed) return;
    this.sent.set(record.user_id, key);
    this.sink?.event({ type: "presence.changed", data: { presence: record } });
  }

  /** Runs `cleanup` when the watch closes. */
  onClose(cleanup: () => void): void {
    if (this.closed) cleanup();
    else this.cleanups.push(cleanup);
  }

  fail(error: unknown): void {
    if (this.closed) return;
    this.close();
    this.sink?.fail(error);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.recheckTimer);
    for (const unsubscribe of this.topics.values()) unsubscribe();
    this.topics.clear();
    this.hub.end(this);
    for (const cleanup of this.cleanups.splice(0)) cleanup();
  }
}
