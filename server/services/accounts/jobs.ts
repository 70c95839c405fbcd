// The maintenance job that deletes expired credentials (prune-expired.ts). Scheduled hourly by
// workers/index.ts: a BullMQ job scheduler with Redis, a timer in the process without.
import { z } from "zod";
import { defineJob } from "../../jobs/definition.ts";

export const PRUNE_EXPIRED_CREDENTIALS_EVERY_MS = 60 * 60 * 1000;

export const accountJobs = {
  pruneExpired: defineJob({
    queue: "maintenance",
    name: "accounts.prune-expired",
    payload: z.object({}),
    attempts: 3,
    backoffMs: 60_000,
  }),
};
