// Every queue's handlers, by job name. The same handlers run inside BullMQ workers (with
// Redis) and in the in-process queue (without).
import type { Deps } from "../server/deps.ts";
import type { JobHandlers } from "../server/jobs/definition.ts";
import type { MailTransport } from "../server/mail/transport.ts";
import type { PushProviders } from "../server/services/push/delivery.ts";
import { accountJobs, PRUNE_EXPIRED_CREDENTIALS_EVERY_MS } from "../server/services/accounts/jobs.ts";
import { fileJobs, PRUNE_STAGED_FILES_EVERY_MS, PURGE_DELETED_FILES_EVERY_MS } from "../server/services/files/jobs.ts";
import { accountHandlers } from "./accounts.ts";
import { fileHandlers } from "./files.ts";
import { mailHandlers } from "./mail.ts";
import { pushHandlers } from "./push.ts";

export function buildJobHandlers(deps: Deps, services: { mail: MailTransport; push: PushProviders }): JobHandlers {
  return new Map([
    ...mailHandlers(deps, services.mail),
    ...pushHandlers(deps, services.push),
    ...fileHandlers(deps),
    ...accountHandlers(deps),
  ]);
}

/** Jobs that run on a clock rather than on demand; started wherever workers run. */
export async function scheduleRecurringJobs(deps: Deps): Promise<void> {
  await deps.jobs.repeat(fileJobs.pruneStaged, {}, PRUNE_STAGED_FILES_EVERY_MS);
  await deps.jobs.repeat(fileJobs.purgeDeleted, {}, PURGE_DELETED_FILES_EVERY_MS);
  await deps.jobs.repeat(accountJobs.pruneExpired, {}, PRUNE_EXPIRED_CREDENTIALS_EVERY_MS);
}
