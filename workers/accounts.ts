// Maintenance queue processor for accounts: the hourly prune of expired credentials.
import type { Deps } from "../server/deps.ts";
import { jobHandler, type JobHandlers } from "../server/jobs/definition.ts";
import { accountJobs } from "../server/services/accounts/jobs.ts";
import { pruneExpiredCredentials } from "../server/services/accounts/prune-expired.ts";

export function accountHandlers(deps: Deps): JobHandlers {
  return new Map([
    jobHandler(accountJobs.pruneExpired, async () => {
      await pruneExpiredCredentials(deps);
    }),
  ]);
}
