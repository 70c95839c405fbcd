import { z } from "zod";
import { ROLES } from "../db/schema/index.ts";
import { dataOf, listOf, listResponse } from "../server/records/common.ts";
import { memberRecord } from "../server/records/workspace.ts";
import { listMembers, removeMember, updateMember } from "../server/services/workspaces/members.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { languageInput } from "./inputs.ts";

const tags = ["Members"];
const memberPath = z.object({ workspace_id: z.string(), id: z.string() });

export const membersRouter = router({
  list: authedProcedure
    .meta({
      openapi: {
        summary: "List a workspace's members",
        description: "For the workspace's members; 404 for anyone else.",
        method: "GET",
        path: "/api/v1/workspaces/{workspace_id}/members",
        tags,
      },
    })
    .input(z.object({ workspace_id: z.string() }))
    .output(listOf(memberRecord))
    .query(async ({ ctx, input }) => listResponse(await listMembers(ctx.deps, ctx.auth.user.id, input.workspace_id))),

  update: authedProcedure
    .meta({
      openapi: {
        summary: "Update a member",
        method: "PUT",
        path: "/api/v1/workspaces/{workspace_id}/members/{id}",
        tags,
        description:
          "Owners and admins change roles; a member may only set their own preferred_language (sending their current role).",
      },
    })
    .input(memberPath.extend({ role: z.enum(ROLES), preferred_language: languageInput.nullable().optional() }))
    .output(dataOf(memberRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await updateMember(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id, {
        role: input.role,
        preferredLanguage: input.preferred_language,
      }),
    })),

  remove: authedProcedure
    .meta({
      successStatus: 204,
      openapi: {
        summary: "Remove a member",
        method: "DELETE",
        path: "/api/v1/workspaces/{workspace_id}/members/{id}",
        tags,
        description: "Owners and admins remove members; anyone may remove themselves (leave).",
      },
    })
    .input(memberPath)
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      await removeMember(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id);
    }),
});
