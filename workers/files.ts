// Maintenance queue processor for files: the hourly prune of unclaimed staged uploads and the
// purge of deleted attachments' files.
import type { Deps } from "../server/deps.ts";
import type { JobDefinition, JobHandlers } from "../server/jobs/definition.ts";
import { fileJobs } from "../server/services/files/jobs.ts";
import { pruneStagedFiles } from "../server/services/files/prune-staged.ts";
import { purgeDeletedFiles } from "../server/services/files/purge-deleted.ts";

export function fileHandlers(deps: Deps): JobHandlers {
  return new Map([
    [
      fileJobs.pruneStaged.name,
      {
        definition: fileJobs.pruneStaged as JobDefinition<unknown>,
        handle: async () => {
          await pruneStagedFiles(deps);
        },
      },
    ],
    [
      fileJobs.purgeDeleted.name,
      {
        definition: fileJobs.purgeDeleted as JobDefinition<unknown>,
        handle: async () => {
          await purgeDeletedFiles(deps);
        },
      },
    ],
  ]);
}
