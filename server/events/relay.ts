// The event relay: the one publisher of live events. Changes write their events in their own
// transaction with no position; the relay gives committed events positions from one sequence,
// a batch at a time, and publishes them on the bus in position order.
//
// Why positions are given here and not at insert (docs/realtime.md, "Resuming"): ids taken at
// insert commit in any order, so a client that saw id 101 before 100 committed, and resumed
// "after 101", never got 100. The relay sees only committed rows and numbers them in the order
// it sees them, so once a client holds position P, every event that commits later gets a
// position above P. It costs one UPDATE per batch, which replaces the "published" mark the
// events had before; nothing is added per delivered event.
//
// One relay publishes at a time, so subscribers receive positions in order: with PostgreSQL
// the processes elect it with a session advisory lock. The others wait for the lock inside
// PostgreSQL (a blocked pg_advisory_lock costs no statement while it waits) and one takes over
// the moment the leader's connection goes; PGlite has a single process. Other processes wake it
// over the bus after their commits; it also looks every RELAY_POLL_MS, for changes whose writer
// could not wake it (the CLI) and to check that it still holds the lock: an idle server is quiet.
//
// The relay also feeds the consumers of the log (server/consumers/kit.ts) the events it has just
// positioned, in order, so that they need not read them back.
import type { DbSession, DatabaseHandle } from "../../db/client.ts";
import { streamEvents } from "../../db/schema/index.ts";
import { and, lt, lte, sql } from "drizzle-orm";
import type { Clock } from "../clock.ts";
import { oncePer, type Logger } from "../logger.ts";
import { RunLoop } from "../run-loop.ts";
import { toLoggedEvent, type ConsumerKit, type LoggedEvent } from "../consumers/kit.ts";
import { listen, type EventBus } from "./bus.ts";
import { EVENT_RETENTION_MS, RELAY_NOTIFY_CHANNEL, toBusEvent, type BusEvent } from "./streams.ts";

/** Any fixed number: the advisory lock the relay holds while it is the publisher. */
const RELAY_LOCK_ID = 72_410_032;
/** Events positioned per statement. */
const BATCH_SIZE = 500;
/**
 * A batch starts at least this long after the one before it. Commits that come faster share the
 * next batch: one positioning statement and one write per subscriber socket for all of them. A
 * commit after a quiet spell (fewer than 50 a second) is published at once; under load an event
 * waits at most this long more. At 200 messages a second to 100 subscribers, 20 ms instead of 5
 * took a fifth of the server's CPU per message and an eighth of PostgreSQL's, for 10 ms more
 * median delivery latency (docs/performance.md, twelfth round).
 */
const RELAY_MIN_INTERVAL_MS = 20;
/** How often the publisher looks for events nobody woke it for, and checks it still holds the lock. */
const RELAY_POLL_MS = 15_000;
/** After its wait for the lock failed (the connection went), a process waits this long before waiting again. */
const CONTEND_AGAIN_MS = 2_000;
const PRUNE_EVERY_MS = 5 * 60_000;
/** A new publisher republishes what its predecessor positioned this recently (it may have died before publishing). */
const TAKEOVER_REPUBLISH_SECONDS = 10;
/** The bus topic on which other processes wake the publisher. */
const RELAY_WAKE_TOPIC = "relay";

/**
 * Positions the next batch, in id order. With the publisher's backend pid (PostgreSQL), a
 * connection the driver silently replaced (which no longer holds the lock) positions nothing.
 * Both values are written into the text, not passed as parameters: a statement without
 * parameters is planned once per connection, where one with them was planned again on every
 * run (PostgreSQL kept choosing custom plans), about 300 µs a batch.
 */
const positionBatch = (leaderPid: number | null) => `
with batch as (
  select id from stream_events
  where position is null${leaderPid === null ? "" : ` and pg_backend_pid() = ${Math.trunc(leaderPid)}`}
  order by id limit ${BATCH_SIZE}
),
positioned as (
  select id, nextval('stream_positions') as position from (select id from batch order by id) ordered
)
update stream_events e set position = p.position, published_at = now()
from positioned p where e.id = p.id
returning e.stream, e.position::text as position, e.created_at, e.payload`;

// Ordered by the column (stream_events.position), not by the text the select answers, in which
// "10" comes before "9": with a limit, that would take the wrong events.
const RECENTLY_POSITIONED = `
select stream, position::text as position, created_at, payload from stream_events
where position is not null and published_at > now() - make_interval(secs => $1)
order by stream_events.position limit 20000`;

const POSITIONED_FROM = `
select stream, position::text as position, created_at, payload from stream_events
where position >= $1::bigint order by stream_events.position limit $2`;

type PositionedRow = { stream: string; position: string; created_at: Date | string; payload: unknown };

type RelayDeps = {
  database: DatabaseHandle;
  events: EventBus;
  clock: Clock;
  logger: Logger;
  /** Run by the publisher only: fed each batch it positions. */
  consumers: Pick<ConsumerKit, "start" | "positioned" | "flush" | "stop">;
};

export class EventRelay {
  private session: DbSession | undefined;
  /** The backend that holds the lock (PostgreSQL); null with PGlite, which needs no lock. */
  private leaderPid: number | null = null;
  private leading = false;
  /**
   * Leading, and done republishing what the predecessor positioned: only then may it position
   * (a newer event published before an older one would hide the older one from subscribers,
   * who drop what is at or below the position they hold).
   */
  private publishing = false;
  private closed = false;
  /** Positions and publishes committed events, one batch at a time, once this process publishes. */
  private readonly runs = new RunLoop(
    () => this.runBatch(),
    () => this.publishing,
    RELAY_MIN_INTERVAL_MS,
  );
  private wakePublished = false;
  /** A publish failed: republish from this position on the next run. */
  private republishFrom: number | undefined;
  /** At most one warning per 10 s while publishing fails. */
  private readonly mayWarnOfPublish = oncePer();
  private readonly timers: NodeJS.Timeout[] = [];
  private unsubscribeWake: (() => void) | undefined;
  /**
   * The newest position this publisher gave, when it knows that no event lies between it and
   * the next batch it positions (unknown after taking over, or after a failed statement).
   */
  private lastPositioned: number | undefined;
  /** The backend waiting for the lock, so that closing can cancel the wait. */
  private waitingPid: number | undefined;
  private contendAgain: NodeJS.Timeout | undefined;

  constructor(private readonly deps: RelayDeps) {}

  /** Starts contending to be the publisher (at once with PGlite). */
  start(): void {
    void this.contend();
    this.timers.push(setInterval(() => void this.poll(), RELAY_POLL_MS).unref());
    this.timers.push(setInterval(() => void this.prune(), PRUNE_EVERY_MS).unref());
  }

  /** After a commit that wrote events: the publisher publishes them now, or is told to. */
  wake(): void {
    if (this.closed) return;
    if (this.leading) return this.runs.request();
    if (this.wakePublished) return;
    this.wakePublished = true;
    setImmediate(() => {
      this.wakePublished = false;
      this.deps.events.publish(RELAY_WAKE_TOPIC, {}).catch(() => {
        // The publisher polls as well: a lost wake delays events, it loses none.
      });
    });
  }

  /** Positions and publishes what is committed now (the publisher only). Resolves when done. */
  async flush(): Promise<void> {
    if (!this.leading) return;
    this.runs.request();
    await this.runs.idle();
    await this.deps.consumers.flush();
  }

  /** One batch; true when it was full (more may be waiting). A failure may mean the role was lost. */
  private async runBatch(): Promise<boolean> {
    try {
      return (await this.runOnce()) === BATCH_SIZE;
    } catch (error) {
      // The statement may have positioned events whose rows never came back: the consumers read them from the log.
      this.lastPositioned = undefined;
      this.deps.logger.warn({ err: error }, "event relay: positioning failed");
      await this.stepDownIfLost();
      return false;
    }
  }

  private async runOnce(): Promise<number> {
    const session = this.session;
    if (!session || !this.publishing) return 0;
    // What failed to publish (Redis was away) goes first, in position order, and nothing newer is
    // positioned or published until it has gone: a subscriber never sees an event before an older
    // one, so none is skipped by a client that resumes from the newest position it holds.
    while (this.republishFrom !== undefined) {
      const rows = await session.query<PositionedRow>(POSITIONED_FROM, [this.republishFrom, BATCH_SIZE]);
      this.republishFrom = undefined;
      await this.publish(rows);
      if (this.republishFrom !== undefined) return 0; // still failing: the next poll tries again
      if (rows.length < BATCH_SIZE) break;
      this.republishFrom = Number(rows.at(-1)!.position) + 1;
    }
    const rows = await session.query<PositionedRow>(positionBatch(this.leaderPid), []);
    if (rows.length > 0) {
      const events: LoggedEvent[] = rows.map(toLoggedEvent).sort((a, b) => a.position - b.position);
      this.deps.consumers.positioned(events, this.lastPositioned);
      this.lastPositioned = events.at(-1)!.position;
    }
    await this.publish(rows);
    return this.republishFrom === undefined ? rows.length : 0;
  }

  /** Publishes in position order; the bus keeps the order of one publisher's messages. */
  private async publish(rows: PositionedRow[]): Promise<void> {
    if (rows.length === 0) return;
    const events = rows
      .map((row) => ({ stream: row.stream, busEvent: toBusEvent(toLoggedEvent(row)) }))
      .sort((a, b) => Number(a.busEvent.event.id) - Number(b.busEvent.event.id));
    const results = await this.deps.events.publishAll(
      events.map(({ stream, busEvent }) => ({ topic: stream, message: busEvent satisfies BusEvent })),
    );
    const failed = results.findIndex((result) => result.status === "rejected");
    if (failed !== -1) {
      const from = Number(events[failed]!.busEvent.event.id);
      this.republishFrom = Math.min(this.republishFrom ?? from, from);
      if (this.mayWarnOfPublish()) {
        this.deps.logger.warn(
          { err: (results[failed] as PromiseRejectedResult).reason, from },
          "event relay: publish failed; events wait in the store and go out in order once the bus is back",
        );
      }
    }
  }

  /**
   * Takes the publisher's role: at once with PGlite; with PostgreSQL, once the lock is granted
   * (the wait happens inside PostgreSQL, and ends when the current publisher's connection goes).
   */
  private async contend(): Promise<void> {
    if (this.closed || this.leading) return;
    try {
      this.session ??= await this.deps.database.session();
      if (this.deps.database.driver === "postgres") {
        const [own] = await this.session.query<{ pid: number }>("select pg_backend_pid() as pid", []);
        this.waitingPid = own?.pid;
        await this.session.query("select pg_advisory_lock($1)", [RELAY_LOCK_ID]);
        this.waitingPid = undefined;
        this.leaderPid = own?.pid ?? null;
      }
      if (this.closed) return await this.stepDown();
      this.leading = true;
      this.lastPositioned = undefined;
      const unsubscribe = await listen(this.deps.events, RELAY_WAKE_TOPIC, () => this.runs.request());
      const unlisten = await this.deps.database
        .listen(RELAY_NOTIFY_CHANNEL, () => this.runs.request())
        .catch((error: unknown) => {
          this.deps.logger.warn(
            { err: error },
            "event relay: could not LISTEN; writers without a relay wait for its poll",
          );
          return async () => {};
        });
      this.unsubscribeWake = () => {
        unsubscribe();
        void unlisten().catch(() => {});
      };
      this.deps.logger.debug("event relay: this process publishes live events");
      await this.deps.consumers.start();
      // The previous publisher may have positioned events and died before publishing them. They
      // go out before anything this process positions: wakes that came meanwhile wait for it.
      await this.publish(await this.session.query<PositionedRow>(RECENTLY_POSITIONED, [TAKEOVER_REPUBLISH_SECONDS]));
      this.publishing = this.leading;
      this.runs.request();
    } catch (error) {
      this.waitingPid = undefined;
      if (this.closed) return;
      this.deps.logger.warn({ err: error }, "event relay: could not contend for the publisher role");
      await this.stepDown();
      this.contendAgain = setTimeout(() => void this.contend(), CONTEND_AGAIN_MS).unref();
    }
  }

  /** The publisher's look for events nobody woke it for; with PostgreSQL, in the statement that checks the lock. */
  private async poll(): Promise<void> {
    if (!this.leading || this.closed || !this.session) return;
    try {
      const [row] = await this.session.query<{ pid: number | null; pending: boolean }>(
        this.leaderPid === null
          ? "select null::integer as pid, exists (select 1 from stream_events where position is null) as pending"
          : "select pg_backend_pid() as pid, exists (select 1 from stream_events where position is null) as pending",
        [],
      );
      if (this.leaderPid !== null && row?.pid !== this.leaderPid) throw new Error("the lock's connection was replaced");
      if (row?.pending) this.runs.request();
    } catch {
      if (this.leaderPid !== null) await this.lostRole();
    }
  }

  /** True when this process no longer holds the lock (its connection was lost or replaced). */
  private async stepDownIfLost(): Promise<boolean> {
    if (this.leaderPid === null || !this.session) return false;
    const stillHeld = await this.session
      .query<{ pid: number }>("select pg_backend_pid() as pid", [])
      .then(([row]) => row?.pid === this.leaderPid)
      .catch(() => false);
    if (stillHeld) return false;
    await this.lostRole();
    return true;
  }

  /** The lock's connection went (or was replaced): step down, and wait for the lock again. */
  private async lostRole(): Promise<void> {
    this.deps.logger.warn("event relay: lost the publisher role");
    await this.stepDown();
    void this.contend();
  }

  /**
   * Lets go of the role and of the connection. The lock is released first: a pooled connection
   * that kept it would keep every process from publishing.
   */
  private async stepDown(): Promise<void> {
    const wasLeading = this.leading;
    this.leading = false;
    this.publishing = false;
    this.lastPositioned = undefined;
    if (wasLeading) await this.deps.consumers.stop();
    this.unsubscribeWake?.();
    this.unsubscribeWake = undefined;
    const session = this.session;
    if (!session || this.deps.database.driver === "pglite") return;
    this.session = undefined;
    this.leaderPid = null;
    await session.query("select pg_advisory_unlock_all()", []).catch(() => {
      // A broken connection took its locks with it.
    });
    session.release();
  }

  /**
   * Deletes events past the retention window (the publisher only). The newest stays, so the
   * newest position stays known (a resume from a position above it is refused), and so does
   * every event a consumer of the log (server/consumers/) has not read yet.
   */
  private async prune(): Promise<void> {
    if (!this.leading || this.closed) return;
    const before = new Date(this.deps.clock.now().getTime() - EVENT_RETENTION_MS);
    await this.deps.database.db
      .delete(streamEvents)
      .where(
        and(
          lt(streamEvents.position, sql`(select max(${streamEvents.position}) from ${streamEvents})`),
          lt(streamEvents.createdAt, before),
          // Every consumer of the log has read it.
          lte(streamEvents.position, sql`(select coalesce(min(position), 0) from consumer_cursors)`),
        ),
      )
      .catch((error: unknown) => this.deps.logger.warn({ err: error }, "event relay: pruning failed"));
  }

  /** Publishes what is committed, then lets go of the role (at shutdown, before the database and bus close). */
  async close(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    clearTimeout(this.contendAgain);
    await this.flush().catch(() => {});
    this.closed = true;
    // A process still waiting for the lock: end the wait, so its connection can go.
    if (this.waitingPid !== undefined) {
      await this.deps.database.db.execute(sql`select pg_cancel_backend(${this.waitingPid})`).catch(() => {});
    }
    await this.stepDown();
  }
}
