import { sql } from "drizzle-orm";
import { bigint, boolean, index, integer, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { timestamps, timestamptz } from "./columns.ts";
import { users, type Language } from "./users.ts";
import { rooms } from "./rooms.ts";
import { channels, workspaces } from "./workspaces.ts";

export const MESSAGE_TYPES = ["text", "notice", "system"] as const;
export type MessageType = (typeof MESSAGE_TYPES)[number];

/** One-to-one conversations; the pair is stored ordered (user_a_id < user_b_id) so it is unique. */
export const conversations = pgTable(
  "conversations",
  {
    id: text("id").primaryKey(),
    userAId: integer("user_a_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    userBId: integer("user_b_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    lastMessageId: text("last_message_id"),
    ...timestamps,
  },
  (table) => [
    uniqueIndex("conversations_user_a_id_user_b_id_idx").on(table.userAId, table.userBId),
    index("conversations_user_b_id_idx").on(table.userBId),
  ],
);

/** Channel messages (workspace_id + channel_id), direct messages (conversation_id) and room messages (room_id). */
export const messages = pgTable(
  "messages",
  {
    // Time-ordered ids: history pages by id, newest first.
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id").references(() => workspaces.id, { onDelete: "cascade" }),
    channelId: text("channel_id").references(() => channels.id, { onDelete: "cascade" }),
    conversationId: text("conversation_id").references(() => conversations.id, { onDelete: "cascade" }),
    /** Messages of a temporary room: deleted with it (and their files, by the attachments' trigger). */
    roomId: text("room_id").references(() => rooms.id, { onDelete: "cascade" }),
    authorUserId: integer("author_user_id").references(() => users.id, { onDelete: "set null" }),
    /** Bot posts (inbound webhooks) carry the webhook and its display name and avatar. */
    authorWebhookId: text("author_webhook_id"),
    authorName: text("author_name"),
    authorAvatarUrl: text("author_avatar_url"),
    content: text("content").notNull().default(""),
    type: text("type").$type<MessageType>().notNull().default("text"),
    parentMessageId: text("parent_message_id"),
    replyCount: integer("reply_count").notNull().default(0),
    skipTranslation: boolean("skip_translation").notNull().default(false),
    /**
     * The language it was written in: its author's reading language when posted (the member's
     * preferred_language in the workspace, else the user's). Null for bot posts: the provider
     * detects it (docs/translation.md).
     */
    language: text("language").$type<Language>(),
    ...timestamps,
  },
  (table) => [
    // Channel history (top-level messages, newest first) and threads.
    index("messages_channel_id_id_idx")
      .on(table.channelId, table.id)
      .where(sql`${table.parentMessageId} is null`),
    index("messages_parent_message_id_id_idx").on(table.parentMessageId, table.id),
    index("messages_conversation_id_id_idx").on(table.conversationId, table.id),
    index("messages_room_id_id_idx").on(table.roomId, table.id),
  ],
);

/** Uploaded files: staged by their uploader, then claimed by one message. */
export const attachments = pgTable(
  "attachments",
  {
    id: text("id").primaryKey(),
    uploaderId: integer("uploader_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    messageId: text("message_id").references(() => messages.id, { onDelete: "cascade" }),
    filename: text("filename").notNull(),
    mimeType: text("mime_type").notNull(),
    size: bigint("size", { mode: "number" }).notNull(),
    /** Where the bytes are in the storage driver (local path or S3 key). */
    storageKey: text("storage_key").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (table) => [
    index("attachments_message_id_idx").on(table.messageId),
    index("attachments_uploader_id_created_at_idx").on(table.uploaderId, table.createdAt),
  ],
);

export type Message = typeof messages.$inferSelect;
export type Conversation = typeof conversations.$inferSelect;
export type Attachment = typeof attachments.$inferSelect;
