// Sign-in by a one-time code sent by e-mail.
import { z } from "zod";
import { messageResponse } from "../server/records/common.ts";
import { toTokenResponse, tokenResponse } from "../server/records/user.ts";
import { requestOtp, verifyOtp } from "../server/services/accounts/otp.ts";
import { publicProcedure, router } from "../server/trpc.ts";
import { deviceNameInput, emailInput } from "./inputs.ts";

const tags = ["Account sign-in"];

export const otpRouter = router({
  request: publicProcedure
    .meta({
      openapi: {
        summary: "Request a sign-in code by e-mail",
        method: "POST",
        path: "/api/v1/auth/app/otp",
        tags,
        protect: false,
        description:
          "Sends a 6-digit code, valid 10 minutes, to the e-mail (which need not have an account). 3 requests a minute per e-mail.",
      },
    })
    .input(z.object({ email: emailInput }))
    .output(messageResponse)
    .mutation(async ({ ctx, input }) => {
      await requestOtp(ctx.deps, { email: input.email, language: ctx.language });
      return { message: "A sign-in code has been sent to your email address." };
    }),

  verify: publicProcedure
    .meta({
      openapi: {
        summary: "Sign in with an e-mailed code",
        method: "POST",
        path: "/api/v1/auth/app/otp/verify",
        tags,
        protect: false,
        description: "Signs in with the code; creates (and verifies) the account when the e-mail has none.",
      },
    })
    .input(
      z.object({
        email: emailInput,
        token: z.string().regex(/^\d{6}$/, "The token field must be 6 digits."),
        device_name: deviceNameInput.optional(),
      }),
    )
    .output(tokenResponse)
    .mutation(async ({ ctx, input }) => {
      const { user, plaintext } = await verifyOtp(ctx.deps, {
        email: input.email,
        code: input.token,
        deviceName: input.device_name,
      });
      return toTokenResponse(user, plaintext);
    }),
});
