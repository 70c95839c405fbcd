// Direct (one-to-one) chat.
import { z } from "zod";
import { dataOf, listOf, listResponse } from "../server/records/common.ts";
import { conversationListRecord, conversationRecord, participantRecord } from "../server/records/conversation.ts";
import { messageRecord } from "../server/records/message.ts";
import {
  listConversations,
  listDirectMessages,
  openConversation,
  postDirectMessage,
  resolveRecipient,
} from "../server/services/messaging/direct.ts";
import { conversationEvents } from "../server/services/messaging/live.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { trackedStream } from "../server/trpc-live.ts";
import { emailInput, userIdInput } from "./inputs.ts";
import { resumable } from "./live.ts";
import { contentOrAttachments, messageBody, messagePageOutput, pageInput, postAnswer } from "./messages.ts";

const tags = ["Direct chat"];
const conversationPath = z.object({ conversation_id: z.string() });

export const directRouter = router({
  list: authedProcedure
    .meta({
      openapi: {
        summary: "List direct conversations",
        method: "GET",
        path: "/api/v1/direct-conversations",
        tags,
        description: "The caller's conversations, most recently active first.",
      },
    })
    .input(z.void())
    .output(listOf(conversationListRecord))
    .query(async ({ ctx }) => listResponse(await listConversations(ctx.deps, ctx.auth.user.id))),

  open: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Open a direct conversation",
        method: "POST",
        path: "/api/v1/direct-conversations",
        tags,
        description: "Create-or-get: 201 when created, 200 when it existed.",
      },
    })
    .input(z.object({ participant_user_id: userIdInput }))
    .output(dataOf(conversationRecord))
    .mutation(async ({ ctx, input }) => {
      const { created, record } = await openConversation(ctx.deps, ctx.auth.user.id, input.participant_user_id);
      if (!created) ctx.response.status = 200;
      return { data: record };
    }),

  resolve: authedProcedure
    .meta({
      ability: "read",
      openapi: {
        summary: "Find a direct-message recipient by e-mail",
        description:
          "Answers the user with that e-mail, for opening a conversation; 404 when there is none. A lookup sent as POST: needs the `read` ability.",
        method: "POST",
        path: "/api/v1/direct-recipients/resolve",
        tags,
      },
    })
    .input(z.object({ email: emailInput }))
    .output(dataOf(participantRecord))
    .mutation(async ({ ctx, input }) => ({ data: await resolveRecipient(ctx.deps, input.email) })),

  messages: authedProcedure
    .meta({
      openapi: {
        summary: "List a direct conversation's messages",
        description:
          "For its two participants (404 otherwise). Newest first; `limit` 1..100 (default 50), `before` a message id. `after` a message of the conversation pages forward (oldest first, `meta.next_cursor` to pass as `after`); `around` one answers it with up to floor(limit / 2) messages on each side (newest first, `meta.before_cursor` and `meta.after_cursor`). At most one of `before`, `after`, `around`.",
        method: "GET",
        path: "/api/v1/direct-conversations/{conversation_id}/messages",
        tags,
      },
    })
    .input(conversationPath.extend(pageInput))
    .output(messagePageOutput)
    .query(({ ctx, input }) => listDirectMessages(ctx.deps, ctx.auth.user.id, input.conversation_id, input)),

  post: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Post a direct message",
        description:
          "For the conversation's two participants (404 otherwise). `content` is required unless `attachment_ids` is given.",
        method: "POST",
        path: "/api/v1/direct-conversations/{conversation_id}/messages",
        tags,
      },
    })
    .input(conversationPath.extend(messageBody).superRefine(contentOrAttachments))
    .output(dataOf(messageRecord))
    .mutation(async ({ ctx, input }) =>
      postAnswer(
        ctx,
        await postDirectMessage(ctx.deps, ctx.auth.user, input.conversation_id, {
          content: input.content,
          attachmentIds: input.attachment_ids,
          clientMessageId: input.client_message_id,
        }),
      ),
    ),

  /** Live: the conversation's events. */
  onConversation: authedProcedure
    .input(conversationPath.extend(resumable.shape))
    .subscription(async ({ ctx, input, signal }) =>
      trackedStream(
        await conversationEvents(
          ctx.deps,
          ctx.auth,
          { conversationId: input.conversation_id, lastEventId: input.lastEventId },
          signal,
        ),
      ),
    ),
});
