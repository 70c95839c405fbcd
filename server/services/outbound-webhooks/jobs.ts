// The outbound-webhooks queue: one job per attempt of a delivery, `deliver-<delivery id>-<n>`,
// written by the dispatcher (the first) and by the attempt before (the next, delayed), each in
// the transaction that wrote its reason, so a crash after a commit loses nothing and a job that
// runs twice records and retries nothing twice (deliver.ts).
import { z } from "zod";
import { defineJob } from "../../jobs/definition.ts";

export const outboundJobs = {
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
