// Push queue processor: one job per batch of messages of the push consumer, one per silent badge
// update, and one per retry of the sends that may still succeed; server/services/push/ does the work.
import type { Deps } from "../server/deps.ts";
import { jobHandler, type JobHandlers } from "../server/jobs/definition.ts";
import { deliverBadgeUpdate } from "../server/services/push/badge-updates.ts";
import { deliverPush, deliverPushes, type PushProviders } from "../server/services/push/delivery.ts";
import { pushJobs } from "../server/services/push/jobs.ts";

export function pushHandlers(deps: Deps, providers: PushProviders): JobHandlers {
  return new Map([
    jobHandler(pushJobs.messages, (payload, { saveProgress }) => deliverPushes(deps, providers, payload, saveProgress)),
    jobHandler(pushJobs.message, (payload) => deliverPush(deps, providers, payload)),
    jobHandler(pushJobs.badge, (payload) => deliverBadgeUpdate(deps, providers, payload)),
  ]);
}
