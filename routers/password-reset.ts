// Forgotten passwords: a reset token by e-mail, then a new password.
import { z } from "zod";
import { messageResponse } from "../server/records/common.ts";
import { requestPasswordReset, resetPassword } from "../server/services/accounts/password-reset.ts";
import { publicProcedure, router } from "../server/trpc.ts";
import { emailInput, passwordConfirmed, passwordInput } from "./inputs.ts";

const tags = ["Account sign-in"];

export const passwordResetRouter = router({
  request: publicProcedure
    .meta({
      openapi: {
        summary: "Request a password reset e-mail",
        description:
          "Mails a reset token (single use, 60 minutes). No token needed. 422 (`errors.email`) when no account has the e-mail; 3 mails a minute per e-mail, then 429.",
        method: "POST",
        path: "/api/v1/auth/app/forgot-password",
        tags,
        protect: false,
      },
    })
    .input(z.object({ email: emailInput }))
    .output(messageResponse)
    .mutation(async ({ ctx, input }) => {
      await requestPasswordReset(ctx.deps, input);
      return { message: "We have emailed your password reset link." };
    }),

  reset: publicProcedure
    .meta({
      openapi: {
        summary: "Reset the password with an e-mailed token",
        method: "POST",
        path: "/api/v1/auth/app/reset-password",
        tags,
        protect: false,
        description: "Sets a new password with the e-mailed token (single use, 60 minutes) and signs out every device.",
      },
    })
    .input(
      z
        .object({
          token: z.string().min(1),
          email: emailInput,
          password: passwordInput,
          password_confirmation: z.string(),
        })
        .superRefine(passwordConfirmed),
    )
    .output(messageResponse)
    .mutation(async ({ ctx, input }) => {
      await resetPassword(ctx.deps, { email: input.email, token: input.token, password: input.password });
      return { message: "Your password has been reset." };
    }),
});
