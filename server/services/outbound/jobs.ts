// The outbound-webhooks queue: the first attempts of the deliveries the outbound consumer wrote
// for one batch of the event log, one job `deliver-batch-<position>` (the position of the batch's
// last such event), and one job per later attempt of a delivery, `deliver-<delivery id>-<n>`,
// written by the attempt before (delayed); each in the transaction that wrote its reason, so a
// crash after a commit loses nothing and a job that runs twice records and retries nothing twice
// (deliver.ts).
import { z } from "zod";
import { defineJob } from "../../jobs/definition.ts";

/** Deliveries in one `outbound.deliver-batch` job. */
export const MAX_DELIVERY_BATCH = 5_000;

export const outboundJobs = {
  deliverBatch: defineJob({
    queue: "outbound-webhooks",
    name: "outbound.deliver-batch",
    payload: z.object({ deliveryIds: z.array(z.string().min(1)).min(1).max(MAX_DELIVERY_BATCH) }),
    // Tried again whole when any of its deliveries failed to be recorded (the database away):
    // an attempt already recorded is not made again.
    attempts: 5,
    backoffMs: 1_000,
  }),
  deliver: defineJob({
    queue: "outbound-webhooks",
    name: "outbound.deliver",
    payload: z.object({ deliveryId: z.string().min(1), attempt: z.number().int().min(1) }),
    // A failed send is retried by the next attempt's job; these cover the database being away.
    attempts: 5,
    backoffMs: 1_000,
  }),
};

export type DeliverPayload = z.infer<typeof outboundJobs.deliver.payload>;

export const deliverJobId = (payload: DeliverPayload) => `deliver-${payload.deliveryId}-${payload.attempt}`;
export const deliverBatchJobId = (position: number) => `deliver-batch-${position}`;
