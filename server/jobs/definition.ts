// A job is a name, a queue, a zod payload of ids (not snapshots) and retry options
// (house style 9). The handler lives in workers/ and is looked up by name.
import type { z } from "zod";

export const QUEUE_NAMES = ["mail", "translation", "push", "room-expiry", "outbound-webhooks", "maintenance"] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

export type JobDefinition<Payload> = {
  queue: QueueName;
  name: string;
  payload: z.ZodType<Payload>;
  /** Total tries, the first included. */
  attempts: number;
  /** Delay before the second try; each later try waits twice as long as the one before. */
  backoffMs: number;
};

export function defineJob<Payload>(definition: JobDefinition<Payload>): JobDefinition<Payload> {
  return definition;
}

export type EnqueueOptions = {
  /** A stable id: a job with the same id is not added twice while it is known to the queue. */
  jobId?: string;
  delayMs?: number;
};

/** A job to hand over, with what `enqueue` takes. */
export type QueuedJob = { definition: JobDefinition<unknown>; payload: unknown; options?: EnqueueOptions };

/** How many jobs of a queue are in a state (for the metrics, read on scrape). */
export type QueueDepth = { queue: QueueName; state: "waiting" | "delayed" | "active" | "failed"; count: number };

export interface JobQueue {
  enqueue<Payload>(definition: JobDefinition<Payload>, payload: Payload, options?: EnqueueOptions): Promise<void>;
  /**
   * Several jobs, each as `enqueue` would add it, in one round trip where the queue can (the
   * job outbox hands over a batch of rows at once). Rejects when any was not taken; adding
   * them all again is safe (a known job id is not added twice).
   */
  enqueueMany(jobs: QueuedJob[]): Promise<void>;
  /**
   * Runs the job every `everyMs` from now on. One schedule per job name: asking again (from
   * another process, or after a restart) replaces it rather than adding a second.
   */
  repeat<Payload>(definition: JobDefinition<Payload>, payload: Payload, everyMs: number): Promise<void>;
  /** Jobs per queue and state, for GET /metrics. */
  depth?(): Promise<QueueDepth[]>;
  close(): Promise<void>;
}

/** Which try of which job a handler runs (1 for the first try). */
export type JobRunInfo = {
  attempt: number;
  jobId: string;
  /**
   * Keeps how far the job got, as its payload from now on: a later run of the same job (its
   * retry, or its run after the process died) gets this payload. A job that does several
   * things no second run may repeat (sends) records each step it finished. BullMQ keeps it
   * with the job in Redis; the in-process queue in memory and in the job's outbox row.
   */
  saveProgress: (payload: unknown) => Promise<void>;
};
/** `JobRunInfo` of a job whose payload is `Payload`. */
export type TypedJobRunInfo<Payload> = Omit<JobRunInfo, "saveProgress"> & {
  saveProgress: (payload: Payload) => Promise<void>;
};
export type JobHandler = (payload: unknown, info: JobRunInfo) => Promise<void>;
export type JobHandlerEntry = { definition: JobDefinition<unknown>; handle: JobHandler };
/** Handlers by job name; built by workers/index.ts. */
export type JobHandlers = Map<string, JobHandlerEntry>;

/** Thrown by a handler when trying again cannot help (bad payload, record gone). */
export class PermanentJobError extends Error {
  override name = "PermanentJobError";
}

/**
 * A job's handler, keyed by the job's name (an entry of JobHandlers). `handle` gets the payload
 * checked against the job's schema; one that does not match is a PermanentJobError (not retried).
 */
export function jobHandler<Payload>(
  definition: JobDefinition<Payload>,
  handle: (payload: Payload, info: TypedJobRunInfo<Payload>) => Promise<void>,
): [string, JobHandlerEntry] {
  return [
    definition.name,
    {
      definition,
      handle: async (payload, info) => {
        const parsed = definition.payload.safeParse(payload);
        if (!parsed.success)
          throw new PermanentJobError(`bad payload for job ${definition.name}`, { cause: parsed.error });
        await handle(parsed.data, info);
      },
    },
  ];
}
