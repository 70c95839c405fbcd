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

/** How many jobs of a queue are in a state (for the metrics, read on scrape). */
export type QueueDepth = { queue: QueueName; state: "waiting" | "delayed" | "active" | "failed"; count: number };

export interface JobQueue {
  enqueue<Payload>(definition: JobDefinition<Payload>, payload: Payload, options?: EnqueueOptions): Promise<void>;
  /**
   * Runs the job every `everyMs` from now on. One schedule per job name: asking again (from
   * another process, or after a restart) replaces it rather than adding a second.
   */
  repeat<Payload>(definition: JobDefinition<Payload>, payload: Payload, everyMs: number): Promise<void>;
  /** Jobs per queue and state, for GET /metrics. */
  depth?(): Promise<QueueDepth[]>;
  close(): Promise<void>;
}

export type JobHandler = (payload: unknown, info: { attempt: number; jobId: string }) => Promise<void>;
export type JobHandlerEntry = { definition: JobDefinition<unknown>; handle: JobHandler };
/** Handlers by job name; built by workers/index.ts. */
export type JobHandlers = Map<string, JobHandlerEntry>;

/** Thrown by a handler when trying again cannot help (bad payload, record gone). */
export class PermanentJobError extends Error {
  override name = "PermanentJobError";
}
