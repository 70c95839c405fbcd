// The mail queue's jobs. Payloads carry ids: the worker reads the current record, so a mail
// rendered after a retry uses the recipient's current name and language.
import { z } from "zod";
import { defineJob } from "../jobs/definition.ts";

export const mailJobs = {
  verifyEmail: defineJob({
    queue: "mail",
    name: "mail.verify-email",
    payload: z.object({ userId: z.number().int() }),
    attempts: 8,
    backoffMs: 2_000,
  }),
};
