import { z } from "zod";
import { messageResponse } from "../server/records/common.ts";
import { sendVerificationEmail, verifyEmail } from "../server/services/accounts/email-verification.ts";
import { authedProcedure, publicProcedure, router } from "../server/trpc.ts";
import { integerPathIdInput } from "./inputs.ts";

const tags = ["E-mail verification"];

export const emailVerificationRouter = router({
  verify: publicProcedure
    .meta({
      openapi: {
        summary: "Verify the e-mail address",
        method: "GET",
        path: "/api/v1/auth/email/verify/{id}/{hash}",
        tags,
        protect: false,
        description: "The signed link from the verification mail. Redirects to FRONTEND_URL when it is set.",
      },
    })
    .input(
      z.object({
        // An id that cannot be a user's makes the link invalid (404), like any unknown id.
        id: integerPathIdInput,
        hash: z.string(),
        // Missing signature parts make the link invalid (404), not the request (422).
        expires: z.string().default(""),
        signature: z.string().default(""),
      }),
    )
    .output(messageResponse)
    .query(async ({ ctx, input }) => {
      await verifyEmail(ctx.deps, input);
      const frontendUrl = ctx.deps.config.frontendUrl;
      if (frontendUrl) {
        const target = new URL(frontendUrl);
        target.searchParams.set("verified", "1");
        ctx.response.status = 302;
        ctx.response.headers.Location = target.toString();
      }
      return { message: "Your e-mail address is verified." };
    }),

  resend: authedProcedure
    .meta({
      openapi: {
        summary: "Resend the verification e-mail",
        description:
          "Sends a new signed link (valid 60 minutes) to the caller's address; answers 200 and sends nothing when it is already verified.",
        method: "POST",
        path: "/api/v1/auth/email/verification-notification",
        tags,
      },
    })
    .input(z.void())
    .output(messageResponse)
    .mutation(async ({ ctx }) => {
      if (ctx.auth.user.emailVerifiedAt) return { message: "Your e-mail address is already verified." };
      await sendVerificationEmail(ctx.deps, ctx.auth.user);
      return { message: "A new verification link has been sent to your e-mail address." };
    }),
});
