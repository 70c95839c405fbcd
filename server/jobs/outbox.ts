// The job outbox: how every job is enqueued. A change writes its job rows in its own
// transaction (`enqueueJob`), so a job exists exactly when the change committed: a crash after
// the commit loses nothing, a rolled-back change leaves no job pointing at nothing. The relay
// below hands the rows to the queue (BullMQ with Redis, the in-process queue without) under
// their stable job ids; a row is deleted when its job has run, or failed for good
// (`settleOutboxJobs` wraps every handler).
//
// While Redis is away the rows wait in PostgreSQL and requests never wait on Redis: a hand-over
// that does not finish within HANDOVER_TIMEOUT_MS is abandoned and tried again later. A row
// handed over REHAND_AFTER_MS ago and still not done is handed again under the same job id:
// BullMQ ignores an id it holds (the job is waiting, running or retrying), and runs it if Redis
// lost it (restarted empty); the in-process queue likewise after a restart. Nothing is lost, and
// a repeated hand-over doubles nothing.
//
// Several processes may run the relay: each claims its rows with FOR UPDATE SKIP LOCKED.
import { randomUUID } from "node:crypto";
import { eq, inArray, sql, type SQL } from "drizzle-orm";
import { jsonOf, rowsOf, type Database, type Executor } from "../../db/client.ts";
import { arrayParam, runStatement } from "../../db/prepared.ts";
import { statementScope } from "../../db/statement-count.ts";
import { jobOutbox } from "../../db/schema/index.ts";
import type { Clock } from "../clock.ts";
import { oncePer, type Logger } from "../logger.ts";
import { RunLoop } from "../run-loop.ts";
import { within } from "../timeout.ts";
import {
  PermanentJobError,
  type EnqueueOptions,
  type JobDefinition,
  type JobHandlerEntry,
  type JobHandlers,
  type JobQueue,
  type QueuedJob,
} from "./definition.ts";

const BATCH_SIZE = 100;
/**
 * How often the relay looks for rows nobody woke it for (written by another process, or left by
 * a failure). Rows written here wake it; a delayed row or a rehand is woken by a timer at its time.
 */
const POLL_MS = 60_000;
/** How soon the relay looks again after the clock jumped (a test's ManualClock). */
const JUMP_NOTICED_MS = 500;
/** A hand-over slower than this is abandoned for now: the queue's Redis is away. */
export const HANDOVER_TIMEOUT_MS = 2_000;
/** A job handed over this long ago and not done is handed again (a no-op if the queue still holds it). */
export const REHAND_AFTER_MS = 15_000;

/**
 * Adds a job inside the caller's transaction; it reaches the queue once committed: the commit
 * wakes the relay of every process (a trigger NOTIFYs `chat_job_outbox`, which they LISTEN on).
 * With `onlyIf`, the job is added only when that SQL condition holds, in the same statement (a
 * job with nothing to do costs the queue and the database far more than the condition).
 * Resolves with whether a row was written (false: the condition failed, or the id is waiting).
 */
export async function enqueueJob<Payload>(
  tx: Executor,
  now: Date,
  definition: JobDefinition<Payload>,
  payload: Payload,
  options: EnqueueOptions & {
    onlyIf?: SQL;
    /**
     * A data-modifying statement (an INSERT … RETURNING) run first, in the same statement: the
     * job is added only when it returned rows. The rows and their job in one round trip.
     */
    onlyIfWritten?: SQL;
  } = {},
): Promise<boolean> {
  const job = { payload, jobId: options.jobId ?? `job-${randomUUID()}`, delayMs: options.delayMs };
  if (!options.onlyIf && !options.onlyIfWritten) return (await enqueueJobs(tx, now, definition, [job])) > 0;
  const row = outboxRow(now, definition, job);
  // A job id that is already waiting is not added twice (as BullMQ does with a known id).
  const condition = options.onlyIfWritten ? sql`exists (select 1 from written)` : options.onlyIf!;
  const result = await tx.execute(sql`
    ${options.onlyIfWritten ? sql`with written as (${options.onlyIfWritten})` : sql``}
    insert into ${jobOutbox} (name, payload, job_id, run_at, created_at)
    select ${row.name}, ${JSON.stringify(row.payload)}::jsonb, ${row.jobId},
      ${row.runAt?.toISOString() ?? null}::timestamptz, ${row.createdAt.toISOString()}::timestamptz
    where ${condition}
    on conflict (job_id) do nothing
    returning id`);
  return rowsOf(result).length > 0;
}

export type OutboxJob<Payload> = { payload: Payload; jobId: string; delayMs?: number | undefined };

/** The outbox row of a job: its payload checked, due at once or after `delayMs`. */
function outboxRow<Payload>(now: Date, definition: JobDefinition<Payload>, job: OutboxJob<Payload>) {
  // BullMQ refuses such an id; the row would then block the outbox's hand-over for good.
  if (job.jobId.includes(":")) throw new Error(`job id ${job.jobId} contains ":"`);
  return {
    name: definition.name,
    payload: definition.payload.parse(job.payload),
    jobId: job.jobId,
    runAt: job.delayMs ? new Date(now.getTime() + job.delayMs) : null,
    createdAt: now,
  };
}

/**
 * The job rows of `jobs` as a data-modifying statement for a CTE of the caller's one statement
 * (`jobs as (${jobRowsInsert(…)})`): each payload checked, ids already waiting skipped, one
 * row returned per row written. The same text whatever the number of jobs (a prepared statement
 * stays one).
 */
export function jobRowsInsert<Payload>(now: Date, definition: JobDefinition<Payload>, jobs: OutboxJob<Payload>[]): SQL {
  const rows = jobs.map((job) => outboxRow(now, definition, job));
  return sql`insert into ${jobOutbox} (name, payload, job_id, run_at, created_at)
    select ${definition.name}, j.payload::jsonb, j.job_id, j.run_at, ${now.toISOString()}::timestamptz
    from unnest(${arrayParam(rows.map((row) => JSON.stringify(row.payload)))}::text[],
      ${arrayParam(rows.map((row) => row.jobId))}::text[],
      ${arrayParam(rows.map((row) => row.runAt?.toISOString() ?? null))}::timestamptz[]) as j(payload, job_id, run_at)
    on conflict (job_id) do nothing
    returning 1`;
}

/**
 * Adds several jobs of one definition inside the caller's transaction, in one statement (ids
 * already waiting are skipped). Resolves with how many rows were written.
 */
export async function enqueueJobs<Payload>(
  tx: Executor,
  now: Date,
  definition: JobDefinition<Payload>,
  jobs: OutboxJob<Payload>[],
): Promise<number> {
  if (jobs.length === 0) return 0;
  return rowsOf(await tx.execute(jobRowsInsert(now, definition, jobs))).length;
}

/**
 * Every handler, wrapped so that its outbox row goes once the job is done: when it succeeds,
 * or fails for good (a permanent error, or its last attempt). Until then the row stays, and
 * the relay hands it over again if the queue lost it. A run's statements are counted under the
 * scope `job <job id>` (db/statement-count.ts; jobs that share a batch count where it runs).
 */
export function settleOutboxJobs(handlers: JobHandlers, db: Database): JobHandlers {
  const settle = gatherSettles(db);
  return new Map(
    [...handlers].map(([name, { definition, handle }]): [string, JobHandlerEntry] => [
      name,
      {
        definition,
        handle: async (payload, info) => {
          try {
            await statementScope(`job ${info.jobId}`, () => handle(payload, info));
          } catch (error) {
            if (error instanceof PermanentJobError || info.attempt >= definition.attempts) await settle(info.jobId);
            throw error;
          }
          await settle(info.jobId);
        },
      },
    ]),
  );
}

/**
 * Keeps a job's progress in its outbox row (the in-process queue's `persistProgress`): after a
 * restart the row is handed over again with this payload, so the job goes on from there.
 */
export function outboxProgress(db: Database): (jobId: string, payload: unknown) => Promise<void> {
  return async (jobId, payload) => {
    await runStatement(
      db,
      sql`update ${jobOutbox} set payload = ${JSON.stringify(payload)}::jsonb where ${jobOutbox.jobId} = ${jobId}`,
    );
  };
}

/** Rows one settling statement deletes at most. */
const SETTLE_BATCH = 1_000;

/**
 * Deletes the rows of finished jobs together: one statement at a time, and the jobs that finish
 * while it runs gather for the next (under load, one statement for many jobs; when quiet, one
 * per job at once). Each caller waits for its own row's deletion.
 */
function gatherSettles(db: Database): (jobId: string) => Promise<void> {
  let gathering: { jobIds: string[]; deleted: Promise<void> } | undefined;
  /** The statement running now (or the last one), which the next waits for. */
  let running: Promise<unknown> = Promise.resolve();
  return (jobId) => {
    if (!gathering || gathering.jobIds.length >= SETTLE_BATCH) {
      const batch = { jobIds: [] as string[], deleted: Promise.resolve() };
      batch.deleted = running
        .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
        .then(async () => {
          if (gathering === batch) gathering = undefined;
          // Prepared: one text whatever the number of ids.
          await runStatement(
            db,
            sql`delete from ${jobOutbox} where ${jobOutbox.jobId} = any(${arrayParam(batch.jobIds)}::text[])`,
          );
        });
      running = batch.deleted.catch(() => {});
      gathering = batch;
    }
    gathering.jobIds.push(jobId);
    return gathering.deleted;
  };
}

/** The channel on which a commit that wrote job rows wakes every process's relay (migration 0015). */
export const JOB_OUTBOX_CHANNEL = "chat_job_outbox";

type OutboxDeps = {
  db: Database;
  /** LISTEN (db/client.ts); without it (unit tests) the relay is woken by calls and its poll only. */
  listen?: (channel: string, onNotify: () => void) => Promise<() => Promise<void>>;
  jobs: JobQueue;
  /** The job definitions by name (the handlers' map, built after the outbox). */
  definitions: () => JobHandlers;
  clock: Clock;
  logger: Logger;
};

/** A claimed row, as the claim statement answers it (in id order). */
type ClaimedRow = { id: number; name: string; payload: unknown; job_id: string };

/**
 * Claims the next batch of due rows (not yet handed over and due, or handed over REHAND_AFTER_MS
 * ago and not done) and, when it is not full, says when the earliest row left will be due: a
 * delayed row's run_at, or a handed row's rehand (the rows claimed now included). The same text
 * every run: prepared, planned once per connection.
 */
function claimStatement(now: Date): SQL {
  const at = sql`${now.toISOString()}::timestamptz`;
  const rehand = sql`make_interval(secs => ${REHAND_AFTER_MS / 1000})`;
  return sql`
    with due as (
      select ${jobOutbox.id} from ${jobOutbox}
      where (${jobOutbox.handedAt} is null and (${jobOutbox.runAt} is null or ${jobOutbox.runAt} <= ${at}))
        or ${jobOutbox.handedAt} < ${at} - ${rehand}
      order by ${jobOutbox.id} limit ${BATCH_SIZE}
      for update skip locked),
    claimed as (
      update ${jobOutbox} set handed_at = ${at} where ${jobOutbox.id} in (select id from due)
      returning ${jobOutbox.id}, ${jobOutbox.name}, ${jobOutbox.payload}, ${jobOutbox.jobId})
    select coalesce((select json_agg(json_build_object('id', c.id, 'name', c.name, 'payload', c.payload, 'job_id', c.job_id)
        order by c.id) from claimed c), '[]') as claimed,
      case when (select count(*) from claimed) < ${BATCH_SIZE} then least(
        (select min(case when o.handed_at is null then coalesce(o.run_at, o.created_at) else o.handed_at + ${rehand} end)
          from ${jobOutbox} o where o.id not in (select id from claimed)),
        case when exists (select 1 from claimed) then ${at} + ${rehand} end)
      end as next_due`;
}

export class JobOutbox {
  private closed = false;
  /** Hands over committed rows, one batch at a time, until closed. */
  private readonly runs = new RunLoop(
    () => this.runBatch(),
    () => !this.closed,
  );
  private timer: NodeJS.Timeout | undefined;
  /** Wakes the relay when the next delayed row is due, or a handed row is due to be handed again. */
  private dueTimer: { at: number; timer: NodeJS.Timeout } | undefined;
  private runsStarted = 0;
  private unlisten: (() => Promise<void>) | undefined;
  /** At most one warning per 10 s while hand-overs fail. */
  private readonly mayWarn = oncePer();

  constructor(private readonly deps: OutboxDeps) {}

  start(): void {
    this.timer = setInterval(() => this.wake(), POLL_MS).unref();
    this.deps
      .listen?.(JOB_OUTBOX_CHANNEL, () => this.wake())
      .then((unlisten) => (this.unlisten = unlisten))
      .catch((error: unknown) => this.warn(error, "job outbox: could not LISTEN; jobs leave at the next look"));
    // A clock that jumps (tests) may have made a delayed row due: it is seen within half a
    // second, as a poll would see it, not in the middle of the request that follows the jump.
    this.deps.clock.onJump?.(() => {
      if (this.dueTimer) setTimeout(() => this.wake(), JUMP_NOTICED_MS).unref();
    });
    this.wake();
  }

  /** After a commit that wrote job rows: hand them over now. */
  wake(): void {
    if (!this.closed) this.runs.request();
  }

  /** Hands over what is committed now; resolves when done (tests, shutdown). */
  async flush(): Promise<void> {
    this.wake();
    await this.runs.idle();
  }

  /** One batch; true when it was full and all of it went (more may be waiting). */
  private async runBatch(): Promise<boolean> {
    try {
      const run = ++this.runsStarted;
      const { claimed, failed, nextDue } = await this.runOnce();
      // The queue is away: try again shortly, unless another run has started meanwhile.
      if (failed) setTimeout(() => run === this.runsStarted && this.wake(), HANDOVER_TIMEOUT_MS).unref();
      else if (nextDue !== null) this.wakeAt(nextDue);
      return !failed && claimed === BATCH_SIZE;
    } catch (error) {
      this.warn(error, "job outbox: could not read the outbox");
      return false;
    }
  }

  /**
   * One batch, in id order. The rows are claimed first, in one short statement that marks them
   * handed over (a lease: SKIP LOCKED keeps two processes off the same rows), and handed to the
   * queue outside any transaction, so a queue that hangs holds no database connection. Rows the
   * queue did not take are released for the next run; a process that dies holding a lease
   * leaves rows the rehand rule picks up. The same statement says when the earliest row left
   * will be due (when the batch was not full), for the timer that wakes the relay then.
   */
  private async runOnce(): Promise<{ claimed: number; failed: boolean; nextDue: number | null }> {
    const now = this.deps.clock.now();
    const result = await runStatement<{ claimed: unknown; next_due: Date | string | null }>(
      this.deps.db,
      claimStatement(now),
    );
    const claimed = jsonOf<ClaimedRow[]>(result?.claimed ?? []);
    const nextDue = result?.next_due ? new Date(result.next_due).getTime() : null;
    const jobs: (QueuedJob & { row: ClaimedRow })[] = [];
    for (const row of claimed) {
      const definition = this.deps.definitions().get(row.name)?.definition;
      if (definition) jobs.push({ row, definition, payload: row.payload, options: { jobId: row.job_id } });
      else {
        this.deps.logger.error({ job: row.name, outboxId: row.id }, "job outbox: no such job; dropped");
        await this.deps.db.delete(jobOutbox).where(eq(jobOutbox.id, row.id));
      }
    }
    if (jobs.length === 0) return { claimed: claimed.length, failed: false, nextDue };
    try {
      // The batch in one round trip to the queue.
      await within(this.deps.jobs.enqueueMany(jobs), HANDOVER_TIMEOUT_MS, "the queue taking jobs");
    } catch (error) {
      // The batch waits for the next run, in order (any the queue did take are not added twice).
      await this.deps.db
        .update(jobOutbox)
        .set({ handedAt: null, attempts: sql`${jobOutbox.attempts} + 1` })
        .where(
          inArray(
            jobOutbox.id,
            jobs.map((job) => job.row.id),
          ),
        );
      this.warn(error, "job outbox: the queue is unreachable; the jobs wait in the outbox");
      return { claimed: claimed.length, failed: true, nextDue };
    }
    return { claimed: claimed.length, failed: false, nextDue };
  }

  private wakeAt(at: number): void {
    if (this.closed || (this.dueTimer && this.dueTimer.at <= at)) return;
    if (this.dueTimer) clearTimeout(this.dueTimer.timer);
    const delay = Math.max(0, at - this.deps.clock.now().getTime()) + 5;
    this.dueTimer = {
      at,
      timer: setTimeout(
        () => {
          this.dueTimer = undefined;
          this.wake();
        },
        Math.min(delay, POLL_MS),
      ).unref(),
    };
  }

  private warn(error: unknown, message: string): void {
    if (this.mayWarn()) this.deps.logger.warn({ err: error }, message);
  }

  /** Hands over what is committed, then stops (at shutdown, before the queue and database close). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.unlisten?.().catch(() => {});
    if (this.dueTimer) clearTimeout(this.dueTimer.timer);
    await this.flush().catch(() => {});
    this.closed = true;
    await this.runs.idle();
  }
}
