// Maintenance queue processor for inbound webhooks: the hourly prune of the request log and
// of idempotency keys past their retention.
import type { Deps } from "../server/deps.ts";
import { jobHandler, type JobHandlers } from "../server/jobs/definition.ts";
import { pruneWebhookRecords, webhookJobs } from "../server/services/webhooks/jobs.ts";

export function webhookHandlers(deps: Deps): JobHandlers {
  return new Map([
    jobHandler(webhookJobs.prune, async () => {
      await pruneWebhookRecords(deps);
    }),
  ]);
}
