import { z } from "zod";
import type { Conversation, User } from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { timestamp } from "./common.ts";
import { messageRecord, type MessageRecord } from "./message.ts";
import { readStateFields } from "./workspace.ts";

export const participantRecord = z
  .object({
    id: z.number().int(),
    name: z.string(),
    email: z.string(),
    avatar_url: z.string().nullable(),
  })
  .meta({ id: "Participant" });

export const conversationRecord = z
  .object({
    id: z.string(),
    participant: participantRecord.describe("the other user"),
    last_message: messageRecord.nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "DirectConversation" });

/** A conversation in the caller's list, with their read state (docs/unread.md). */
export const conversationListRecord = conversationRecord
  .extend({
    last_read_message_id: readStateFields.last_read_message_id,
    unread_count: z.number().int().describe("messages after the position, not yours (stops at 1000)"),
    mention_count: z
      .number()
      .int()
      .describe("in a conversation every unread message counts as a mention, replies included (stops at 1000)"),
    muted: z.boolean(),
  })
  .meta({ id: "DirectConversationWithReadState" });

export function toParticipantRecord(user: User): z.infer<typeof participantRecord> {
  return { id: user.id, name: user.name, email: user.email, avatar_url: user.avatarUrl };
}

export function toConversationRecord(
  conversation: Conversation,
  other: User,
  lastMessage: MessageRecord | null,
): z.infer<typeof conversationRecord> {
  return {
    id: conversation.id,
    participant: toParticipantRecord(other),
    last_message: lastMessage,
    created_at: isoTimestamp(conversation.createdAt),
    updated_at: isoTimestamp(conversation.updatedAt),
  };
}
