// Outbound-webhooks queue processor: a job of the first attempts of a consumer's batch of
// deliveries, or one later attempt of a delivery; the attempts that arrive together go in one
// batch (server/services/outbound-webhooks/deliver.ts does the work).
import type { Deps } from "../server/deps.ts";
import { Batcher } from "../server/jobs/batcher.ts";
import { jobHandler, type JobHandlers } from "../server/jobs/definition.ts";
import { DELIVERY_BATCH, deliverMany } from "../server/services/outbound-webhooks/deliver.ts";
import { outboundJobs, type DeliverPayload } from "../server/services/outbound-webhooks/jobs.ts";

export function outboundWebhookHandlers(deps: Deps): JobHandlers {
  const batcher = new Batcher<DeliverPayload>((payloads) => deliverMany(deps, payloads), DELIVERY_BATCH);
  return new Map([
    jobHandler(outboundJobs.deliver, (payload) => batcher.add(payload)),
    jobHandler(outboundJobs.first, ({ deliveryIds }) =>
      batcher.addAll(deliveryIds.map((deliveryId) => ({ deliveryId, attempt: 1 }))),
    ),
  ]);
}
