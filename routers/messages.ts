// Channel messages: history, threads, posting, and the channel's live stream.
import { z } from "zod";
import { MESSAGE_TYPES } from "../db/schema/index.ts";
import { idPattern } from "../server/ids.ts";
import { dataOf } from "../server/records/common.ts";
import { messageRecord, type MessageRecord } from "../server/records/message.ts";
import { listChannelMessages, postChannelMessage } from "../server/services/messaging/channel-messages.ts";
import { channelEvents, startTyping } from "../server/services/messaging/live.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { trackedStream } from "../server/trpc-live.ts";
import { booleanInput } from "./inputs.ts";
import { resumable } from "./live.ts";

const tags = ["Messages"];
const channelPath = z.object({ workspace_id: z.string(), channel_id: z.string() });

// `next_cursor` on `before` (and default) and `after` pages; `before_cursor` and `after_cursor`
// on `around` pages only. Every key sent is present, with null for "nothing beyond".
export const messagePageOutput = z.object({
  data: z.array(messageRecord),
  meta: z.object({
    next_cursor: z
      .string()
      .nullable()
      .optional()
      .describe(
        "`before` and default pages: pass as `before` for the next (older) page; `after` pages: pass as `after` for the next (newer) page; null when there is none. Absent on `around` pages",
      ),
    before_cursor: z
      .string()
      .nullable()
      .optional()
      .describe("`around` pages only: the oldest id on the page, to pass as `before`; null when nothing is older"),
    after_cursor: z
      .string()
      .nullable()
      .optional()
      .describe("`around` pages only: the newest id on the page, to pass as `after`; null when nothing is newer"),
  }),
});

const messageCursor = z.string().regex(idPattern("message"), "The :attribute field must be a message id.");

export const pageInput = {
  limit: z.number().int().min(1).max(100).optional(),
  // A cursor is a message id (a page's `next_cursor`); anything else is a 422, not an
  // unfiltered first page.
  before: messageCursor.optional(),
  // `after` and `around` must also be messages of the place listed (a 422 otherwise, from the
  // service); `before`, `after` and `around` exclude each other.
  after: messageCursor.optional(),
  around: messageCursor.optional(),
};

/** Laravel's required_without: content is required unless attachments are sent. */
export function contentOrAttachments(
  value: { content?: string | undefined; attachment_ids?: string[] | undefined },
  ctx: z.RefinementCtx,
) {
  if (!value.content?.trim() && !(value.attachment_ids && value.attachment_ids.length > 0)) {
    ctx.addIssue({
      code: "custom",
      path: ["content"],
      message: "The content field is required when attachment ids is not present.",
    });
  }
}

export const messageBody = {
  content: z.string().max(40_000).optional(),
  attachment_ids: z.array(z.string()).max(10).optional(),
  client_message_id: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "The :attribute field must be 1 to 64 letters, digits, - or _.")
    .nullable()
    .optional()
    .describe(
      "your own id for the message: a repeat by you in the same place posts nothing and answers 200 with the first message",
    ),
};

/** The answer to a post: 201 with the new message, or 200 with the first one when it repeats a client_message_id. */
export function postAnswer(
  ctx: { response: { status?: number } },
  posted: { record: MessageRecord; created: boolean },
): { data: MessageRecord } {
  if (!posted.created) ctx.response.status = 200;
  return { data: posted.record };
}

export const messagesRouter = router({
  list: authedProcedure
    .meta({
      openapi: {
        summary: "List a channel's messages",
        method: "GET",
        path: "/api/v1/workspaces/{workspace_id}/channels/{channel_id}/messages",
        tags,
        description:
          "Newest first. `limit` 1..100 (default 50), `before` a message id; `parent_message_id` lists a thread. `after` a message of the channel (in the top-level history a thread reply too: its id is a position; in a thread one of its replies) pages forward (oldest first, `meta.next_cursor` to pass as `after`); `around` one answers it with up to floor(limit / 2) messages on each side (newest first, `meta.before_cursor` and `meta.after_cursor`). At most one of `before`, `after`, `around`.",
      },
    })
    .input(channelPath.extend({ ...pageInput, parent_message_id: z.string().optional() }))
    .output(messagePageOutput)
    .query(({ ctx, input }) =>
      listChannelMessages(
        ctx.deps,
        ctx.auth.user.id,
        { workspaceId: input.workspace_id, channelId: input.channel_id },
        {
          limit: input.limit,
          before: input.before,
          after: input.after,
          around: input.around,
          parentMessageId: input.parent_message_id,
        },
      ),
    ),

  post: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Post a message to a channel",
        description:
          "For members of the channel (a public channel: any workspace member). `content` is required unless `attachment_ids` (the caller's staged uploads) is given; `parent_message_id` replies in a thread. The message is delivered live and translated for each reader unless skip_translation is set.",
        method: "POST",
        path: "/api/v1/workspaces/{workspace_id}/channels/{channel_id}/messages",
        tags,
      },
    })
    .input(
      channelPath
        .extend({
          ...messageBody,
          parent_message_id: z.string().nullable().optional(),
          type: z.enum(MESSAGE_TYPES).nullable().optional(),
          skip_translation: booleanInput.nullable().optional(),
        })
        .superRefine(contentOrAttachments),
    )
    .output(dataOf(messageRecord))
    .mutation(async ({ ctx, input }) =>
      postAnswer(
        ctx,
        await postChannelMessage(
          ctx.deps,
          ctx.auth.user,
          { workspaceId: input.workspace_id, channelId: input.channel_id },
          {
            content: input.content,
            attachmentIds: input.attachment_ids,
            parentMessageId: input.parent_message_id,
            type: input.type,
            skipTranslation: input.skip_translation,
            clientMessageId: input.client_message_id,
          },
        ),
      ),
    ),

  /** Live: message events of one channel, until the caller loses access to it. */
  // The resolver checks access before returning the stream, so a refusal is a typed error
  // (NOT_FOUND), not a failure inside the stream.
  onChannel: authedProcedure
    .input(channelPath.extend(resumable.shape))
    .subscription(async ({ ctx, input, signal }) =>
      trackedStream(
        await channelEvents(
          ctx.deps,
          ctx.auth,
          { workspaceId: input.workspace_id, channelId: input.channel_id, lastEventId: input.lastEventId },
          signal,
        ),
      ),
    ),

  /** Tells the channel's or conversation's subscribers that the caller is typing. */
  typing: authedProcedure
    .input(
      z.object({
        workspace_id: z.string().optional(),
        channel_id: z.string().optional(),
        conversation_id: z.string().optional(),
      }),
    )
    .output(z.object({ message: z.string() }))
    .mutation(async ({ ctx, input }) => {
      await startTyping(ctx.deps, ctx.auth, {
        workspaceId: input.workspace_id,
        channelId: input.channel_id,
        conversationId: input.conversation_id,
      });
      return { message: "ok" };
    }),
});
