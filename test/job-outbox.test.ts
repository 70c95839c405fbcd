// The job outbox (server/jobs/outbox.ts): a change's jobs are rows written in its transaction;
// the relay hands them to the queue under stable ids, waits while the queue is unreachable, hands
// a job again when the queue lost it, and the row goes once the job has run or failed for good.
// The relay tests use a database of their own (no server's relay competing for its rows) and a
// test's own JobQueue, so that the queue can refuse, hang and forget on cue; the server-level
// behaviour (Redis really stopped and restarted empty) is in test/faults/redis-outage.test.ts.
import { randomBytes } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, type DatabaseHandle } from "../db/client.ts";
import { z } from "zod";
import { jobOutbox } from "../db/schema/index.ts";
import { ManualClock } from "../server/clock.ts";
import {
  defineJob,
  jobHandler,
  PermanentJobError,
  type EnqueueOptions,
  type JobDefinition,
  type JobHandlers,
  type JobQueue,
  type QueuedJob,
} from "../server/jobs/definition.ts";
import { BullMqJobQueue, startBullMqWorkers } from "../server/jobs/bullmq.ts";
import { InProcessJobQueue } from "../server/jobs/in-process.ts";
import { enqueueJob, JobOutbox, outboxProgress, REHAND_AFTER_MS, settleOutboxJobs } from "../server/jobs/outbox.ts";
import { createLogger } from "../server/logger.ts";
import { registerUser } from "./helpers/factories.ts";
import { createDatabase, useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();

let database: DatabaseHandle;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  const dataDir = await mkdtemp(path.join(tmpdir(), "chat-outbox-"));
  const created = process.env.DATABASE_URL ? await createDatabase(process.env.DATABASE_URL) : undefined;
  database = await openDatabase({ databaseUrl: created?.url, dataDir });
  cleanup = async () => {
    await database.close();
    await created?.drop();
    await rm(dataDir, { recursive: true, force: true });
  };
});
afterAll(() => cleanup?.());
const db = () => database.db;

const probeJob = defineJob({
  queue: "maintenance",
  name: "test.outbox-probe",
  payload: z.object({ n: z.number().int() }),
  attempts: 2,
  backoffMs: 10,
});

/** A queue that remembers job ids like BullMQ does, and can refuse or hang on cue. */
class ScriptedQueue implements JobQueue {
  mode: "take" | "refuse" | "hang" = "take";
  readonly held = new Map<string, unknown>();
  readonly handed: string[] = [];
  /** The job ids of each `enqueueMany` call. */
  readonly batches: string[][] = [];
  async enqueue<Payload>(_definition: JobDefinition<Payload>, payload: Payload, options: EnqueueOptions = {}) {
    if (this.mode === "refuse") throw new Error("Connection is closed.");
    if (this.mode === "hang") return new Promise<void>(() => {});
    this.handed.push(options.jobId!);
    if (!this.held.has(options.jobId!)) this.held.set(options.jobId!, payload);
  }
  async enqueueMany(jobs: QueuedJob[]) {
    this.batches.push(jobs.map((job) => job.options!.jobId!));
    for (const job of jobs) await this.enqueue(job.definition, job.payload, job.options);
  }
  async repeat() {}
  async close() {}
}

const outboxes: JobOutbox[] = [];
afterEach(async () => {
  for (const outbox of outboxes.splice(0)) await outbox.close();
  await db().delete(jobOutbox).where(eq(jobOutbox.name, probeJob.name));
});

function outboxWith(queue: JobQueue, clock = new ManualClock()) {
  const handlers: JobHandlers = new Map([jobHandler(probeJob, async () => {})]);
  const outbox = new JobOutbox({
    db: db(),
    jobs: queue,
    definitions: () => handlers,
    clock,
    logger: createLogger("silent"),
  });
  outboxes.push(outbox);
  return { outbox, clock };
}

const probeRows = () => db().select().from(jobOutbox).where(eq(jobOutbox.name, probeJob.name)).orderBy(jobOutbox.id);

describe("enqueueJob", () => {
  it("writes nothing when the change's transaction rolls back", async () => {
    await db()
      .transaction(async (tx) => {
        await enqueueJob(tx, new Date(), probeJob, { n: 1 });
        throw new Error("the change failed");
      })
      .catch(() => {});
    expect(await probeRows()).toEqual([]);
  });

  it("refuses a payload that does not match the job's schema, and adds a known job id once", async () => {
    await expect(enqueueJob(db(), new Date(), probeJob, { n: "one" } as never)).rejects.toThrow();
    await enqueueJob(db(), new Date(), probeJob, { n: 1 }, { jobId: "probe-once" });
    await enqueueJob(db(), new Date(), probeJob, { n: 2 }, { jobId: "probe-once" });
    expect((await probeRows()).map((row) => row.payload)).toEqual([{ n: 1 }]);
  });
});

describe("the outbox relay", () => {
  it("hands jobs over in order under their ids, and keeps the rows until the jobs are done", async () => {
    const queue = new ScriptedQueue();
    const { outbox } = outboxWith(queue);
    for (const n of [1, 2, 3]) await enqueueJob(db(), new Date(), probeJob, { n }, { jobId: `probe-order-${n}` });
    const mark = database.statements.total();
    await outbox.flush();
    expect(queue.handed).toEqual(["probe-order-1", "probe-order-2", "probe-order-3"]);
    // The claim and the time of the next due row are one statement; the hand-over is the queue's.
    expect(database.statements.since(mark).statements.map((statement) => statement.text)).toEqual([
      expect.stringMatching(/^\s*with due as/),
    ]);
    // One hand-over for the batch (with BullMQ: one pipeline per queue).
    expect(queue.batches).toEqual([["probe-order-1", "probe-order-2", "probe-order-3"]]);
    const rows = await probeRows();
    expect(rows).toHaveLength(3);
    expect(rows.every((row) => row.handedAt !== null)).toBe(true);
  });

  it("while the queue refuses or hangs, the jobs wait; they leave once it takes them", async () => {
    const queue = new ScriptedQueue();
    const { outbox } = outboxWith(queue);
    queue.mode = "refuse";
    await enqueueJob(db(), new Date(), probeJob, { n: 1 }, { jobId: "probe-wait-1" });
    await outbox.flush();
    expect((await probeRows())[0]).toMatchObject({ handedAt: null, attempts: 1 });

    queue.mode = "hang";
    const started = Date.now();
    await outbox.flush();
    // A hang costs one bounded wait, not a stuck relay.
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((await probeRows())[0]).toMatchObject({ handedAt: null, attempts: 2 });

    queue.mode = "take";
    await outbox.flush();
    expect(queue.handed).toEqual(["probe-wait-1"]);
    expect((await probeRows())[0]!.handedAt).not.toBeNull();
  });

  it("hands a job again when it is not done a while later: the queue runs it if it lost it, ignores it if not", async () => {
    const queue = new ScriptedQueue();
    const { outbox, clock } = outboxWith(queue);
    await enqueueJob(db(), new Date(), probeJob, { n: 1 }, { jobId: "probe-rehand" });
    await outbox.flush();
    expect(queue.handed).toEqual(["probe-rehand"]);

    await outbox.flush();
    expect(queue.handed).toHaveLength(1); // not yet

    queue.held.clear(); // Redis restarted empty
    clock.advance(REHAND_AFTER_MS + 1_000);
    await outbox.flush();
    expect(queue.handed).toEqual(["probe-rehand", "probe-rehand"]);
    expect(queue.held.has("probe-rehand")).toBe(true);
  });
});

describe.skipIf(!process.env.REDIS_URL)("BullMQ: several jobs handed over at once", () => {
  it("runs each job of a batch spanning queues once, a known id not twice; refuses a bad payload", async () => {
    const otherQueueJob = defineJob({ ...probeJob, queue: "push", name: "test.outbox-probe-push" });
    const ran: string[] = [];
    const handlers: JobHandlers = new Map([
      jobHandler(probeJob, async ({ n }) => void ran.push(`maintenance ${n}`)),
      jobHandler(otherQueueJob, async ({ n }) => void ran.push(`push ${n}`)),
    ]);
    const prefix = `test-bulk-${randomBytes(6).toString("hex")}`;
    const queue = new BullMqJobQueue(process.env.REDIS_URL!, prefix, createLogger("silent"));
    const stopWorkers = startBullMqWorkers({
      redisUrl: process.env.REDIS_URL!,
      prefix,
      handlers,
      logger: createLogger("silent"),
    });
    try {
      await queue.enqueueMany([
        { definition: probeJob, payload: { n: 1 }, options: { jobId: "bulk-1" } },
        { definition: otherQueueJob, payload: { n: 2 }, options: { jobId: "bulk-2" } },
        { definition: probeJob, payload: { n: 1 }, options: { jobId: "bulk-1" } },
        { definition: probeJob, payload: { n: 3 }, options: { jobId: "bulk-3", delayMs: 50 } },
      ]);
      await until(() => (ran.length >= 3 ? true : undefined), "the three jobs");
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(ran.sort()).toEqual(["maintenance 1", "maintenance 3", "push 2"]);
      await expect(
        queue.enqueueMany([{ definition: probeJob, payload: { n: "four" }, options: { jobId: "bulk-4" } }]),
      ).rejects.toThrow();
    } finally {
      await stopWorkers();
      await Promise.all(queue.allQueues().map((each) => each.obliterate({ force: true }).catch(() => {})));
      await queue.close();
    }
  });
});

describe("a job's progress", () => {
  /** A job that saves n + 10 and fails on its first try, and records what each try was given. */
  const progressing = (seen: number[]): JobHandlers =>
    new Map([
      jobHandler(probeJob, async ({ n }, { attempt, saveProgress }) => {
        seen.push(n);
        if (attempt === 1) {
          await saveProgress({ n: n + 10 });
          throw new Error("died after its first step");
        }
      }),
    ]);

  it("in process: the retry gets the saved payload, and the outbox row keeps it for a run after a restart", async () => {
    const seen: number[] = [];
    const handlers = progressing(seen);
    await enqueueJob(db(), new Date(), probeJob, { n: 1 }, { jobId: "probe-progress" });
    const queue = new InProcessJobQueue(() => handlers, createLogger("silent"), outboxProgress(db()));
    try {
      await queue.enqueue(probeJob, { n: 1 }, { jobId: "probe-progress" });
      await until(() => (seen.length === 2 ? true : undefined), "the retry");
      expect(seen).toEqual([1, 11]);
      const [row] = await db().select().from(jobOutbox).where(eq(jobOutbox.jobId, "probe-progress"));
      expect(row?.payload).toEqual({ n: 11 });
    } finally {
      await queue.close();
      await db().delete(jobOutbox).where(eq(jobOutbox.jobId, "probe-progress"));
    }
  });

  it.skipIf(!process.env.REDIS_URL)("BullMQ: the retry gets the saved payload", async () => {
    const seen: number[] = [];
    const prefix = `test-progress-${randomBytes(6).toString("hex")}`;
    const queue = new BullMqJobQueue(process.env.REDIS_URL!, prefix, createLogger("silent"));
    const stopWorkers = startBullMqWorkers({
      redisUrl: process.env.REDIS_URL!,
      prefix,
      handlers: progressing(seen),
      logger: createLogger("silent"),
    });
    try {
      await queue.enqueue(probeJob, { n: 1 }, { jobId: "probe-progress" });
      await until(() => (seen.length === 2 ? true : undefined), "the retry");
      expect(seen).toEqual([1, 11]);
    } finally {
      await stopWorkers();
      await Promise.all(queue.allQueues().map((each) => each.obliterate({ force: true }).catch(() => {})));
      await queue.close();
    }
  });
});

/** A run's progress, not kept (these jobs have none). */
const noProgress = async () => {};

describe("settling", () => {
  it("deletes the row when the job succeeds, or fails for good; keeps it while retries remain", async () => {
    const outcomes: (() => Promise<void>)[] = [];
    const handlers: JobHandlers = new Map([jobHandler(probeJob, () => outcomes.shift()!())]);
    const settled = settleOutboxJobs(handlers, db()).get(probeJob.name)!;
    for (const jobId of ["probe-ok", "probe-retry", "probe-last", "probe-permanent"])
      await enqueueJob(db(), new Date(), probeJob, { n: 1 }, { jobId });
    const remaining = async () => (await probeRows()).map((row) => row.jobId);

    outcomes.push(async () => {});
    await settled.handle({ n: 1 }, { attempt: 1, jobId: "probe-ok", saveProgress: noProgress });
    outcomes.push(async () => Promise.reject(new Error("SMTP down")));
    await expect(
      settled.handle({ n: 1 }, { attempt: 1, jobId: "probe-retry", saveProgress: noProgress }),
    ).rejects.toThrow("SMTP down");
    outcomes.push(async () => Promise.reject(new Error("SMTP down")));
    await expect(
      settled.handle({ n: 1 }, { attempt: 2, jobId: "probe-last", saveProgress: noProgress }),
    ).rejects.toThrow("SMTP down");
    outcomes.push(async () => Promise.reject(new PermanentJobError("no such user")));
    await expect(
      settled.handle({ n: 1 }, { attempt: 1, jobId: "probe-permanent", saveProgress: noProgress }),
    ).rejects.toThrow("no such user");

    expect(await remaining()).toEqual(["probe-retry"]);
  });

  // PGlite runs a statement on this thread: no job finishes while it runs.
  it.skipIf(!process.env.DATABASE_URL)("jobs that finish while a deletion runs share the next statement", async () => {
    const handlers: JobHandlers = new Map([jobHandler(probeJob, async () => {})]);
    const settled = settleOutboxJobs(handlers, db()).get(probeJob.name)!;
    const jobIds = Array.from({ length: 40 }, (_, index) => `probe-gather-${index}`);
    for (const jobId of jobIds) await enqueueJob(db(), new Date(), probeJob, { n: 1 }, { jobId });
    const mark = database.statements.total();
    // One job finishing per turn of the event loop, as a worker's jobs finish under load.
    await Promise.all(
      jobIds.map(async (jobId, index) => {
        for (let turn = 0; turn < index; turn++) await new Promise((resolve) => setImmediate(resolve));
        await settled.handle({ n: 1 }, { attempt: 1, jobId, saveProgress: noProgress });
      }),
    );
    const deletes = database.statements
      .since(mark)
      .statements.filter((statement) => /^delete from "job_outbox"/.test(statement.text));
    expect(await probeRows()).toEqual([]);
    // One per job when each finished deletion waits for no other (40); gathered, far fewer.
    expect(deletes.length).toBeGreaterThan(0);
    expect(deletes.length).toBeLessThanOrEqual(10);
  });
});

describe("the mail jobs of a change", () => {
  it("registration writes its verification job in its own transaction; the row is gone once the mail is sent", async () => {
    const serverDb = ctx.server.app.deps.db;
    const user = await registerUser(ctx.api);
    const jobRows = () =>
      serverDb
        .select()
        .from(jobOutbox)
        .where(sql`${jobOutbox.name} = 'mail.verify-email' and ${jobOutbox.payload} ->> 'userId' = ${String(user.id)}`);
    await until(async () => ((await jobRows()).length === 0 ? true : undefined), "the verification job to be done");

    // A registration refused (the e-mail is taken) leaves no job behind.
    const before = (await serverDb.select({ id: jobOutbox.id }).from(jobOutbox)).length;
    const again = await ctx.api.post("/api/v1/auth/app/register", {
      name: "Again",
      email: user.email,
      password: user.password,
      password_confirmation: user.password,
      device_name: "test",
    });
    expect(again.status).toBe(422);
    expect((await serverDb.select({ id: jobOutbox.id }).from(jobOutbox)).length).toBe(before);
  });
});
