// The maintenance job that removes unclaimed staged files (prune-staged.ts). Scheduled hourly
// by workers/index.ts: a BullMQ job scheduler with Redis, a timer in the process without.
import { z } from "zod";
import { defineJob } from "../../jobs/definition.ts";

export const PRUNE_STAGED_FILES_EVERY_MS = 60 * 60 * 1000;

export const fileJobs = {
  pruneStaged: defineJob({
    queue: "maintenance",
    name: "files.prune-staged",
    payload: z.object({}),
    attempts: 3,
    backoffMs: 60_000,
  }),
};
