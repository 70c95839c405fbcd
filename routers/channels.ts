import { z } from "zod";
import { VISIBILITIES } from "../db/schema/index.ts";
import { dataOf, listOf, listResponse } from "../server/records/common.ts";
import { channelListRecord, channelMemberRecord, channelRecord } from "../server/records/workspace.ts";
import {
  addToChannel,
  createChannel,
  deleteChannel,
  joinChannel,
  listChannelMembers,
  listChannels,
  removeFromChannel,
  updateChannel,
} from "../server/services/workspaces/channels.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { integerPathIdInput, joinPasswordInput, nameInput, slugInput, userIdInput } from "./inputs.ts";

const tags = ["Channels"];
const inWorkspace = z.object({ workspace_id: z.string() });
const channelPath = inWorkspace.extend({ id: z.string() });

export const channelsRouter = router({
  list: authedProcedure
    .meta({
      openapi: {
        summary: "List channels",
        method: "GET",
        path: "/api/v1/workspaces/{workspace_id}/channels",
        tags,
        description:
          "Public channels, and the private ones the caller is in, each with `is_member` and the caller's read state (`last_read_message_id`, `unread_count`, `mention_count`, `muted`; null on a public channel not joined). Counts stop at 1000.",
      },
    })
    .input(inWorkspace)
    .output(listOf(channelListRecord))
    .query(async ({ ctx, input }) => listResponse(await listChannels(ctx.deps, ctx.auth.user.id, input.workspace_id))),

  create: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Create a channel",
        description: "Owners and admins (403 for members). A taken slug is 422 (`errors.slug`).",
        method: "POST",
        path: "/api/v1/workspaces/{workspace_id}/channels",
        tags,
      },
    })
    .input(
      inWorkspace.extend({
        name: nameInput(120),
        slug: slugInput.optional(),
        visibility: z.enum(VISIBILITIES).optional(),
        password: joinPasswordInput.optional(),
      }),
    )
    .output(dataOf(channelRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await createChannel(ctx.deps, ctx.auth.user.id, input.workspace_id, input),
    })),

  update: authedProcedure
    .meta({
      openapi: {
        summary: "Update a channel",
        method: "PUT",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}",
        tags,
        description: "password null removes the password.",
      },
    })
    .input(
      channelPath.extend({
        name: nameInput(120).optional(),
        slug: slugInput.optional(),
        visibility: z.enum(VISIBILITIES).optional(),
        password: joinPasswordInput.nullable().optional(),
      }),
    )
    .output(dataOf(channelRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await updateChannel(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id, input),
    })),

  delete: authedProcedure
    .meta({
      successStatus: 204,
      openapi: {
        summary: "Delete a channel",
        description:
          "Owners and admins (403 for members); #general cannot be deleted (422). A private channel the caller is not in is 404.",
        method: "DELETE",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}",
        tags,
      },
    })
    .input(channelPath)
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      await deleteChannel(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id);
    }),

  join: authedProcedure
    .meta({
      openapi: {
        summary: "Join a channel",
        description:
          "Workspace members join public channels (with the channel's password when it has one: 422 `errors.password`, 5 tries a minute then 429). A private channel is 404 for non-members.",
        method: "POST",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}/join",
        tags,
      },
    })
    .input(channelPath.extend({ password: z.string().optional() }))
    .output(dataOf(channelRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await joinChannel(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id, input.password),
    })),

  members: authedProcedure
    .meta({
      openapi: {
        summary: "List a channel's members",
        description: "For workspace members who can see the channel.",
        method: "GET",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}/members",
        tags,
      },
    })
    .input(channelPath)
    .output(listOf(channelMemberRecord))
    .query(async ({ ctx, input }) =>
      listResponse(await listChannelMembers(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id)),
    ),

  addMember: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Add a member to a channel",
        method: "POST",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}/members",
        tags,
        description: "Owners, admins and the channel's members add a workspace member.",
      },
    })
    .input(channelPath.extend({ user_id: userIdInput }))
    .output(dataOf(channelMemberRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await addToChannel(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id, input.user_id),
    })),

  removeMember: authedProcedure
    .meta({
      successStatus: 204,
      openapi: {
        summary: "Remove a member from a channel",
        description: "Owners and admins remove anyone; a member may remove themselves (leave).",
        method: "DELETE",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}/members/{user_id}",
        tags,
      },
    })
    // A user id that cannot exist is answered as an unknown one: 404.
    .input(channelPath.extend({ user_id: integerPathIdInput }))
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      await removeFromChannel(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id, input.user_id);
    }),
});
