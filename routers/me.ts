import { z } from "zod";
import { toUserRecord, userRecord } from "../server/records/user.ts";
import { updateProfile } from "../server/services/accounts/profile.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { httpUrlInput, languageInput, nameInput } from "./inputs.ts";

const tags = ["Account"];

export const meRouter = router({
  get: authedProcedure
    .meta({
      openapi: {
        summary: "Get the current user",
        method: "GET",
        path: "/api/v1/me",
        tags,
        description: "Accepts a bearer token or the web session cookie.",
      },
    })
    .input(z.void())
    .output(userRecord)
    .query(({ ctx }) => toUserRecord(ctx.auth.user)),

  update: authedProcedure
    .meta({
      openapi: {
        summary: "Update the current user",
        description:
          "Changes name (max 255), preferred_language or avatar_url (http(s), max 2048, or null); answers the user object.",
        method: "PATCH",
        path: "/api/v1/me",
        tags,
      },
    })
    .input(
      z.object({
        name: nameInput(255).optional(),
        preferred_language: languageInput.optional(),
        avatar_url: httpUrlInput.nullable().optional(),
      }),
    )
    .output(userRecord)
    .mutation(async ({ ctx, input }) => {
      const user = await updateProfile(ctx.deps, ctx.auth.user.id, {
        name: input.name,
        preferredLanguage: input.preferred_language,
        avatarUrl: input.avatar_url,
      });
      return toUserRecord(user);
    }),
});
