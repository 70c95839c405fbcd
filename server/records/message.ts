import { sql, type SQL } from "drizzle-orm";
import { z } from "zod";
import {
  attachments as attachmentsTable,
  LANGUAGES,
  MESSAGE_TYPES,
  users,
  type Attachment,
  type Message,
  type User,
} from "../../db/schema/index.ts";
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
    client_message_id: z
      .string()
      .nullable()
      .describe("the client's own id for the message, sent with the post (null when none was sent)"),
    mentioned_user_ids: z
      .array(z.number().int())
      .describe("users `<@id>` mentions who can read the message, in order, once each"),
    mentions_channel: z.boolean().describe("the content has `<!channel>` or `<!here>`"),
    reactions: z
      .array(
        z.object({
          emoji: z.string(),
          count: z.number().int(),
          me: z.boolean().optional().describe("the caller reacted with it (absent in live events and webhooks)"),
        }),
      )
      .describe("in the order each emoji was first used"),
    edited_at: timestamp.nullable(),
    deleted_at: timestamp.nullable().describe("set on a tombstone: a deleted thread parent kept for its replies"),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Message" });
export type MessageRecord = z.infer<typeof messageRecord>;

/**
 * The record of a message. `myReactions`: the emoji the caller reacted with, which sets each
 * reaction's `me`; left out where there is no single caller (live events, webhooks).
 */
export function toMessageRecord(
  message: Message,
  author: Pick<User, "id" | "name" | "avatarUrl"> | null,
  attachments: Attachment[],
  appUrl: string,
  translation: MessageRecord["translation"],
  myReactions?: readonly string[],
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
    client_message_id: message.clientMessageId,
    mentioned_user_ids: message.mentionedUserIds,
    mentions_channel: message.mentionsChannel,
    reactions: myReactions
      ? message.reactions.map(({ emoji, count }) => ({ emoji, count, me: myReactions.includes(emoji) }))
      : message.reactions.map(({ emoji, count }) => ({ emoji, count })),
    edited_at: isoTimestamp(message.editedAt),
    deleted_at: isoTimestamp(message.deletedAt),
    created_at: isoTimestamp(message.createdAt),
    updated_at: isoTimestamp(message.updatedAt),
  };
}

/** A timestamp as isoTimestamp() writes it, in SQL. */
function isoTimestampSql(column: SQL): SQL {
  return sql`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"+00:00"')`;
}

/**
 * The same record as toMessageRecord() without a translation or `me`, built by PostgreSQL from
 * the message row `m` (any alias of messages' columns), for an event written in the statement
 * that changes the message (an edit), where the record exists only inside the statement.
 * test/message-record-sql.test.ts holds the two to the same output.
 */
export function messageRecordSql(m: string, appUrl: string): SQL {
  const col = (name: string) => sql.raw(`${m}.${name}`);
  const downloadBase = sql`${appUrl} || '/api/v1/' || case when ${col("conversation_id")} is not null
    then 'direct-message-attachments' else 'message-attachments' end || '/'`;
  return sql`jsonb_build_object(
    'id', ${col("id")}, 'workspace_id', ${col("workspace_id")}, 'channel_id', ${col("channel_id")},
    'conversation_id', ${col("conversation_id")}, 'room_id', ${col("room_id")},
    'author', case
      when ${col("author_webhook_id")} is not null then jsonb_build_object('type', 'bot',
        'webhook_id', ${col("author_webhook_id")}, 'name', coalesce(${col("author_name")}, 'bot'), 'avatar_url', ${col("author_avatar_url")})
      else (select jsonb_build_object('type', 'user', 'id', u.id, 'name', u.name, 'avatar_url', u.avatar_url)
        from ${users} u where u.id = ${col("author_user_id")}) end,
    'content', ${col("content")}, 'type', ${col("type")}, 'parent_message_id', ${col("parent_message_id")},
    'reply_count', ${col("reply_count")},
    'attachments', coalesce((select jsonb_agg(jsonb_build_object('id', f.id, 'filename', f.filename,
        'mime_type', f.mime_type, 'size', f.size, 'download_url', ${downloadBase} || f.id || '/download',
        'created_at', ${isoTimestampSql(sql`f.created_at`)}) order by f.id)
      from ${attachmentsTable} f where f.message_id = ${col("id")}), '[]'::jsonb),
    'skip_translation', ${col("skip_translation")}, 'translation', null,
    'client_message_id', ${col("client_message_id")}, 'mentioned_user_ids', to_jsonb(${col("mentioned_user_ids")}),
    'mentions_channel', ${col("mentions_channel")}, 'reactions', ${col("reactions")},
    'edited_at', ${isoTimestampSql(col("edited_at"))}, 'deleted_at', ${isoTimestampSql(col("deleted_at"))},
    'created_at', ${isoTimestampSql(col("created_at"))}, 'updated_at', ${isoTimestampSql(col("updated_at"))})`;
}
