// Outbound-webhooks queue processor: one job for the first attempts of a batch of the event log's
// deliveries, one per later attempt of a delivery; the deliveries that arrive together go in one
// batch (server/services/outbound/deliver.ts does the work).
import type { Deps } from "../server/deps.ts";
import { Batcher } from "../server/jobs/batcher.ts";
import { jobHandler, type JobHandlers } from "../server/jobs/definition.ts";
import { DELIVERY_BATCH, deliverMany } from "../server/services/outbound/deliver.ts";
import { outboundJobs, type DeliverPayload } from "../server/services/outbound/jobs.ts";

export function outboundWebhookHandlers(deps: Deps): JobHandlers {
  const batcher = new Batcher<DeliverPayload>((payloads) => deliverMany(deps, payloads), DELIVERY_BATCH);
  return new Map([
    jobHandler(outboundJobs.deliverBatch, async ({ deliveryIds }) => {
      // A failure fails the job once every delivery settled: tried again, it skips the attempts recorded.
      const settled = await Promise.allSettled(
        deliveryIds.map((deliveryId) => batcher.add({ deliveryId, attempt: 1 })),
      );
      const failure = settled.find((outcome) => outcome.status === "rejected");
      if (failure) throw failure.reason;
    }),
    jobHandler(outboundJobs.deliver, (payload) => batcher.add(payload)),
  ]);
}
