// Jobs with Redis: one BullMQ queue per QueueName. Workers (this process unless WORKERS=off,
// or `npm run worker`) validate the payload before handling it: a bad payload is not retried.
import { Queue, Worker, UnrecoverableError, type BulkJobOptions, type ConnectionOptions } from "bullmq";
import { oncePer, type Logger } from "../logger.ts";
import { within } from "../timeout.ts";
import {
  PermanentJobError,
  QUEUE_NAMES,
  type EnqueueOptions,
  type JobDefinition,
  type JobHandlers,
  type JobQueue,
  type QueueDepth,
  type QueueName,
  type QueuedJob,
} from "./definition.ts";

/** How long a worker may take to finish its current job at shutdown before it is forced shut. */
const WORKER_CLOSE_MS = 10_000;
/**
 * Jobs one worker runs at once. Translation jobs mostly wait for their batch (those that arrive
 * while two batches are out go together; translate-message.ts), and outbound webhook jobs for
 * the receivers' answers, so many of those may be taken at once.
 */
const CONCURRENCY: Partial<Record<QueueName, number>> = { translation: 100, "outbound-webhooks": 50 };
const DEFAULT_CONCURRENCY = 10;
/** How long a queue (which only adds jobs) may take to close its connection. */
const QUEUE_CLOSE_MS = 2_000;
/** How long a scrape waits for a queue's job counts. */
const COUNT_JOBS_MS = 2_000;

function connectionFrom(redisUrl: string): ConnectionOptions {
  // BullMQ workers need blocking commands without a retry limit.
  return { url: redisUrl, maxRetriesPerRequest: null } as ConnectionOptions;
}

/** BullMQ's options for a job of `definition`: its tries and backoff, and how long it is kept once done. */
function jobOptions(
  definition: Pick<JobDefinition<unknown>, "attempts" | "backoffMs">,
  options: EnqueueOptions = {},
): BulkJobOptions {
  return {
    jobId: options.jobId,
    delay: options.delayMs,
    attempts: definition.attempts,
    backoff: { type: "exponential", delay: definition.backoffMs },
    removeOnComplete: { age: 3600, count: 1000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  };
}

export class BullMqJobQueue implements JobQueue {
  private readonly queues = new Map<QueueName, Queue>();

  private readonly mayLogError = oncePer();

  constructor(
    private readonly redisUrl: string,
    private readonly prefix: string,
    private readonly logger: Logger,
  ) {}

  private queue(name: QueueName): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: connectionFrom(this.redisUrl), prefix: `${this.prefix}:bull` });
      // Connection errors while Redis is away: one line per 10 s, not a stack trace per retry.
      queue.on("error", (error) => {
        if (this.mayLogError()) this.logger.warn({ err: error, queue: name }, "job queue: redis connection error");
      });
      this.queues.set(name, queue);
    }
    return queue;
  }

  async enqueue<Payload>(
    definition: JobDefinition<Payload>,
    payload: Payload,
    options: EnqueueOptions = {},
  ): Promise<void> {
    const parsed = definition.payload.parse(payload);
    await this.queue(definition.queue).add(definition.name, parsed, jobOptions(definition, options));
  }

  /** One pipeline per queue (BullMQ's addBulk: one write for the lot), the jobs in order. */
  async enqueueMany(jobs: QueuedJob[]): Promise<void> {
    const byQueue = new Map<QueueName, { name: string; data: unknown; opts: BulkJobOptions }[]>();
    for (const { definition, payload, options } of jobs) {
      const bulk = byQueue.get(definition.queue) ?? [];
      if (bulk.length === 0) byQueue.set(definition.queue, bulk);
      bulk.push({
        name: definition.name,
        data: definition.payload.parse(payload),
        opts: jobOptions(definition, options),
      });
    }
    await Promise.all([...byQueue].map(([name, bulk]) => this.queue(name).addBulk(bulk)));
  }

  async repeat<Payload>(definition: JobDefinition<Payload>, payload: Payload, everyMs: number): Promise<void> {
    const parsed = definition.payload.parse(payload);
    // The scheduler lives in Redis under the job's name, so every process may upsert it.
    await this.queue(definition.queue).upsertJobScheduler(
      definition.name,
      { every: everyMs },
      {
        name: definition.name,
        data: parsed,
        opts: jobOptions(definition),
      },
    );
  }

  /** One Queue per queue name (the queue dashboard shows them all, empty or not). */
  allQueues(): Queue[] {
    return QUEUE_NAMES.map((name) => this.queue(name));
  }

  async depth(): Promise<QueueDepth[]> {
    const states = ["waiting", "delayed", "active", "failed"] as const;
    const perQueue = await Promise.all(
      QUEUE_NAMES.map(async (queue) => {
        // A scrape must not hang on a Redis that is away: the queue is left out instead.
        const counts = await within(this.queue(queue).getJobCounts(...states), COUNT_JOBS_MS, "counting jobs").catch(
          () => undefined,
        );
        return counts ? states.map((state): QueueDepth => ({ queue, state, count: counts[state] ?? 0 })) : [];
      }),
    );
    return perQueue.flat();
  }

  async close(): Promise<void> {
    await Promise.all(
      [...this.queues.values()].map(async (queue) => {
        // A queue whose Redis is away cannot say goodbye (nor wait for one): its connection is dropped.
        await within(queue.close(), QUEUE_CLOSE_MS, "closing a queue").catch(() => {});
        void queue.disconnect().catch(() => {});
      }),
    );
  }
}

/** Starts one BullMQ worker per queue; returns a function that closes them in order. */
export function startBullMqWorkers(options: {
  redisUrl: string;
  prefix: string;
  handlers: JobHandlers;
  logger: Logger;
}): () => Promise<void> {
  const workers = QUEUE_NAMES.map(
    (queueName) =>
      new Worker(
        queueName,
        async (job) => {
          const handler = options.handlers.get(job.name);
          if (!handler) throw new UnrecoverableError(`no handler for job ${job.name}`);
          const parsed = handler.definition.payload.safeParse(job.data);
          if (!parsed.success) throw new UnrecoverableError(`bad payload for job ${job.name}`);
          try {
            await handler.handle(parsed.data, {
              attempt: job.attemptsMade + 1,
              jobId: job.id ?? "",
              // Kept with the job in Redis: a retry, or a run after a stalled worker, gets it.
              saveProgress: (payload) => job.updateData(payload),
            });
          } catch (error) {
            if (error instanceof PermanentJobError) throw new UnrecoverableError(error.message);
            throw error;
          }
        },
        {
          connection: connectionFrom(options.redisUrl),
          prefix: `${options.prefix}:bull`,
          concurrency: CONCURRENCY[queueName] ?? DEFAULT_CONCURRENCY,
        },
      ),
  );
  for (const worker of workers) {
    worker.on("failed", (job, error) =>
      options.logger.warn(
        { queue: worker.name, job: job?.name, jobId: job?.id, attempt: job?.attemptsMade, err: error },
        "job failed",
      ),
    );
    // Connection errors while Redis is away: one line per worker per 10 s.
    const mayLogError = oncePer();
    worker.on("error", (error) => {
      if (mayLogError()) options.logger.warn({ queue: worker.name, err: error }, "worker error");
    });
  }
  // A worker finishes its current job before it closes; one whose Redis went away (or came back
  // empty) may never hear back from its blocking read, so it is forced shut after a while.
  return async () => {
    await Promise.all(
      workers.map(async (worker) => {
        const closed = await within(worker.close(), WORKER_CLOSE_MS, "closing a worker").then(
          () => true,
          () => false,
        );
        if (!closed) await worker.close(true).catch(() => {});
      }),
    );
  };
}
