// The consumer kit: everything that follows a change (push, translation, outbound webhooks, and
// whatever comes next) is a consumer of the positioned event log. A consumer declares which
// event types it reads and what it does with a batch of them; the kit feeds it, keeps its
// cursor and retries it.
//
// How a batch reaches a consumer: the relay (server/events/relay.ts) positions committed events
// a batch at a time and hands the kit the rows it has just positioned, with the position it had
// reached before them. A consumer whose cursor stands exactly there takes the batch from memory
// (no read at all); any other consumer (just started, after a failure, after another process led)
// reads the events after its cursor from the log first. So in the steady state a consumer costs
// nothing to read, and one statement per batch that has work for it.
//
// Exactly once: a consumer writes its work and moves its cursor in one statement (or one
// transaction), and only from the position it read (compare-and-set on consumer_cursors). A
// crash before the commit leaves the cursor, so the batch is read again; after it, the work is
// there (jobs carry stable ids). A batch with no work for a consumer moves its cursor in memory
// only; the row follows lazily (with its next work, within PERSIST_IDLE_MS, or at shutdown), and
// a consumer that reads such events again after a crash finds no work in them again.
import { arrayParam } from "../../db/prepared.ts";
import { sql, type SQL } from "drizzle-orm";
import { jsonOf, rowsOf, type Database, type Executor } from "../../db/client.ts";
import { consumerCursors, streamEvents } from "../../db/schema/index.ts";
import type { EventPayload } from "../events/streams.ts";
import { oncePer, type Logger } from "../logger.ts";
import { retryDelayMs, type Backoff } from "../jobs/backoff.ts";
import { setTimeout as sleep } from "node:timers/promises";

/** An event of the log, positioned. */
export type LoggedEvent = { position: number; createdAt: Date; payload: EventPayload };

/** What a consumer's `handle` did with its batch. */
export type BatchResult =
  /** Nothing to do in this batch: the kit moves the cursor (lazily). */
  | "nothing"
  /** Work written, and the cursor moved with it (through `moveCursor`/`cursorMoveCte`). */
  | { wrote: "jobs" | "rows" }
  /** The cursor was not where the consumer read from (another process moved it): read again. */
  | "moved_elsewhere";

/** How a consumer moves its cursor with its work. */
export type CursorMove = {
  /**
   * A CTE `moved as (update consumer_cursors …)` returning a row only when the cursor was at
   * the batch's start: the consumer's writes in the same statement go `where exists (select 1 from moved)`.
   */
  cte: SQL;
  /** The same inside a transaction: false means the cursor had moved elsewhere (roll back). */
  inTransaction(tx: Executor): Promise<boolean>;
};

export interface Consumer {
  /** Its row in consumer_cursors. */
  readonly name: string;
  /** The event types it reads; other events pass by at no cost. */
  readonly types: ReadonlySet<string>;
  /**
   * Events after which `refresh` runs before the batch is handled (state the consumer keeps in
   * memory to skip batches without a query, such as "no device is registered anywhere").
   */
  readonly refreshOn?: ReadonlySet<string>;
  refresh?(): Promise<void>;
  /**
   * Work that may wait a little (an author's read position, a push): the kit hands the consumer what accumulated
   * at most this many milliseconds after the first event of it, in one batch, instead of every
   * batch the relay positions, so that a busy log costs it one write per period rather than one
   * statement per batch. The kit keeps the batches it was handed meanwhile (its events only), so
   * the turn reads nothing from the log when they continue its cursor. Nothing is lost meanwhile:
   * its cursor moves only with its work.
   */
  readonly coalesceMs?: number;
  /** The work of one batch (only events of `types`; never empty). */
  handle(events: LoggedEvent[], move: CursorMove): Promise<BatchResult>;
  /**
   * Work over what existed before the consumer started (it starts at the newest position, so it
   * never reads history from the log): the leading process runs it in the background, a step at
   * a time, until a step answers "done". Each step keeps its own progress, so a restart or a new
   * leader continues where it stopped.
   */
  backfillStep?(): Promise<"more" | "done">;
}

/**
 * The `coalesceMs` of a consumer whose work a reader watches arrive (translation): a tenth of a
 * second later at most, one statement (and one job) per tenth of a second of posts instead of
 * one per batch the relay positions, which under load is every few milliseconds.
 */
export const PROMPT_COALESCE_MS = 100;

/**
 * The `coalesceMs` of the consumers whose work leaves for another service that takes longer
 * itself (push providers, webhooks' receivers): a quarter of a second. Each batch costs a
 * statement and a job (the queue's work, its outbox row) whatever it carries.
 */
export const SENDS_COALESCE_MS = 250;

/** A consumer's cursor row is written this long after an idle batch moved it, at the latest. */
const PERSIST_IDLE_MS = 30_000;
/** Events read per statement while catching up. */
const CATCH_UP_BATCH = 500;
const RETRY: Backoff = { firstMs: 1_000, longestMs: 30_000, longestRetryAfterMs: 30_000 };
/** The pause between two backfill steps, so that a backfill leaves the database to the requests. */
const BACKFILL_PAUSE_MS = 20;
/** The most events a coalescing consumer keeps in memory for its next turn; past it, the turn reads the log. */
const MAX_HELD_EVENTS = 10_000;

/** Events the relay positioned after `after`, up to `to` (only those a consumer reads), in order. */
type Segment = { after: number; to: number; events: LoggedEvent[] };

type State = {
  consumer: Consumer;
  /** A coalescing consumer's next turn (Consumer.coalesceMs), while one is due. */
  coalesce?: NodeJS.Timeout;
  /** A coalescing consumer: what the relay handed over since its last turn, while it continues the cursor. */
  held?: Segment | undefined;
  /** A coalescing consumer: where the segment its turn took ends (the next one must start there). */
  takenTo?: number | undefined;
  /** Done up to here (in memory); undefined until loaded. */
  position: number | undefined;
  /** What consumer_cursors holds (the compare-and-set's expected value). */
  persisted: number | undefined;
  failures: number;
  retry?: NodeJS.Timeout;
};

type KitDeps = { db: Database; logger: Logger };

export class ConsumerKit {
  private readonly states: State[];
  /** The newest position the relay has handed over. */
  private reached = 0;
  private chain: Promise<void> = Promise.resolve();
  private running = false;
  private persistTimer: NodeJS.Timeout | undefined;
  private readonly mayWarn = oncePer();
  /** The backfills running, and how to stop their pauses. */
  private backfills: Promise<void>[] = [];
  private stopBackfills = new AbortController();

  constructor(
    private readonly deps: KitDeps,
    consumers: Consumer[],
  ) {
    this.states = consumers.map((consumer) => ({ consumer, position: undefined, persisted: undefined, failures: 0 }));
  }

  /**
   * This process has become the relay: load the cursors (a consumer seen for the first time
   * starts at the newest position: it does not work through history), drop those of consumers
   * it does not run, and load the consumers' state.
   */
  async start(): Promise<void> {
    if (this.states.length === 0) return;
    this.running = true;
    await this.serially(async () => {
      const names = this.states.map((state) => state.consumer.name);
      const rows = rowsOf<{ name: string; position: string }>(
        await this.deps.db.execute(sql`
          with dropped as (
            -- A consumer this server no longer runs (translation turned off) must not hold back
            -- pruning; turned on again, it starts afresh at the newest position.
            delete from ${consumerCursors} where not (name = any(${arrayParam(names)}::text[]))),
          created as (
            insert into ${consumerCursors} (name, position)
            select unnest(${arrayParam(names)}::text[]), coalesce((select max(position) from ${streamEvents}), 0)
            on conflict (name) do nothing returning name, position)
          select name, position::text as position from created
          union all select name, position::text from ${consumerCursors} where name = any(${arrayParam(names)}::text[])`),
      );
      for (const state of this.states) {
        const row = rows.find((candidate) => candidate.name === state.consumer.name);
        state.position = state.persisted = row ? Number(row.position) : 0;
        this.reached = Math.max(this.reached, state.position);
      }
      await Promise.all(this.states.map((state) => state.consumer.refresh?.()));
    }).catch((error: unknown) => this.warn(error, "consumers: could not load their cursors"));
    this.stopBackfills = new AbortController();
    this.backfills = this.states.flatMap(({ consumer }) =>
      consumer.backfillStep ? [this.backfill(consumer.name, () => consumer.backfillStep!())] : [],
    );
  }

  /** Runs one consumer's backfill to its end (or until the kit stops), retrying a failed step. */
  private async backfill(name: string, step: () => Promise<"more" | "done">): Promise<void> {
    const { signal } = this.stopBackfills;
    let failures = 0;
    while (this.running && !signal.aborted) {
      let pauseMs = BACKFILL_PAUSE_MS;
      try {
        if ((await step()) === "done") return;
        failures = 0;
      } catch (error) {
        this.warn(error, `consumers: the ${name} backfill failed; it will go on from where it stopped`);
        failures += 1;
        pauseMs = retryDelayMs(RETRY, failures + 1, undefined);
      }
      await sleep(pauseMs, undefined, { signal, ref: false }).catch(() => {});
    }
  }

  /** Resolves when the backfills started have finished (or stopped). */
  async backfilled(): Promise<void> {
    await Promise.all(this.backfills);
  }

  /**
   * The relay positioned `events`, the first of them after `after` (undefined: not known, e.g.
   * the relay's first batch): each consumer handles them, in order, after what it has pending.
   */
  positioned(events: LoggedEvent[], after: number | undefined): void {
    if (!this.running || events.length === 0) return;
    const to = events.at(-1)!.position;
    this.reached = Math.max(this.reached, to);
    for (const state of this.states) if (state.consumer.coalesceMs !== undefined) this.hold(state, events, after, to);
    void this.serially(async () => {
      for (const state of this.states) {
        if (state.consumer.coalesceMs !== undefined) this.scheduleCoalesced(state);
        else await this.advance(state, after === undefined ? undefined : { after, to, events }, to);
      }
    });
  }

  /** Keeps a batch for a coalescing consumer's next turn when it continues what it has; else its turn reads the log. */
  private hold(state: State, events: LoggedEvent[], after: number | undefined, to: number): void {
    const { consumer } = state;
    const mine = events.filter(
      (event) => consumer.types.has(event.payload.type) || consumer.refreshOn?.has(event.payload.type),
    );
    const held = state.held;
    if (held && after === held.to && held.events.length + mine.length <= MAX_HELD_EVENTS) {
      held.events.push(...mine);
      held.to = to;
    } else if (!held && after !== undefined && after === (state.takenTo ?? state.position)) {
      state.held = { after, to, events: mine };
    } else {
      state.held = undefined;
      state.takenTo = undefined;
    }
  }

  /** A coalescing consumer's turn comes `coalesceMs` after the first batch it has not seen. */
  private scheduleCoalesced(state: State): void {
    if (state.coalesce || !this.running) return;
    state.coalesce = setTimeout(() => {
      state.coalesce = undefined;
      if (!this.running) return;
      void this.serially(() => this.coalescedTurn(state));
    }, state.consumer.coalesceMs).unref();
  }

  /** A coalescing consumer's turn: what it holds, then the log for anything beyond. */
  private coalescedTurn(state: State): Promise<void> {
    const held = state.held;
    const upTo = this.reached;
    state.held = undefined;
    // The turn goes to `upTo` (past what it held, by reading the log, when the relay handed more
    // than it could hold): the batches handed after it continue from there.
    state.takenTo = upTo;
    return this.advance(state, held, upTo);
  }

  /** Resolves when every batch handed over so far has been handled (tests, shutdown). */
  async flush(): Promise<void> {
    // Coalescing consumers take their turn now.
    for (const state of this.states) {
      if (!state.coalesce) continue;
      clearTimeout(state.coalesce);
      state.coalesce = undefined;
      void this.serially(() => this.coalescedTurn(state));
    }
    await this.chain;
  }

  /** This process stops leading (or shuts down): writes the idle cursors and stops. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopBackfills.abort();
    await this.backfilled();
    clearTimeout(this.persistTimer);
    for (const state of this.states) {
      clearTimeout(state.retry);
      clearTimeout(state.coalesce);
      state.coalesce = undefined;
      state.held = state.takenTo = undefined;
    }
    await this.serially(() => this.persistIdle());
  }

  private serially(task: () => Promise<void>): Promise<void> {
    const next = this.chain.then(task, task);
    this.chain = next.catch(() => {});
    return next;
  }

  /** Brings one consumer up to `upTo`, from the batch in memory when it continues its cursor. */
  private async advance(state: State, batch: Segment | undefined, upTo: number): Promise<void> {
    if (state.position === undefined || state.retry) return; // not loaded, or waiting to retry
    try {
      if (batch && state.position === batch.after) {
        await this.handle(state, batch.events, batch.to);
      }
      while (state.position < upTo) {
        const events = await this.read(state.position, upTo);
        if (events.length === 0) {
          state.position = upTo;
          break;
        }
        await this.handle(state, events, events.at(-1)!.position);
      }
      state.failures = 0;
    } catch (error) {
      this.warn(error, `consumers: ${state.consumer.name} failed; it will read its events again`);
      state.failures += 1;
      state.held = state.takenTo = undefined;
      // Re-read the cursor from the database on the retry, in case another process moved it.
      state.retry = setTimeout(
        () => {
          state.retry = undefined;
          if (!this.running) return;
          void this.serially(async () => {
            await this.reload(state);
            await this.advance(state, undefined, this.reached);
          });
        },
        retryDelayMs(RETRY, state.failures + 1, undefined),
      ).unref();
    }
  }

  /** Handles `events` (which may hold other types: they pass by) and moves the cursor to `to`. */
  private async handle(state: State, events: LoggedEvent[], to: number): Promise<void> {
    const { consumer } = state;
    if (consumer.refreshOn && events.some((event) => consumer.refreshOn!.has(event.payload.type))) {
      await consumer.refresh?.();
    }
    const mine = events.filter((event) => consumer.types.has(event.payload.type));
    const result = mine.length === 0 ? "nothing" : await consumer.handle(mine, this.cursorMove(state, to));
    if (result === "moved_elsewhere") throw new Error(`the ${consumer.name} cursor was moved by another process`);
    state.position = to;
    if (result === "nothing") return this.schedulePersist();
    // Jobs written wake the job outbox through their commit (its NOTIFY trigger).
    state.persisted = to;
  }

  private cursorMove(state: State, to: number): CursorMove {
    const update = sql`update ${consumerCursors} set position = ${to}, updated_at = now()
      where name = ${state.consumer.name} and position = ${state.persisted!} returning 1`;
    return {
      cte: sql`moved as (${update})`,
      inTransaction: async (tx) => rowsOf(await tx.execute(update)).length > 0,
    };
  }

  /** The events after `position`, up to `upTo`, oldest first. */
  private read(position: number, upTo: number): Promise<LoggedEvent[]> {
    return readLoggedEvents(this.deps.db, position, upTo, CATCH_UP_BATCH);
  }

  private async reload(state: State): Promise<void> {
    const [row] = rowsOf<{ position: string }>(
      await this.deps.db.execute(
        sql`select position::text as position from ${consumerCursors} where name = ${state.consumer.name}`,
      ),
    );
    if (row) state.position = state.persisted = Number(row.position);
  }

  private schedulePersist(): void {
    if (this.persistTimer || !this.running) return;
    this.persistTimer = setTimeout(() => {
      this.persistTimer = undefined;
      void this.serially(() => this.persistIdle());
    }, PERSIST_IDLE_MS).unref();
  }

  /** Writes the cursors that idle batches moved, in one statement (each only from where it was). */
  private async persistIdle(): Promise<void> {
    const behind = this.states.filter(
      (state) => state.position !== undefined && state.persisted !== undefined && state.position > state.persisted,
    );
    if (behind.length === 0) return;
    try {
      await this.deps.db.execute(sql`
        update ${consumerCursors} c set position = v.position, updated_at = now()
        from (select unnest(${arrayParam(behind.map((state) => state.consumer.name))}::text[]) as name,
          unnest(${arrayParam(behind.map((state) => state.persisted!))}::bigint[]) as expected,
          unnest(${arrayParam(behind.map((state) => state.position!))}::bigint[]) as position) v
        where c.name = v.name and c.position = v.expected`);
      // A row another process moved meanwhile is re-read by the next batch's compare-and-set.
      for (const state of behind) state.persisted = state.position;
    } catch (error) {
      this.warn(error, "consumers: could not write their cursors");
    }
  }

  private warn(error: unknown, message: string): void {
    if (this.mayWarn()) this.deps.logger.warn({ err: error }, message);
  }
}

/**
 * What a consumer's one statement did, from its final `select … as moved, … as jobs` (the rows of
 * `moved`, the cursor's CTE, and of the jobs it wrote).
 */
export function batchResultOf(row: { moved: number; jobs: number } | undefined): BatchResult {
  if (!row?.moved) return "moved_elsewhere";
  return { wrote: row.jobs > 0 ? "jobs" : "rows" };
}

/** At most `limit` events of the log after `after`, up to `upTo`, in the order of their positions. */
export async function readLoggedEvents(
  db: Database,
  after: number,
  upTo: number,
  limit: number,
): Promise<LoggedEvent[]> {
  // Ordered by the column, not by the text the select answers (in which "10" comes before "9").
  const rows = rowsOf<{ position: string; created_at: Date | string; payload: unknown }>(
    await db.execute(sql`
      select position::text as position, created_at, payload from ${streamEvents}
      where position > ${after} and position <= ${upTo}
      order by ${streamEvents.position} limit ${limit}`),
  );
  return rows.map(toLoggedEvent);
}

export function toLoggedEvent(row: {
  position: string | number;
  created_at: Date | string;
  payload: unknown;
}): LoggedEvent {
  return {
    position: Number(row.position),
    createdAt: new Date(row.created_at),
    payload: jsonOf<EventPayload>(row.payload),
  };
}
