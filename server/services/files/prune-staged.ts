// Uploads no message claimed within a day are removed, bytes and row (contract: a staged file
// is meant for one message of its uploader). Run hourly by the maintenance queue (jobs.ts).
import { and, asc, inArray, isNull, lt } from "drizzle-orm";
import { attachments } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { purgeDeletedFiles } from "./purge-deleted.ts";

export const STAGED_FILE_LIFETIME_MS = 24 * 60 * 60 * 1000;
const BATCH_SIZE = 500;

/** Removes staged files created before `now` minus a day; returns how many went. */
export async function pruneStagedFiles(deps: Deps, now: Date = deps.clock.now()): Promise<number> {
  const cutoff = new Date(now.getTime() - STAGED_FILE_LIFETIME_MS);
  let pruned = 0;
  for (;;) {
    const batch = await deps.db
      .select({ id: attachments.id })
      .from(attachments)
      .where(and(isNull(attachments.messageId), lt(attachments.createdAt, cutoff)))
      .orderBy(asc(attachments.createdAt))
      .limit(BATCH_SIZE);
    if (batch.length === 0) break;
    // The row goes first, and only while still unclaimed: a message claiming the file this
    // very moment keeps it. Deleting the row queues its bytes for deletion (the trigger behind
    // purge-deleted.ts), which happens below or, failing that, in a later purge.
    const removed = await deps.db
      .delete(attachments)
      .where(
        and(
          inArray(
            attachments.id,
            batch.map((row) => row.id),
          ),
          isNull(attachments.messageId),
        ),
      )
      .returning({ id: attachments.id });
    pruned += removed.length;
    if (batch.length < BATCH_SIZE) break;
  }
  if (pruned > 0) {
    deps.logger.info({ pruned }, "pruned unclaimed staged files");
    await purgeDeletedFiles(deps);
  }
  return pruned;
}
