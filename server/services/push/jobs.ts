// The push queue's one job: deliver the notifications of one message. Posting enqueues it in
// the message's transaction (job id `push-<message id>`); a send that may still succeed (429,
// 5xx, a timeout) is enqueued again for just the devices it failed for, after a delay.
import { sql } from "drizzle-orm";
import { z } from "zod";
import type { Executor } from "../../../db/client.ts";
import { channelMembers, conversations, pushDevices, roomMembers } from "../../../db/schema/index.ts";
import { defineJob } from "../../jobs/definition.ts";
import { enqueueJob } from "../../jobs/outbox.ts";
import type { MessageTarget } from "../messaging/post-message.ts";
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

/**
 * In the message's transaction: its push job, when anyone in its channel, conversation or room but
 * the author has a device. Checked in the statement that adds the job, so a message nobody can
 * be notified of (most of a busy channel's without phones) costs the queue nothing. The check
 * is a cheap superset of the recipients (channel rows alone; it runs on every post): the
 * worker applies the whole rule (target-members.ts) when it runs, and finds a device
 * registered meanwhile then. Resolves with whether the job was added (the outbox needs waking
 * after the commit only then).
 */
export async function enqueueMessagePush(
  tx: Executor,
  now: Date,
  message: { id: string; authorUserId: number | null; target: MessageTarget },
): Promise<boolean> {
  const { target, authorUserId } = message;
  const someoneElse = authorUserId === null ? sql`true` : sql`${pushDevices.userId} <> ${authorUserId}`;
  const anyDevice =
    target.kind === "channel"
      ? sql`exists (select 1 from ${channelMembers} join ${pushDevices} on ${pushDevices.userId} = ${channelMembers.userId}
          where ${channelMembers.channelId} = ${target.channelId} and ${someoneElse})`
      : target.kind === "room"
        ? sql`exists (select 1 from ${roomMembers} join ${pushDevices} on ${pushDevices.userId} = ${roomMembers.userId}
          where ${roomMembers.roomId} = ${target.roomId} and ${someoneElse})`
        : sql`exists (select 1 from ${conversations} join ${pushDevices}
          on ${pushDevices.userId} in (${conversations.userAId}, ${conversations.userBId})
          where ${conversations.id} = ${target.conversationId} and ${someoneElse})`;
  return enqueueJob(
    tx,
    now,
    pushJobs.message,
    { messageId: message.id },
    { jobId: pushJobId(message.id), onlyIf: anyDevice },
  );
}
