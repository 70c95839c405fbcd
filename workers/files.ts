// Maintenance queue processor for files: the hourly prune of unclaimed staged uploads and the
// purge of deleted attachments' files.
import type { Deps } from "../server/deps.ts";
import { jobHandler, type JobHandlers } from "../server/jobs/definition.ts";
import { fileJobs } from "../server/services/files/jobs.ts";
import { pruneStagedFiles } from "../server/services/files/prune-staged.ts";
import { purgeDeletedFiles } from "../server/services/files/purge-deleted.ts";

export function fileHandlers(deps: Deps): JobHandlers {
  return new Map([
    jobHandler(fileJobs.pruneStaged, async () => {
      await pruneStagedFiles(deps);
    }),
    jobHandler(fileJobs.purgeDeleted, async () => {
      await purgeDeletedFiles(deps);
    }),
  ]);
}
