// Maintenance queue processor for inbound webhooks: the hourly prune of the request log and
// of idempotency keys past their retention.
import type { Deps } from "../server/deps.ts";
import type { JobDefinition, JobHandlers } from "../server/jobs/definition.ts";
import { pruneWebhookRecords, webhookJobs } from "../server/services/webhooks/jobs.ts";

export function webhookHandlers(deps: Deps): JobHandlers {
  return new Map([
    [
      webhookJobs.prune.name,
      {
        definition: webhookJobs.prune as JobDefinition<unknown>,
        handle: async () => {
          await pruneWebhookRecords(deps);
        },
      },
    ],
  ]);
}
