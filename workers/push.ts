// Push queue processor: one job per message (and one per retry of the sends that may still
// succeed); server/services/push/delivery.ts does the work.
import type { Deps } from "../server/deps.ts";
import type { JobDefinition, JobHandlers } from "../server/jobs/definition.ts";
import { deliverPush, type PushProviders } from "../server/services/push/delivery.ts";
import { pushJobs } from "../server/services/push/jobs.ts";

export function pushHandlers(deps: Deps, providers: PushProviders): JobHandlers {
  return new Map([
    [
      pushJobs.message.name,
      {
        definition: pushJobs.message as JobDefinition<unknown>,
        handle: (payload: unknown) => deliverPush(deps, providers, pushJobs.message.payload.parse(payload)),
      },
    ],
  ]);
}
