// The translation queue's jobs. A message that readers in other languages may read gets, from
// the translation consumer of the event log (server/consumers/translation.ts), a "pending" row
// per such language (message_translations); the messages of one batch of the consumer share a
// job `translate-p<position of the first one's event>` (at most MESSAGES_PER_JOB messages)
// that turns them into translations. A reader whose language had no
// row (they changed language since, or the message predates them) gets one when they read the
// message: a pending row and a job `translate-<message id>-<language>`. A try that failed in a
// way that may pass (429, 5xx, a timeout) is enqueued again with `-r<attempt>` after a backoff.
import { and, eq, inArray } from "drizzle-orm";
import { z } from "zod";
import type { Database, Executor } from "../../../db/client.ts";
import { LANGUAGES, messageTranslations, type Language, type Message } from "../../../db/schema/index.ts";
import { defineJob } from "../../jobs/definition.ts";
import { enqueueJob } from "../../jobs/outbox.ts";
import type { Deps } from "../../deps.ts";

/** The most messages one `translation.messages` job carries (the worker's batch size). */
export const MESSAGES_PER_JOB = 50;

export const translationJobs = {
  message: defineJob({
    queue: "translation",
    name: "translation.message",
    payload: z.object({
      messageId: z.string().min(1),
      /** Asked for by a reader of this language (on demand); the job still does every pending language. */
      language: z.enum(LANGUAGES).optional(),
      /** A retry, the `attempt`-th try. */
      attempt: z.number().int().min(2).optional(),
    }),
    // Provider failures are retried by the job itself (a new delayed job); these attempts
    // cover the database being away.
    attempts: 5,
    backoffMs: 1_000,
  }),
  /**
   * The messages of one batch of the translation consumer: each translated as its own job would
   * be (`message`), in the batches the worker makes. A job that a crash interrupts runs again
   * and stores nothing twice (only a row still pending is written); what it can repeat is the
   * provider's requests.
   */
  messages: defineJob({
    queue: "translation",
    name: "translation.messages",
    payload: z.object({ messageIds: z.array(z.string().min(1)).min(1).max(MESSAGES_PER_JOB) }),
    attempts: 5,
    backoffMs: 1_000,
  }),
  pruneCache: defineJob({
    queue: "translation",
    name: "translation.prune-cache",
    payload: z.object({}),
    attempts: 3,
    backoffMs: 60_000,
  }),
};

export type TranslationJobPayload = z.infer<typeof translationJobs.message.payload>;

/** Stable per message (and language, for one asked for on demand, and attempt, for a retry). */
export function translationJobId(payload: TranslationJobPayload): string {
  return ["translate", payload.messageId, payload.language, payload.attempt && `r${payload.attempt}`]
    .filter(Boolean)
    .join("-");
}

/**
 * Translations owed to a reader that nobody asked for yet (see the file's head): a pending row
 * and a job each. Called by reads for the messages they serve; concurrent readers add one each.
 */
export async function requestTranslations(
  deps: Pick<Deps, "db" | "clock">,
  language: Language,
  owed: Pick<Message, "id">[],
): Promise<void> {
  if (owed.length === 0) return;
  const now = deps.clock.now();
  await (deps.db as Database).transaction(async (tx) => {
    const written = await tx
      .insert(messageTranslations)
      .values(
        owed.map((message) => ({
          messageId: message.id,
          language,
          status: "pending" as const,
          createdAt: now,
          updatedAt: now,
        })),
      )
      .onConflictDoNothing()
      .returning({ messageId: messageTranslations.messageId });
    for (const { messageId } of written) {
      const payload = { messageId, language };
      await enqueueJob(tx, now, translationJobs.message, payload, { jobId: translationJobId(payload) });
    }
  });
}

/** The stored translations of `messageIds` in `language`. */
export async function storedTranslations(db: Executor, messageIds: string[], language: Language) {
  if (messageIds.length === 0) return new Map<string, typeof messageTranslations.$inferSelect>();
  const rows = await db
    .select()
    .from(messageTranslations)
    .where(and(inArray(messageTranslations.messageId, messageIds), eq(messageTranslations.language, language)));
  return new Map(rows.map((row) => [row.messageId, row]));
}
