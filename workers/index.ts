// Every queue's handlers, by job name. The same handlers run inside BullMQ workers (with
// Redis) and in the in-process queue (without).
import type { Deps } from "../server/deps.ts";
import type { JobHandlers } from "../server/jobs/definition.ts";
import type { MailTransport } from "../server/mail/transport.ts";
import type { PushProviders } from "../server/services/push/delivery.ts";
import type { TranslationProvider } from "../server/services/translation/provider.ts";
import { translationJobs } from "../server/services/translation/jobs.ts";
import { accountJobs, PRUNE_EXPIRED_CREDENTIALS_EVERY_MS } from "../server/services/accounts/jobs.ts";
import { PRUNE_WEBHOOK_LOG_EVERY_MS, webhookJobs } from "../server/services/webhooks/jobs.ts";
import { fileJobs, PRUNE_STAGED_FILES_EVERY_MS, PURGE_DELETED_FILES_EVERY_MS } from "../server/services/files/jobs.ts";
import { roomJobs, SWEEP_ROOMS_EVERY_MS } from "../server/services/rooms/expiry.ts";
import { accountHandlers } from "./accounts.ts";
import { fileHandlers } from "./files.ts";
import { mailHandlers } from "./mail.ts";
import { outboundWebhookHandlers } from "./outbound-webhooks.ts";
import { pushHandlers } from "./push.ts";
import { roomHandlers } from "./rooms.ts";
import { translationHandlers } from "./translation.ts";
import { webhookHandlers } from "./webhooks.ts";

export function buildJobHandlers(
  deps: Deps,
  services: { mail: MailTransport; push: PushProviders; translation: TranslationProvider | null },
): JobHandlers {
  return new Map([
    ...mailHandlers(deps, services.mail),
    ...pushHandlers(deps, services.push),
    ...translationHandlers(deps, services.translation),
    ...fileHandlers(deps),
    ...accountHandlers(deps),
    ...webhookHandlers(deps),
    ...outboundWebhookHandlers(deps),
    ...roomHandlers(deps),
  ]);
}

/** Jobs that run on a clock rather than on demand; started wherever workers run. */
export async function scheduleRecurringJobs(deps: Deps): Promise<void> {
  await deps.jobs.repeat(fileJobs.pruneStaged, {}, PRUNE_STAGED_FILES_EVERY_MS);
  await deps.jobs.repeat(fileJobs.purgeDeleted, {}, PURGE_DELETED_FILES_EVERY_MS);
  await deps.jobs.repeat(accountJobs.pruneExpired, {}, PRUNE_EXPIRED_CREDENTIALS_EVERY_MS);
  await deps.jobs.repeat(translationJobs.pruneCache, {}, 24 * 3600_000);
  await deps.jobs.repeat(webhookJobs.prune, {}, PRUNE_WEBHOOK_LOG_EVERY_MS);
  await deps.jobs.repeat(roomJobs.sweep, {}, SWEEP_ROOMS_EVERY_MS);
}
