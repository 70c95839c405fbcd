// The whole API: every procedure is defined once here and served as typed RPC (/trpc over
// HTTP and WebSocket) and as REST (/api/v1/... through trpc-to-openapi).
import { router } from "../server/trpc.ts";
import { authRouter } from "./auth.ts";
import { emailVerificationRouter } from "./email-verification.ts";
import { eventsRouter } from "./events.ts";
import { meRouter } from "./me.ts";
import { otpRouter } from "./otp.ts";
import { passwordResetRouter } from "./password-reset.ts";
import { socialRouter } from "./social.ts";
import { tokensRouter } from "./tokens.ts";

export const appRouter = router({
  auth: authRouter,
  emailVerification: emailVerificationRouter,
  events: eventsRouter,
  me: meRouter,
  otp: otpRouter,
  passwordReset: passwordResetRouter,
  social: socialRouter,
  tokens: tokensRouter,
});

export type AppRouter = typeof appRouter;
