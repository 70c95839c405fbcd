// The push queue's jobs. `push.messages` delivers the notifications of up to MESSAGES_PER_JOB
// messages of one batch of the push consumer of the event log (job id `push-p<position of its
// first message's event>`, server/consumers/push.ts), SENT_AT_ONCE at a time, saving after each
// such step how many it has sent (`done`), so a run after a crash sends only what was in flight
// again. `push.message` is one message's retry for the devices a provider refused for now (and a
// first send enqueued before jobs carried several messages).
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

/** Messages of one `push.messages` job at most. */
export const MESSAGES_PER_JOB = 50;
/**
 * Messages whose sends go out together (Expo takes 100 notifications per request, whatever
 * message they belong to): what a crash can make a job send twice.
 */
export const SENT_AT_ONCE = 10;

/** A user's devices get at most one silent badge update per window of this length. */
export const BADGE_WINDOW_MS = 10_000;

export const pushJobs = {
  message: defineJob({
    queue: "push",
    name: "push.message",
    payload: z.object({ messageId: z.string().min(1), retry }),
    // Provider failures are retried by the job itself, per device; these attempts cover the
    // database being away before anything was sent.
    attempts: 5,
    backoffMs: 1_000,
  }),
  messages: defineJob({
    queue: "push",
    name: "push.messages",
    payload: z.object({
      messageIds: z.array(z.string().min(1)).min(1).max(MESSAGES_PER_JOB),
      /** How many of `messageIds`, from the first, were sent (saved by the job as it goes). */
      done: z.number().int().min(0).optional(),
    }),
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
export type PushMessagesPayload = z.infer<typeof pushJobs.messages.payload>;
export type BadgeJobPayload = z.infer<typeof pushJobs.badge.payload>;

export const pushJobId = (messageId: string) => `push-${messageId}`;
export const badgeJobId = (userId: number, window: number) => `badge-${userId}-${window}`;
