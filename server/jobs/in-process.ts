// Jobs without Redis: run in this process on timers, with the same attempts and exponential
// backoff as the BullMQ queues, so a failed send is retried rather than lost while the
// process lives. A job that has not finished when the process dies is run again after a restart
// from its outbox row (server/jobs/outbox.ts), with the progress it saved there.
import type { Logger } from "../logger.ts";
import { randomUUID } from "node:crypto";
import { retryDelayMs } from "./backoff.ts";
import {
  PermanentJobError,
  QUEUE_NAMES,
  type EnqueueOptions,
  type JobDefinition,
  type JobHandlers,
  type JobQueue,
  type QueueDepth,
  type QueuedJob,
} from "./definition.ts";

export class InProcessJobQueue implements JobQueue {
  /** Jobs waiting for their timer, with their queue and whether they were delayed (a retry, a delay). */
  private readonly timers = new Map<NodeJS.Timeout, Pick<QueueDepth, "queue" | "state">>();
  private readonly schedules = new Map<string, NodeJS.Timeout>();
  private readonly running = new Map<Promise<void>, QueueDepth["queue"]>();
  private readonly knownIds = new Set<string>();
  private closed = false;

  constructor(
    private readonly handlers: () => JobHandlers,
    private readonly logger: Logger,
    /**
     * Where a job's progress outlives this process (the job's outbox row, which is handed over
     * again after a restart); without it, progress is kept for the job's retries only.
     */
    private readonly persistProgress?: (jobId: string, payload: unknown) => Promise<void>,
  ) {}

  async enqueue<Payload>(
    definition: JobDefinition<Payload>,
    payload: Payload,
    options: EnqueueOptions = {},
  ): Promise<void> {
    const parsed = definition.payload.parse(payload);
    const jobId = options.jobId ?? randomUUID();
    if (this.knownIds.has(jobId)) return;
    this.knownIds.add(jobId);
    this.schedule(definition, parsed, jobId, 1, options.delayMs ?? 0);
  }

  async enqueueMany(jobs: QueuedJob[]): Promise<void> {
    for (const job of jobs) await this.enqueue(job.definition, job.payload, job.options);
  }

  async repeat<Payload>(definition: JobDefinition<Payload>, payload: Payload, everyMs: number): Promise<void> {
    const parsed = definition.payload.parse(payload);
    clearInterval(this.schedules.get(definition.name));
    // A stable job id: a run still going (or retrying) when the next is due is not doubled.
    const timer = setInterval(() => {
      void this.enqueue(definition, parsed, { jobId: `repeat:${definition.name}` });
    }, everyMs);
    timer.unref();
    this.schedules.set(definition.name, timer);
  }

  private schedule(
    definition: JobDefinition<unknown>,
    payload: unknown,
    jobId: string,
    attempt: number,
    delayMs: number,
  ) {
    if (this.closed) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      const run = this.run(definition, payload, jobId, attempt).finally(() => this.running.delete(run));
      this.running.set(run, definition.queue);
    }, delayMs);
    this.timers.set(timer, { queue: definition.queue, state: delayMs > 0 ? "delayed" : "waiting" });
  }

  private async run(definition: JobDefinition<unknown>, payload: unknown, jobId: string, attempt: number) {
    const handler = this.handlers().get(definition.name);
    if (!handler) {
      this.logger.error({ job: definition.name }, "no handler registered for job");
      this.knownIds.delete(jobId);
      return;
    }
    // A retry starts from the progress the failed try saved.
    let current = payload;
    const saveProgress = async (progress: unknown) => {
      current = progress;
      await this.persistProgress?.(jobId, progress);
    };
    try {
      await handler.handle(payload, { attempt, jobId, saveProgress });
      this.knownIds.delete(jobId);
    } catch (error) {
      const permanent = error instanceof PermanentJobError;
      if (!permanent && attempt < definition.attempts) {
        // As BullMQ's exponential backoff: backoffMs, then twice as long each time.
        const backoff = { firstMs: definition.backoffMs, longestMs: Infinity, longestRetryAfterMs: Infinity };
        const delay = retryDelayMs(backoff, attempt + 1);
        this.logger.warn({ job: definition.name, jobId, attempt, err: error }, `job failed, retrying in ${delay} ms`);
        this.schedule(definition, current, jobId, attempt + 1, delay);
      } else {
        this.knownIds.delete(jobId);
        this.logger.error({ job: definition.name, jobId, attempt, err: error }, "job failed for good");
      }
    }
  }

  async depth(): Promise<QueueDepth[]> {
    // Every queue and state, empty ones too, so a dashboard sees zeros rather than gaps.
    const depths = QUEUE_NAMES.flatMap((queue) =>
      (["waiting", "delayed", "active"] as const).map((state): QueueDepth => ({ queue, state, count: 0 })),
    );
    const count = (queue: QueueDepth["queue"], state: QueueDepth["state"]) => {
      const entry = depths.find((depth) => depth.queue === queue && depth.state === state);
      if (entry) entry.count += 1;
    };
    for (const { queue, state } of this.timers.values()) count(queue, state);
    for (const queue of this.running.values()) count(queue, "active");
    return depths;
  }

  /** Stops scheduling, drops waiting retries and waits for the jobs that are running. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.schedules.values()) clearInterval(timer);
    this.schedules.clear();
    for (const timer of this.timers.keys()) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.running.keys()]);
  }
}
