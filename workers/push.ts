// Push queue processor: one job per message and one per silent badge update (and one per retry
// of the sends that may still succeed); server/services/push/ does the work. Message jobs that
// arrive together go in one batch (server/jobs/batcher.ts).
import type { Deps } from "../server/deps.ts";
import { jobHandler, type JobHandlers } from "../server/jobs/definition.ts";
import { deliverBadgeUpdate } from "../server/services/push/badge-updates.ts";
import { Batcher } from "../server/jobs/batcher.ts";
import { deliverPushes, PUSH_BATCH, type PushProviders } from "../server/services/push/delivery.ts";
import { pushJobs, type PushJobPayload } from "../server/services/push/jobs.ts";

export function pushHandlers(deps: Deps, providers: PushProviders): JobHandlers {
  // The message jobs that arrive while others are out go together (one read for all of them).
  const batcher = new Batcher<PushJobPayload>((payloads) => deliverPushes(deps, providers, payloads), PUSH_BATCH);
  return new Map([
    jobHandler(pushJobs.message, (payload) => batcher.add(payload)),
    jobHandler(pushJobs.badge, (payload) => deliverBadgeUpdate(deps, providers, payload)),
  ]);
}
