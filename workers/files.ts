// Maintenance queue processor for files: the hourly prune of unclaimed staged uploads.
import type { Deps } from "../server/deps.ts";
import type { JobDefinition, JobHandlers } from "../server/jobs/definition.ts";
import { fileJobs } from "../server/services/files/jobs.ts";
import { pruneStagedFiles } from "../server/services/files/prune-staged.ts";

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
  ]);
}
