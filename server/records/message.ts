import { z } from "zod";
import { LANGUAGES, MESSAGE_TYPES, type Attachment, type Message, type User } from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { timestamp } from "./common.ts";

export const attachmentRecord = z
  .object({
    id: z.string(),
    filename: z.string(),
    mime_type: z.string(),
    size: z.number().int(),
    download_url: z.string(),
    created_at: timestamp,
  })
  .meta({ id: "Attachment" });

/** Direct-message attachments download from their own path (API document). */
export function toAttachmentRecord(
  attachment: Attachment,
  appUrl: string,
  kind: "channel" | "direct",
): z.infer<typeof attachmentRecord> {
  const base = kind === "direct" ? "direct-message-attachments" : "message-attachments";
  return {
    id: attachment.id,
    filename: attachment.filename,
    mime_type: attachment.mimeType,
    size: attachment.size,
    download_url: `${appUrl}/api/v1/${base}/${attachment.id}/download`,
    created_at: isoTimestamp(attachment.createdAt),
  };
}

export const authorRecord = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("user"), id: z.number().int(), name: z.string(), avatar_url: z.string().nullable() }),
    z.object({ type: z.literal("bot"), webhook_id: z.string(), name: z.string(), avatar_url: z.string().nullable() }),
  ])
  .meta({ id: "MessageAuthor" });

export const messageRecord = z
  .object({
    id: z.string(),
    workspace_id: z.string().nullable(),
    channel_id: z.string().nullable(),
    conversation_id: z.string().nullable(),
    room_id: z.string().nullable(),
    author: authorRecord.nullable().describe("null when the author's account was deleted"),
    content: z.string(),
    type: z.enum(MESSAGE_TYPES),
    parent_message_id: z.string().nullable(),
    reply_count: z.number().int(),
    attachments: z.array(attachmentRecord),
    skip_translation: z.boolean(),
    translation: z
      .object({
        language: z.enum(LANGUAGES).describe("the reader's language"),
        content: z.string().nullable().describe("the translated text when status is done"),
        status: z.enum(["pending", "done", "skipped", "failed", "not_needed"]),
      })
      .nullable()
      .describe("the message in the reader's language (docs/translation.md); null when the server does not translate"),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Message" });
export type MessageRecord = z.infer<typeof messageRecord>;

export function toMessageRecord(
  message: Message,
  author: Pick<User, "id" | "name" | "avatarUrl"> | null,
  attachments: Attachment[],
  appUrl: string,
  translation: MessageRecord["translation"],
): MessageRecord {
  return {
    id: message.id,
    workspace_id: message.workspaceId,
    channel_id: message.channelId,
    conversation_id: message.conversationId,
    room_id: message.roomId,
    author: message.authorWebhookId
      ? {
          type: "bot",
          webhook_id: message.authorWebhookId,
          name: message.authorName ?? "bot",
          avatar_url: message.authorAvatarUrl,
        }
      : author
        ? { type: "user", id: author.id, name: author.name, avatar_url: author.avatarUrl }
        : null,
    content: message.content,
    type: message.type,
    parent_message_id: message.parentMessageId,
    reply_count: message.replyCount,
    attachments: attachments.map((attachment) =>
      toAttachmentRecord(attachment, appUrl, message.conversationId ? "direct" : "channel"),
    ),
    skip_translation: message.skipTranslation,
    translation,
    created_at: isoTimestamp(message.createdAt),
    updated_at: isoTimestamp(message.updatedAt),
  };
}
