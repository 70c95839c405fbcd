// Deleting stored files whose attachment rows are gone. A trigger on `attachments` (migration
// 0006) queues each deleted row's storage key in `file_deletions` in the deleting transaction,
// whatever deleted it: a channel's or workspace's cascade, a conversation's, the staged-file
// prune. The bytes of a deleted message's, channel's or expired room's files go once its event is
// positioned (the file-purge consumer, server/consumers/file-purge.ts), the staged-file prune's
// at once, and whatever is left (a workspace's or conversation's deletion, the process died
// after the commit, the storage was unreachable) in the `files.purge-deleted` maintenance job
// (jobs.ts). A key leaves the queue only once its object
// is gone, so nothing is lost; deleting an object twice is harmless.
import { asc, eq, inArray, notInArray, sql } from "drizzle-orm";
import { fileDeletions } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";

const BATCH_SIZE = 200;

/** Deletes the queued files from storage; returns how many went. Failures stay queued (logged). */
export async function purgeDeletedFiles(deps: Pick<Deps, "db" | "storage" | "logger">): Promise<number> {
  let purged = 0;
  const failed = new Set<string>();
  for (;;) {
    // Keys that failed in this run are skipped; the next run tries them again.
    const batch = await deps.db
      .select({ storageKey: fileDeletions.storageKey })
      .from(fileDeletions)
      .where(failed.size > 0 ? notInArray(fileDeletions.storageKey, [...failed]) : undefined)
      .orderBy(asc(fileDeletions.queuedAt))
      .limit(BATCH_SIZE);
    if (batch.length === 0) break;
    const done: string[] = [];
    for (const { storageKey } of batch) {
      try {
        await deps.storage.delete(storageKey);
        done.push(storageKey);
      } catch (error) {
        failed.add(storageKey);
        deps.logger.warn({ err: error, storageKey }, "could not delete a deleted attachment's file; will retry");
        await deps.db
          .update(fileDeletions)
          .set({ attempts: sql`${fileDeletions.attempts} + 1` })
          .where(eq(fileDeletions.storageKey, storageKey));
      }
    }
    if (done.length > 0) await deps.db.delete(fileDeletions).where(inArray(fileDeletions.storageKey, done));
    purged += done.length;
    // A storage that refuses a whole batch is down: the next run tries again.
    if (done.length === 0 || batch.length < BATCH_SIZE) break;
  }
  if (purged > 0) deps.logger.info({ purged }, "deleted the files of deleted attachments");
  return purged;
}
