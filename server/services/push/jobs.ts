// The push queue's one job: deliver the notifications of one message. The push consumer of the
// event log enqueues it (job id `push-<message id>`, server/consumers/push.ts); a send that may still succeed (429,
// 5xx, a timeout) is enqueued again for just the devices it failed for, after a delay.
import { z } from "zod";
import { defineJob } from "../../jobs/definition.ts";
import { PUSH_PROVIDERS } from "./provider.ts";

export const pushJobs = {
  message: defineJob({
    queue: "push",
    name: "push.message",
    payload: z.object({
      messageId: z.string().min(1),
      /** A retry: only these devices of this provider, the `attempt`-th time. */
      retry: z
        .object({
          provider: z.enum(PUSH_PROVIDERS),
          deviceIds: z.array(z.string().min(1)).min(1),
          attempt: z.number().int().min(2),
        })
        .optional(),
    }),
    // Provider failures are retried by the job itself, per device; these attempts cover the
    // database being away before anything was sent.
    attempts: 5,
    backoffMs: 1_000,
  }),
};

export type PushJobPayload = z.infer<typeof pushJobs.message.payload>;

export const pushJobId = (messageId: string) => `push-${messageId}`;
