import { sql } from "drizzle-orm";
import { bigint, boolean, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";
import { timestamps, timestamptz } from "./columns.ts";
import { users, type Language } from "./users.ts";
import { rooms } from "./rooms.ts";
import { channels } from "./workspaces.ts";

export const MESSAGE_TYPES = ["text", "notice", "system"] as const;
export type MessageType = (typeof MESSAGE_TYPES)[number];

/** One emoji of a message's reactions: how many people reacted with it. */
export type ReactionSummary = { emoji: string; count: number };

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

/**
 * Each participant's read state in a direct conversation (docs/unread.md): their read position
 * and whether they muted it. Both rows are written with the conversation.
 */
export const conversationReadStates = pgTable(
  "conversation_read_states",
  {
    conversationId: text("conversation_id")
      .notNull()
      .references(() => conversations.id, { onDelete: "cascade" }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    lastReadMessageId: text("last_read_message_id"),
    muted: boolean("muted").notNull().default(false),
  },
  (table) => [
    primaryKey({ name: "conversation_read_states_pkey", columns: [table.conversationId, table.userId] }),
    index("conversation_read_states_user_id_idx").on(table.userId),
  ],
);

/** Channel messages (workspace_id + channel_id), direct messages (conversation_id) and room messages (room_id). */
export const messages = pgTable(
  "messages",
  {
    // Time-ordered ids: history pages by id, newest first.
    id: text("id").primaryKey(),
    // A channel message's workspace (null elsewhere): always its channel's, which the post checks,
    // and deleted with it (channel_id's cascade, which a workspace's deletion sets off). No
    // foreign key of its own: its check would run on every post for nothing the channel's does
    // not already promise.
    workspaceId: text("workspace_id"),
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
    /** The client's own name for its message: a repeat by the same author in the same place posts nothing. */
    clientMessageId: text("client_message_id"),
    /** Users `<@id>` mentions who can read the message, in order, once each (evaluated when posted or edited). */
    mentionedUserIds: integer("mentioned_user_ids")
      .array()
      .notNull()
      .default(sql`'{}'::integer[]`),
    /** `<!channel>` or `<!here>`: every member of the place is mentioned. */
    mentionsChannel: boolean("mentions_channel").notNull().default(false),
    /**
     * `[{emoji, count}]` in the order each emoji was first used, kept with the message so that
     * a history page reads it without a query per message, and so that the 50-emoji limit is
     * checked on the row every reaction locks. Who reacted is in message_reactions.
     */
    reactions: jsonb("reactions")
      .$type<ReactionSummary[]>()
      .notNull()
      .default(sql`'[]'::jsonb`),
    editedAt: timestamptz("edited_at"),
    /** Set on a tombstone: a deleted thread parent kept while it has replies. */
    deletedAt: timestamptz("deleted_at"),
    ...timestamps,
  },
  (table) => [
    // Posting exactly once: one live message per author, place and client_message_id.
    uniqueIndex("messages_client_message_id_idx")
      .on(
        table.authorUserId,
        sql`coalesce(${table.channelId}, ${table.conversationId}, ${table.roomId})`,
        table.clientMessageId,
      )
      .where(sql`${table.clientMessageId} is not null and ${table.deletedAt} is null`),
    // Channel history (top-level messages, newest first), and unread counts (docs/unread.md): a
    // channel's live top-level messages after a read position and their authors, read from the
    // index alone (the migration adds `include (author_user_id, deleted_at)`, which drizzle
    // cannot declare).
    index("messages_channel_id_id_idx")
      .on(table.channelId, table.id)
      .where(sql`${table.parentMessageId} is null`),
    // A channel's replies by id: with the index above, a new member's starting read position (its
    // newest message, reply or not).
    index("messages_channel_replies_idx")
      .on(table.channelId, table.id)
      .where(sql`${table.parentMessageId} is not null and ${table.deletedAt} is null`),
    // Mention counts: the messages that mention anyone, per channel (replies included; the
    // migration adds `include (author_user_id, mentions_channel, mentioned_user_ids)`).
    index("messages_channel_mentions_idx")
      .on(table.channelId, table.id)
      .where(
        sql`${table.deletedAt} is null and (${table.mentionsChannel} or ${table.mentionedUserIds} <> '{}'::integer[])`,
      ),
    // A thread's replies, a conversation's and a room's messages: each only over the messages
    // that have one (a message of a channel, say, is in none of them, so its post writes none).
    index("messages_parent_message_id_id_idx")
      .on(table.parentMessageId, table.id)
      .where(sql`${table.parentMessageId} is not null`),
    index("messages_conversation_id_id_idx")
      .on(table.conversationId, table.id)
      .where(sql`${table.conversationId} is not null`),
    index("messages_room_id_id_idx")
      .on(table.roomId, table.id)
      .where(sql`${table.roomId} is not null`),
  ],
);

/** Who reacted with what, in the order they reacted; the per-emoji counts are on the message. */
export const messageReactions = pgTable(
  "message_reactions",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    messageId: text("message_id")
      .notNull()
      .references(() => messages.id, { onDelete: "cascade" }),
    emoji: text("emoji").notNull(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (table) => [
    uniqueIndex("message_reactions_message_id_emoji_user_id_idx").on(table.messageId, table.emoji, table.userId),
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
