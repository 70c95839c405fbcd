// Read state (docs/unread.md): read positions in channels and direct conversations, marking
// unread, and every unread count of the caller in one call.
import { z } from "zod";
import { dataOf } from "../server/records/common.ts";
import { placeCounts, unreadSummaryRecord } from "../server/records/read-state.ts";
import { idPattern } from "../server/ids.ts";
import { moveReadPosition, unreadSummary, type ReadPlace } from "../server/services/messaging/read-state.ts";
import { authedProcedure, router } from "../server/trpc.ts";

const tags = ["Read state"];
const messageIdInput = z.string().regex(idPattern("message"), "The :attribute field must be a message id.");
const channelInput = z.object({ workspace_id: z.string(), id: z.string(), message_id: messageIdInput });
const conversationInput = z.object({ conversation_id: z.string(), message_id: messageIdInput });

const channelPlace = (input: z.infer<typeof channelInput>): ReadPlace => ({
  kind: "channel",
  workspaceId: input.workspace_id,
  channelId: input.id,
});
const conversationPlace = (input: z.infer<typeof conversationInput>): ReadPlace => ({
  kind: "conversation",
  conversationId: input.conversation_id,
});

const READ =
  "Everything up to and including `message_id` is read; an older id changes nothing. Answers the position and the counts after it, and tells the caller's other devices (`read.updated`).";
const UNREAD =
  "Moves the position back to just before `message_id`, so it and everything after it are unread. Answers like `…/read`.";

export const readStateRouter = router({
  readChannel: authedProcedure
    .meta({
      openapi: {
        summary: "Mark a channel read",
        method: "POST",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}/read",
        tags,
        description: `${READ} Channel members (403 for a public channel not joined).`,
      },
    })
    .input(channelInput)
    .output(dataOf(placeCounts))
    .mutation(async ({ ctx, input }) => ({
      data: await moveReadPosition(ctx.deps, ctx.auth.user.id, channelPlace(input), input.message_id, "read"),
    })),

  unreadChannel: authedProcedure
    .meta({
      openapi: {
        summary: "Mark a channel unread from a message",
        method: "POST",
        path: "/api/v1/workspaces/{workspace_id}/channels/{id}/unread",
        tags,
        description: `${UNREAD} Channel members (403 for a public channel not joined).`,
      },
    })
    .input(channelInput)
    .output(dataOf(placeCounts))
    .mutation(async ({ ctx, input }) => ({
      data: await moveReadPosition(ctx.deps, ctx.auth.user.id, channelPlace(input), input.message_id, "unread"),
    })),

  readConversation: authedProcedure
    .meta({
      openapi: {
        summary: "Mark a direct conversation read",
        method: "POST",
        path: "/api/v1/direct-conversations/{conversation_id}/read",
        tags,
        description: `${READ} Its participants (404 otherwise).`,
      },
    })
    .input(conversationInput)
    .output(dataOf(placeCounts))
    .mutation(async ({ ctx, input }) => ({
      data: await moveReadPosition(ctx.deps, ctx.auth.user.id, conversationPlace(input), input.message_id, "read"),
    })),

  unreadConversation: authedProcedure
    .meta({
      openapi: {
        summary: "Mark a direct conversation unread from a message",
        method: "POST",
        path: "/api/v1/direct-conversations/{conversation_id}/unread",
        tags,
        description: `${UNREAD} Its participants (404 otherwise).`,
      },
    })
    .input(conversationInput)
    .output(dataOf(placeCounts))
    .mutation(async ({ ctx, input }) => ({
      data: await moveReadPosition(ctx.deps, ctx.auth.user.id, conversationPlace(input), input.message_id, "unread"),
    })),

  summary: authedProcedure
    .meta({
      openapi: {
        summary: "Everything unread",
        method: "GET",
        path: "/api/v1/unread",
        tags,
        description:
          "Every workspace, channel and conversation of the caller with anything unread, and `total_mentions` (the app badge). Counts stop at 1000 per place.",
      },
    })
    .input(z.void())
    .output(dataOf(unreadSummaryRecord))
    .query(async ({ ctx }) => ({ data: await unreadSummary(ctx.deps, ctx.auth.user.id) })),
});
