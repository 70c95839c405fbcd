// Personal access tokens with abilities. Only a full token ("*": a sign-in token or the web
// session) may create one, so a token can never mint a stronger token than itself.
import { z } from "zod";
import { ABILITIES } from "../server/abilities.ts";
import { notFound } from "../server/errors.ts";
import { accessTokenRecord, toAccessTokenRecord } from "../server/records/access-token.ts";
import { listOf, listResponse } from "../server/records/common.ts";
import { issueToken, listTokens, revokeToken } from "../server/services/accounts/tokens.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { nameInput } from "./inputs.ts";

const tags = ["Personal access tokens"];

export const tokensRouter = router({
  list: authedProcedure
    .meta({
      openapi: {
        summary: "List the caller's tokens",
        method: "GET",
        path: "/api/v1/tokens",
        tags,
        description: "Every active token of the caller: sign-in tokens, web sessions and personal access tokens.",
      },
    })
    .input(z.void())
    .output(listOf(accessTokenRecord))
    .query(async ({ ctx }) => {
      const tokens = await listTokens(ctx.deps.db, ctx.auth.user.id, ctx.deps.clock.now());
      return listResponse(tokens.map(toAccessTokenRecord));
    }),

  create: authedProcedure
    .meta({
      ability: "*",
      successStatus: 201,
      openapi: {
        summary: "Create a personal access token",
        description:
          "The plain token is in the answer only, once. Needs a token with the `*` ability (a sign-in token or web session), so no token can mint a stronger one.",
        method: "POST",
        path: "/api/v1/tokens",
        tags,
      },
    })
    .input(z.object({ name: nameInput(255), abilities: z.array(z.enum(ABILITIES)).min(1).max(50) }))
    .output(z.object({ data: accessTokenRecord, access_token: z.string(), token_type: z.literal("Bearer") }))
    .mutation(async ({ ctx, input }) => {
      const { token, plaintext } = await issueToken(ctx.deps.db, {
        userId: ctx.auth.user.id,
        kind: "personal",
        name: input.name,
        abilities: [...new Set(input.abilities)],
        now: ctx.deps.clock.now(),
      });
      return { data: toAccessTokenRecord(token), access_token: plaintext, token_type: "Bearer" as const };
    }),

  delete: authedProcedure
    .meta({
      successStatus: 204,
      openapi: {
        summary: "Revoke a token",
        description: "Any of the caller's own tokens (sign-out of a lost device); another user's token is 404.",
        method: "DELETE",
        path: "/api/v1/tokens/{id}",
        tags,
      },
    })
    .input(z.object({ id: z.string() }))
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      const revoked = await revokeToken(ctx.deps, ctx.auth.user.id, input.id);
      if (!revoked) throw notFound("Token not found.");
    }),
});
