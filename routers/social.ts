// Social sign-in and account linking, app variant (bearer tokens) and web variant (cookie).
import { z } from "zod";
import { appendResponseHeader } from "../server/context.ts";
import { sessionCookie } from "../server/http/cookies.ts";
import { dataOf, messageResponse } from "../server/records/common.ts";
import {
  linkedAccountRecord,
  socialAccountRecord,
  toLinkedAccountRecord,
  toSocialAccountRecord,
} from "../server/records/social-account.ts";
import { toTokenResponse, toUserRecord, tokenResponse, userRecord } from "../server/records/user.ts";
import { WEB_SESSION_LIFETIME_MS } from "../server/services/accounts/sign-in.ts";
import {
  linkSocialAccount,
  listSocialAccounts,
  signInWithSocial,
  startSocialAuthorization,
  unlinkSocialAccount,
} from "../server/services/social/social-sign-in.ts";
import { authedProcedure, publicProcedure, router } from "../server/trpc.ts";
import { deviceNameInput } from "./inputs.ts";

const tags = ["Social sign-in"];
const providerInput = z.object({ provider: z.string() });
const callbackInput = providerInput.extend({
  code: z.string().min(1),
  state: z.string().optional(),
  device_name: deviceNameInput.optional(),
});
const redirectResponse = z.object({ redirect_url: z.string() });

export const socialRouter = router({
  redirect: publicProcedure
    .meta({
      openapi: {
        summary: "Start a social sign-in",
        method: "POST",
        path: "/api/v1/auth/app/social/{provider}/redirect",
        tags,
        protect: false,
        description: "An authorization URL with state, PKCE (S256) and, for OpenID Connect, a nonce; valid 10 minutes.",
      },
    })
    .input(providerInput)
    .output(redirectResponse)
    .mutation(async ({ ctx, input }) => ({
      redirect_url: await startSocialAuthorization(ctx.deps, input.provider, "app"),
    })),

  callback: publicProcedure
    .meta({
      openapi: {
        summary: "Finish a social sign-in",
        description:
          "Exchanges the provider's `code` (and the `state` from redirect) and answers the token response: the linked user, else the user with the provider-verified e-mail, else a new account. No token needed. 422 on a bad code, state or provider, 403 for an inactive account, 503 when the provider cannot be reached.",
        method: "POST",
        path: "/api/v1/auth/app/social/{provider}/callback",
        tags,
        protect: false,
      },
    })
    .input(callbackInput)
    .output(tokenResponse)
    .mutation(async ({ ctx, input }) => {
      const { user, plaintext } = await signInWithSocial(
        ctx.deps,
        input.provider,
        { code: input.code, state: input.state, deviceName: input.device_name },
        "app",
      );
      return toTokenResponse(user, plaintext);
    }),

  accounts: authedProcedure
    .meta({
      openapi: {
        summary: "List linked social accounts",
        description: "The caller's linked provider accounts.",
        method: "GET",
        path: "/api/v1/auth/app/social/accounts",
        tags,
      },
    })
    .input(z.void())
    .output(z.object({ accounts: z.array(socialAccountRecord) }))
    .query(async ({ ctx }) => ({
      accounts: (await listSocialAccounts(ctx.deps, ctx.auth.user.id)).map(toSocialAccountRecord),
    })),

  link: authedProcedure
    .meta({
      openapi: {
        summary: "Start linking a social account",
        description:
          "An authorization URL bound to the caller; the provider sends the app its code and state for link/callback.",
        method: "POST",
        path: "/api/v1/auth/app/social/{provider}/link",
        tags,
      },
    })
    .input(providerInput)
    .output(redirectResponse)
    .mutation(async ({ ctx, input }) => ({
      redirect_url: await startSocialAuthorization(ctx.deps, input.provider, "link", ctx.auth.user.id),
    })),

  linkCallback: authedProcedure
    .meta({
      openapi: {
        summary: "Finish linking a social account",
        description:
          "Links the provider account to the caller. 422 when it is already linked to the caller or to another user, or when the caller already has an account of that provider.",
        method: "POST",
        path: "/api/v1/auth/app/social/{provider}/link/callback",
        tags,
      },
    })
    .input(callbackInput)
    .output(z.object({ account: linkedAccountRecord, message: z.string() }))
    .mutation(async ({ ctx, input }) => {
      const account = await linkSocialAccount(ctx.deps, ctx.auth, input.provider, {
        code: input.code,
        state: input.state,
      });
      return { account: toLinkedAccountRecord(account), message: "Social account linked." };
    }),

  unlink: authedProcedure
    .meta({
      openapi: {
        summary: "Unlink a social account",
        description:
          "404 when the account is not linked; 422 when it is the caller's last way to sign in (set a password first).",
        method: "DELETE",
        path: "/api/v1/auth/app/social/{provider}/unlink",
        tags,
      },
    })
    .input(providerInput)
    .output(messageResponse)
    .mutation(async ({ ctx, input }) => {
      await unlinkSocialAccount(ctx.deps, ctx.auth, input.provider);
      return { message: "Social account unlinked." };
    }),

  webRedirect: publicProcedure
    .meta({
      openapi: {
        summary: "Start a social sign-in (web)",
        method: "POST",
        path: "/api/v1/auth/web/social/{provider}/redirect",
        tags,
        protect: false,
        description:
          "Web variant: the provider sends the browser back to GET /api/v1/auth/web/social/{provider}/callback.",
      },
    })
    .input(providerInput)
    .output(redirectResponse)
    .mutation(async ({ ctx, input }) => ({
      redirect_url: await startSocialAuthorization(ctx.deps, input.provider, "web"),
    })),

  webCallback: publicProcedure
    .meta({
      openapi: {
        summary: "Finish a social sign-in (web)",
        method: "GET",
        path: "/api/v1/auth/web/social/{provider}/callback",
        tags,
        protect: false,
        description:
          "Where the provider sends the browser (web variant): signs in, sets the session cookie, and redirects to FRONTEND_URL when it is set.",
      },
    })
    .input(providerInput.extend({ code: z.string().min(1), state: z.string().min(1) }))
    .output(dataOf(userRecord))
    .query(async ({ ctx, input }) => {
      const { user, plaintext } = await signInWithSocial(
        ctx.deps,
        input.provider,
        { code: input.code, state: input.state },
        "web",
      );
      appendResponseHeader(
        ctx,
        "Set-Cookie",
        sessionCookie(ctx.deps.config, plaintext, Math.floor(WEB_SESSION_LIFETIME_MS / 1000)),
      );
      if (ctx.deps.config.frontendUrl) {
        ctx.response.status = 302;
        ctx.response.headers.Location = ctx.deps.config.frontendUrl;
      }
      return { data: toUserRecord(user) };
    }),
});
