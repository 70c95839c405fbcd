// The mail queue's jobs. Payloads carry ids, so a mail rendered after a retry uses the
// recipient's current name and language; the one secret a mail must carry (a sign-in code,
// a reset token) travels sealed with APP_KEY.
import { z } from "zod";
import { LANGUAGES } from "../../db/schema/index.ts";
import { defineJob } from "../jobs/definition.ts";

const mailRetries = { attempts: 8, backoffMs: 2_000 };

export const mailJobs = {
  verifyEmail: defineJob({
    queue: "mail",
    name: "mail.verify-email",
    payload: z.object({ userId: z.number().int() }),
    ...mailRetries,
  }),
  otpCode: defineJob({
    queue: "mail",
    name: "mail.otp-code",
    payload: z.object({ codeId: z.string(), sealedCode: z.string(), language: z.enum(LANGUAGES).nullable() }),
    ...mailRetries,
  }),
  passwordReset: defineJob({
    queue: "mail",
    name: "mail.password-reset",
    payload: z.object({ resetId: z.string(), userId: z.number().int(), sealedToken: z.string() }),
    ...mailRetries,
  }),
};
