// The push queue's jobs. `push.messages` delivers the notifications of the new messages of one
// batch of the event log: the push consumer enqueues it (job id `push-batch-<position>`, the
// position of the batch's last such message; server/consumers/push.ts). `push.message` delivers
// one message's: a message whose delivery failed in a batch job (the database away) is tried
// again as such a job (`push-<message id>`), and the sends that may still succeed as retries.
// `push.badge` sends a user's devices a silent badge update after a read lowered their badge:
// the consumer enqueues it at most once per user per BADGE_WINDOW_MS (job id
// `badge-<user id>-<window>`, due at the window's end). A send that may still succeed (429, 5xx,
// a timeout) is enqueued again for just the devices it failed for, after a delay.
import { z } from "zod";
import { defineJob } from "../../jobs/definition.ts";
import { PUSH_PROVIDERS } from "./provider.ts";

/** A retry: only these devices of this provider, the `attempt`-th time. */
const retry = z
  .object({
    provider: z.enum(PUSH_PROVIDERS),
    deviceIds: z.array(z.string().min(1)).min(1),
    attempt: z.number().int().min(2),
  })
  .optional();

/** A user's devices get at most one silent badge update per window of this length. */
export const BADGE_WINDOW_MS = 10_000;

/** Messages in one `push.messages` job (a consumer's batch is at most 500 events). */
export const MAX_PUSH_BATCH = 500;

export const pushJobs = {
  messages: defineJob({
    queue: "push",
    name: "push.messages",
    payload: z.object({ messageIds: z.array(z.string().min(1)).min(1).max(MAX_PUSH_BATCH) }),
    // A message that fails is handed to its own `push.message` job; these attempts cover the
    // database being away for that hand-over.
    attempts: 5,
    backoffMs: 1_000,
  }),
  message: defineJob({
    queue: "push",
    name: "push.message",
    payload: z.object({ messageId: z.string().min(1), retry }),
    // Provider failures are retried by the job itself, per device; these attempts cover the
    // database being away before anything was sent.
    attempts: 5,
    backoffMs: 1_000,
  }),
  badge: defineJob({
    queue: "push",
    name: "push.badge",
    payload: z.object({
      userId: z.number().int().min(1),
      /** The BADGE_WINDOW_MS window (ms since the epoch / BADGE_WINDOW_MS) it was enqueued in: part of its id. */
      window: z.number().int().min(0),
      retry,
    }),
    attempts: 5,
    backoffMs: 1_000,
  }),
};

export type PushJobPayload = z.infer<typeof pushJobs.message.payload>;
export type PushBatchJobPayload = z.infer<typeof pushJobs.messages.payload>;
export type BadgeJobPayload = z.infer<typeof pushJobs.badge.payload>;

export const pushJobId = (messageId: string) => `push-${messageId}`;
export const pushBatchJobId = (position: number) => `push-batch-${position}`;
export const badgeJobId = (userId: number, window: number) => `badge-${userId}-${window}`;
