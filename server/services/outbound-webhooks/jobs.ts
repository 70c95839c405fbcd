// The outbound-webhooks queue. `outbound.first` carries the first attempts of up to
// FIRSTS_PER_JOB deliveries that the consumer of the event log wrote in one batch (its id
// `deliver-p<position of the first event>-<chunk>`); `outbound.deliver` is one later attempt of
// one delivery, `deliver-<delivery id>-<n>`, written by the attempt before (delayed). Each is
// written in the transaction that wrote its reason, so a crash after a commit loses nothing, and
// a job that runs twice records and retries nothing twice (deliver.ts skips an attempt already
// made).
import { z } from "zod";
import { defineJob } from "../../jobs/definition.ts";

/**
 * First attempts one `outbound.first` job carries at most (the worker's batcher sends them, at
 * most DELIVERY_BATCH.inFlight at once).
 */
export const FIRSTS_PER_JOB = 100;

export const outboundJobs = {
  deliver: defineJob({
    queue: "outbound-webhooks",
    name: "outbound.deliver",
    payload: z.object({ deliveryId: z.string().min(1), attempt: z.number().int().min(1) }),
    // A failed send is retried by the next attempt's job; these cover the database being away.
    attempts: 5,
    backoffMs: 1_000,
  }),
  first: defineJob({
    queue: "outbound-webhooks",
    name: "outbound.first",
    payload: z.object({ deliveryIds: z.array(z.string().min(1)).min(1).max(FIRSTS_PER_JOB) }),
    attempts: 5,
    backoffMs: 1_000,
  }),
};

export type DeliverPayload = z.infer<typeof outboundJobs.deliver.payload>;

export const deliverJobId = (payload: DeliverPayload) => `deliver-${payload.deliveryId}-${payload.attempt}`;
