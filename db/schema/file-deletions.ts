import { index, integer, pgTable, text } from "drizzle-orm/pg-core";
import { timestamptz } from "./columns.ts";

/**
 * Stored files whose attachment row is gone, waiting to be deleted from storage. A trigger on
 * `attachments` (migration 0006) writes one row for every deleted attachment, in the deleting
 * transaction, whatever deleted it (a channel's or workspace's cascade, a conversation's, the
 * staged-file prune): a crash after the commit loses no file. The bytes go right after the
 * commit and, for whatever is left, in the `files.purge-deleted` maintenance job
 * (server/services/files/purge-deleted.ts); the row goes once its object is gone.
 */
export const fileDeletions = pgTable(
  "file_deletions",
  {
    /** The key in the storage driver (local path or S3 key) of the attachment that was deleted. */
    storageKey: text("storage_key").primaryKey(),
    queuedAt: timestamptz("queued_at").notNull().defaultNow(),
    /** Failed deletes so far (the storage was unreachable); the job tries again. */
    attempts: integer("attempts").notNull().default(0),
  },
  (table) => [index("file_deletions_queued_at_idx").on(table.queuedAt)],
);

export type FileDeletion = typeof fileDeletions.$inferSelect;
