// Account sign-in (app and web variants), logout, password change.
import { z } from "zod";
import { appendResponseHeader } from "../server/context.ts";
import { clearedSessionCookie, sessionCookie } from "../server/http/cookies.ts";
import { messageResponse, dataOf } from "../server/records/common.ts";
import { toTokenResponse, toUserRecord, tokenResponse, userRecord } from "../server/records/user.ts";
import { changePassword } from "../server/services/accounts/change-password.ts";
import { registerUser } from "../server/services/accounts/register.ts";
import { completeSignIn, verifyCredentials, WEB_SESSION_LIFETIME_MS } from "../server/services/accounts/sign-in.ts";
import { revokeToken } from "../server/services/accounts/tokens.ts";
import { authedProcedure, publicProcedure, router } from "../server/trpc.ts";
import { deviceNameInput, emailInput, nameInput, languageInput, passwordConfirmed, passwordInput } from "./inputs.ts";

const tags = ["Account sign-in"];

export const authRouter = router({
  register: publicProcedure
    .meta({
      openapi: {
        summary: "Register an account",
        description:
          "Creates the account, sends the e-mail verification link and answers the token response (200). No token needed. 422 on validation (e-mail taken, password shorter than 8 characters or not confirmed).",
        method: "POST",
        path: "/api/v1/auth/app/register",
        tags,
        protect: false,
      },
    })
    .input(
      z
        .object({
          name: nameInput(255),
          email: emailInput,
          password: passwordInput,
          password_confirmation: z.string(),
          preferred_language: languageInput.nullable().optional(),
          device_name: deviceNameInput.optional(),
        })
        .superRefine(passwordConfirmed),
    )
    .output(tokenResponse)
    .mutation(async ({ ctx, input }) => {
      const { user, plaintext } = await registerUser(ctx.deps, {
        name: input.name,
        email: input.email,
        password: input.password,
        preferredLanguage: input.preferred_language,
        deviceName: input.device_name,
      });
      return toTokenResponse(user, plaintext);
    }),

  login: publicProcedure
    .meta({
      openapi: {
        summary: "Sign in with e-mail and password",
        description:
          "Answers the token response; `device_name` labels the token. No token needed. 422 (`errors.email`) for a wrong e-mail or password, 403 for an inactive account, 429 after 5 attempts a minute per e-mail and IP.",
        method: "POST",
        path: "/api/v1/auth/app/login",
        tags,
        protect: false,
      },
    })
    .input(z.object({ email: z.string().min(1), password: z.string().min(1), device_name: deviceNameInput.optional() }))
    .output(tokenResponse)
    .mutation(async ({ ctx, input }) => {
      const user = await verifyCredentials(ctx.deps, { email: input.email, password: input.password, ip: ctx.ip });
      const signedIn = await completeSignIn(ctx.deps, user, { kind: "sign_in", deviceName: input.device_name });
      return toTokenResponse(signedIn.user, signedIn.plaintext);
    }),

  logout: authedProcedure
    .meta({
      ability: null,
      openapi: {
        summary: "Sign out (revoke the current token)",
        description: "Revokes the token used for this call. Any valid token may log itself out.",
        method: "POST",
        path: "/api/v1/auth/app/logout",
        tags: ["Account"],
      },
    })
    .input(z.void())
    .output(messageResponse)
    .mutation(async ({ ctx }) => {
      await revokeToken(ctx.deps, ctx.auth.user.id, ctx.auth.token.id);
      return { message: "Logged out." };
    }),

  changePassword: authedProcedure
    .meta({
      openapi: {
        summary: "Change the password",
        description:
          "Needs the current password (422 `errors.current_password` when wrong; 5 tries a minute, then 429). Signs out every other device and web session; personal access tokens and the token used stay.",
        method: "POST",
        path: "/api/v1/auth/app/change-password",
        tags: ["Account"],
      },
    })
    .input(
      z
        .object({ current_password: z.string().min(1), password: passwordInput, password_confirmation: z.string() })
        .superRefine(passwordConfirmed),
    )
    .output(messageResponse)
    .mutation(async ({ ctx, input }) => {
      await changePassword(ctx.deps, ctx.auth, { currentPassword: input.current_password, password: input.password });
      return { message: "Password changed." };
    }),

  webLogin: publicProcedure
    .meta({
      openapi: {
        summary: "Sign in with a cookie session",
        method: "POST",
        path: "/api/v1/auth/web/login",
        tags: ["Web session"],
        protect: false,
        description: "Signs in with a cookie session (HttpOnly, SameSite=Lax) for browser apps.",
      },
    })
    .input(z.object({ email: z.string().min(1), password: z.string().min(1) }))
    .output(dataOf(userRecord))
    .mutation(async ({ ctx, input }) => {
      const user = await verifyCredentials(ctx.deps, { email: input.email, password: input.password, ip: ctx.ip });
      const signedIn = await completeSignIn(ctx.deps, user, { kind: "session" });
      const maxAge = Math.floor(WEB_SESSION_LIFETIME_MS / 1000);
      appendResponseHeader(ctx, "Set-Cookie", sessionCookie(ctx.deps.config, signedIn.plaintext, maxAge));
      return { data: toUserRecord(signedIn.user) };
    }),

  webLogout: authedProcedure
    .meta({
      ability: null,
      openapi: {
        summary: "Sign out of the cookie session",
        description: "Revokes the web session and clears the cookie. Any valid session or token may call it.",
        method: "POST",
        path: "/api/v1/auth/web/logout",
        tags: ["Web session"],
      },
    })
    .input(z.void())
    .output(messageResponse)
    .mutation(async ({ ctx }) => {
      await revokeToken(ctx.deps, ctx.auth.user.id, ctx.auth.token.id);
      appendResponseHeader(ctx, "Set-Cookie", clearedSessionCookie(ctx.deps.config));
      return { message: "Logged out." };
    }),
});
