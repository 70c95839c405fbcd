import { z } from "zod";
import { dataOf, listOf, listResponse } from "../server/records/common.ts";
import { invitePreviewRecord, inviteRecord, workspaceRecord } from "../server/records/workspace.ts";
import {
  acceptInvite,
  createInvite,
  deleteInvite,
  listInvites,
  previewInvite,
} from "../server/services/workspaces/invites.ts";
import { authedProcedure, publicProcedure, router } from "../server/trpc.ts";
import { boundedIntegerInput } from "./inputs.ts";

const tags = ["Invites"];
const inWorkspace = z.object({ workspace_id: z.string() });

export const invitesRouter = router({
  preview: publicProcedure
    .meta({
      rateLimitPerIp: "invitePreview",
      openapi: {
        summary: "Preview an invite",
        method: "GET",
        path: "/api/v1/invites/{token}",
        tags,
        protect: false,
        description:
          "Public preview for the join screen; 30 a minute per IP, with x-ratelimit-limit and x-ratelimit-remaining.",
      },
    })
    .input(z.object({ token: z.string() }))
    .output(dataOf(invitePreviewRecord))
    .query(async ({ ctx, input }) => ({ data: await previewInvite(ctx.deps, input.token) })),

  accept: authedProcedure
    .meta({
      openapi: {
        summary: "Accept an invite",
        method: "POST",
        path: "/api/v1/invites/{token}/accept",
        tags,
        description: "Adds the caller to the workspace (nothing changes for a member).",
      },
    })
    .input(z.object({ token: z.string() }))
    .output(dataOf(workspaceRecord))
    .mutation(async ({ ctx, input }) => ({ data: await acceptInvite(ctx.deps, ctx.auth.user.id, input.token) })),

  list: authedProcedure
    .meta({
      openapi: {
        summary: "List a workspace's invites",
        description: "Owners and admins; a member gets 404 (invites are not visible to members).",
        method: "GET",
        path: "/api/v1/workspaces/{workspace_id}/invites",
        tags,
      },
    })
    .input(inWorkspace)
    .output(listOf(inviteRecord))
    .query(async ({ ctx, input }) => listResponse(await listInvites(ctx.deps, ctx.auth.user.id, input.workspace_id))),

  create: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Create an invite",
        method: "POST",
        path: "/api/v1/workspaces/{workspace_id}/invites",
        tags,
        description: "expires_in_days 1..365; absent or null: never expires.",
      },
    })
    .input(inWorkspace.extend({ expires_in_days: boundedIntegerInput(1, 365).nullable().optional() }))
    .output(dataOf(inviteRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await createInvite(ctx.deps, ctx.auth.user.id, input.workspace_id, input.expires_in_days),
    })),

  delete: authedProcedure
    .meta({
      successStatus: 204,
      openapi: {
        summary: "Delete an invite",
        description: "Owners and admins; the link stops working at once. A member gets 404.",
        method: "DELETE",
        path: "/api/v1/workspaces/{workspace_id}/invites/{id}",
        tags,
      },
    })
    .input(inWorkspace.extend({ id: z.string() }))
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      await deleteInvite(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id);
    }),
});
