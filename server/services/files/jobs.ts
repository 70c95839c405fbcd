// The maintenance jobs for files: the hourly removal of unclaimed staged files
// (prune-staged.ts) and the purge of deleted attachments' files (purge-deleted.ts). Scheduled by
// workers/index.ts: a BullMQ job scheduler with Redis, a timer in the process without.
import { z } from "zod";
import { defineJob } from "../../jobs/definition.ts";

export const PRUNE_STAGED_FILES_EVERY_MS = 60 * 60 * 1000;
/** Files are deleted right after their rows; this catches up on what that could not do. */
export const PURGE_DELETED_FILES_EVERY_MS = 15 * 60 * 1000;

export const fileJobs = {
  pruneStaged: defineJob({
    queue: "maintenance",
    name: "files.prune-staged",
    payload: z.object({}),
    attempts: 3,
    backoffMs: 60_000,
  }),
  purgeDeleted: defineJob({
    queue: "maintenance",
    name: "files.purge-deleted",
    payload: z.object({}),
    attempts: 3,
    backoffMs: 60_000,
  }),
};
