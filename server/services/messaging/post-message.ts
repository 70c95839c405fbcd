// The only way a message is created: by a user (REST or RPC), and later by an inbound webhook
// or in a temporary room. The message and its events are written together (one statement for
// a plain message, a transaction when it also claims attachments or counts a reply on its
// parent); after commit the events are published.
import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import type { Database, Executor, Transaction } from "../../../db/client.ts";
import {
  attachments,
  conversations,
  messages,
  streamEvents,
  type Message,
  type MessageType,
  type User,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import {
  eventRows,
  publishEvents,
  recordEvents,
  streams,
  toRecordedEvent,
  type EventEntry,
} from "../../events/streams.ts";
import { newId } from "../../ids.ts";
import { toMessageRecord, type MessageRecord } from "../../records/message.ts";

export type MessageAuthor =
  | { type: "user"; user: Pick<User, "id" | "name" | "avatarUrl"> }
  | { type: "bot"; webhookId: string; name: string; avatarUrl: string | null };

export type MessageTarget =
  { kind: "channel"; workspaceId: string; channelId: string } | { kind: "conversation"; conversationId: string };

export type PostMessageInput = {
  author: MessageAuthor;
  /** The caller has already checked that the author may post here (see channel/direct services). */
  target: MessageTarget;
  content?: string | undefined;
  attachmentIds?: string[] | undefined;
  parentMessageId?: string | null | undefined;
  type?: MessageType | null | undefined;
  skipTranslation?: boolean | null | undefined;
};

/** Claims the poster's staged files, in order; 422 attachment_ids.N for the first that is not theirs to claim. */
async function claimAttachments(tx: Transaction, uploaderId: number | null, ids: string[], messageId: string) {
  if (ids.length === 0) return [];
  const unique = [...new Set(ids)];
  const claimed = uploaderId
    ? await tx
        .update(attachments)
        .set({ messageId })
        .where(
          and(inArray(attachments.id, unique), eq(attachments.uploaderId, uploaderId), isNull(attachments.messageId)),
        )
        .returning()
    : [];
  const byId = new Map(claimed.map((attachment) => [attachment.id, attachment]));
  const missing = ids.findIndex((id) => !byId.has(id));
  if (missing !== -1 || unique.length !== ids.length) {
    const index = missing !== -1 ? missing : ids.findIndex((id, position) => ids.indexOf(id) !== position);
    throw invalidField(
      `attachment_ids.${index}`,
      "The attachment is not a file you uploaded, or it is already attached.",
    );
  }
  return ids.map((id) => byId.get(id)!);
}

async function checkParent(tx: Transaction, target: MessageTarget, parentId: string): Promise<void> {
  if (target.kind !== "channel") throw invalidField("parent_message_id", "Threads exist in channels only.");
  // Counting the reply on the parent also proves the parent exists in this channel and is top-level.
  const [parent] = await tx
    .update(messages)
    .set({ replyCount: sql`${messages.replyCount} + 1` })
    .where(and(eq(messages.id, parentId), eq(messages.channelId, target.channelId), isNull(messages.parentMessageId)))
    .returning({ id: messages.id });
  if (!parent)
    throw invalidField("parent_message_id", "The parent message must be a top-level message of this channel.");
}

export async function postMessage(deps: Deps, input: PostMessageInput): Promise<MessageRecord> {
  const now = deps.clock.now();
  const id = newId("message", now.getTime());
  const authorUser = input.author.type === "user" ? input.author.user : null;
  const authorUserId = authorUser?.id ?? null;
  const message: Message = {
    id,
    workspaceId: input.target.kind === "channel" ? input.target.workspaceId : null,
    channelId: input.target.kind === "channel" ? input.target.channelId : null,
    conversationId: input.target.kind === "conversation" ? input.target.conversationId : null,
    authorUserId,
    authorWebhookId: input.author.type === "bot" ? input.author.webhookId : null,
    authorName: input.author.type === "bot" ? input.author.name : null,
    authorAvatarUrl: input.author.type === "bot" ? input.author.avatarUrl : null,
    content: input.content ?? "",
    type: input.type ?? "text",
    parentMessageId: input.parentMessageId ?? null,
    replyCount: 0,
    skipTranslation: input.skipTranslation ?? false,
    createdAt: now,
    updatedAt: now,
  };
  const attachmentIds = input.attachmentIds ?? [];

  // Most messages are text: the message, its events and the conversation's last message are
  // then one statement, atomic on its own, with no transaction around it.
  if (!message.parentMessageId && attachmentIds.length === 0) {
    const record = toMessageRecord(message, authorUser, [], deps.config.appUrl);
    const events = messageEvents(input.target, "message.created", record);
    const recorded = await insertMessage(deps.db, message, events, now);
    await publishEvents(deps, recorded);
    return record;
  }

  // A reply counts itself on its parent, and attachments are claimed once the message exists.
  const { record, recorded } = await deps.db.transaction(async (tx) => {
    if (message.parentMessageId) await checkParent(tx, input.target, message.parentMessageId);
    await tx.insert(messages).values(message);
    const claimed = await claimAttachments(tx, authorUserId, attachmentIds, id);
    if (message.conversationId) await touchConversation(tx, message.conversationId, id, now);
    const record = toMessageRecord(message, authorUser, claimed, deps.config.appUrl);
    const recorded = await recordEvents(tx, now, messageEvents(input.target, "message.created", record));
    return { record, recorded };
  });
  await publishEvents(deps, recorded);
  return record;
}

function touchConversation(executor: Executor, conversationId: string, messageId: string, now: Date) {
  return executor
    .update(conversations)
    .set({ lastMessageId: messageId, updatedAt: now })
    .where(eq(conversations.id, conversationId))
    .returning({ id: conversations.id });
}

/** One statement: the message, (for a direct message) the conversation's last message, and the events. */
async function insertMessage(db: Database, message: Message, events: EventEntry[], now: Date) {
  const inserted = db.$with("inserted_message").as(db.insert(messages).values(message).returning({ id: messages.id }));
  const rows = eventRows(now, events);
  if (message.conversationId) {
    const touched = db.$with("touched_conversation").as(touchConversation(db, message.conversationId, message.id, now));
    return (await db.with(inserted, touched).insert(streamEvents).values(rows).returning()).map(toRecordedEvent);
  }
  return (await db.with(inserted).insert(streamEvents).values(rows).returning()).map(toRecordedEvent);
}

/** A message event on its channel's or conversation's stream. */
export function messageEvents(target: MessageTarget, type: string, record: MessageRecord): EventEntry[] {
  return [
    target.kind === "channel"
      ? {
          stream: streams.channel(target.channelId),
          type,
          scope: { workspace_id: target.workspaceId, channel_id: target.channelId },
          data: { message: record },
        }
      : {
          stream: streams.conversation(target.conversationId),
          type,
          scope: { conversation_id: target.conversationId },
          data: { message: record },
        },
  ];
}
