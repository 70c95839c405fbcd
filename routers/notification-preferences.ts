// Push preferences (docs/push.md): per channel (level and mute), per direct conversation (mute)
// and the user's own default level for channels. Each GET and PUT is one statement after the
// token check (server/services/push/preferences.ts).
import { z } from "zod";
import { CHANNEL_PUSH_LEVELS } from "../db/schema/index.ts";
import { dataOf } from "../server/records/common.ts";
import {
  channelNotificationPreferencesRecord,
  conversationNotificationPreferencesRecord,
  userNotificationPreferencesRecord,
} from "../server/services/push/preference-records.ts";
import {
  CHANNEL_PUSH_SETTINGS,
  channelPreferences,
  conversationPreferences,
  userPreferences,
} from "../server/services/push/preferences.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { booleanInput } from "./inputs.ts";

const tags = ["Notification preferences"];
const channelPath = z.object({ workspace_id: z.string(), id: z.string() });
const conversationPath = z.object({ conversation_id: z.string() });
const channelRules =
  "The caller must be a member of the channel: 404 for whoever may not read it, 403 for a workspace member who has not joined it.";

export const notificationPreferencesRouter = router({
  getChannel: authedProcedure
    .meta({
      openapi: {
        summary: "Get a channel's notification preferences",
        method: "GET",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}/notification-preferences",
        tags,
        description: `The caller's push level in the channel and whether they muted it. ${channelRules}`,
      },
    })
    .input(channelPath)
    .output(dataOf(channelNotificationPreferencesRecord))
    .query(async ({ ctx, input }) => ({
      data: await channelPreferences(ctx.deps, ctx.auth.user.id, {
        workspaceId: input.workspace_id,
        channelId: input.id,
      }),
    })),

  updateChannel: authedProcedure
    .meta({
      openapi: {
        summary: "Change a channel's notification preferences",
        method: "PUT",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}/notification-preferences",
        tags,
        description: `Either field may be sent alone (the other keeps its value); neither is 422. ${channelRules}`,
      },
    })
    .input(
      channelPath
        .extend({ push: z.enum(CHANNEL_PUSH_SETTINGS).optional(), muted: booleanInput.optional() })
        .superRefine((value, ctx) => {
          if (value.push === undefined && value.muted === undefined) {
            ctx.addIssue({
              code: "custom",
              path: ["push"],
              message: "The push field is required when muted is not present.",
            });
          }
        }),
    )
    .output(dataOf(channelNotificationPreferencesRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await channelPreferences(
        ctx.deps,
        ctx.auth.user.id,
        { workspaceId: input.workspace_id, channelId: input.id },
        { push: input.push, muted: input.muted },
      ),
    })),

  getConversation: authedProcedure
    .meta({
      openapi: {
        summary: "Get a direct conversation's notification preferences",
        method: "GET",
        path: "/api/v1/direct-conversations/{conversation_id}/notification-preferences",
        tags,
        description: "Whether the caller muted the conversation. Participants only (404 otherwise).",
      },
    })
    .input(conversationPath)
    .output(dataOf(conversationNotificationPreferencesRecord))
    .query(async ({ ctx, input }) => ({
      data: await conversationPreferences(ctx.deps, ctx.auth.user.id, input.conversation_id),
    })),

  updateConversation: authedProcedure
    .meta({
      openapi: {
        summary: "Mute or unmute a direct conversation",
        method: "PUT",
        path: "/api/v1/direct-conversations/{conversation_id}/notification-preferences",
        tags,
        description: "Participants only (404 otherwise).",
      },
    })
    .input(conversationPath.extend({ muted: booleanInput }))
    .output(dataOf(conversationNotificationPreferencesRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await conversationPreferences(ctx.deps, ctx.auth.user.id, input.conversation_id, { muted: input.muted }),
    })),

  getMine: authedProcedure
    .meta({
      openapi: {
        summary: "Get the current user's notification preferences",
        method: "GET",
        path: "/api/v1/me/notification-preferences",
        tags,
        description: "`channel_push`: the push level of every channel left at `default` (`mentions` unless set).",
      },
    })
    .input(z.void())
    .output(dataOf(userNotificationPreferencesRecord))
    .query(async ({ ctx }) => ({ data: await userPreferences(ctx.deps, ctx.auth.user.id) })),

  updateMine: authedProcedure
    .meta({
      openapi: {
        summary: "Change the current user's notification preferences",
        method: "PUT",
        path: "/api/v1/me/notification-preferences",
        tags,
        description: "`channel_push`: `all`, `mentions` or `none`, for every channel left at `default`.",
      },
    })
    .input(z.object({ channel_push: z.enum(CHANNEL_PUSH_LEVELS) }))
    .output(dataOf(userNotificationPreferencesRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await userPreferences(ctx.deps, ctx.auth.user.id, { channel_push: input.channel_push }),
    })),
});
