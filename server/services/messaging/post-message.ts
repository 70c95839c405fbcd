// The only way a message is created: by a user (REST or RPC) in a channel, a conversation or a
// temporary room, and by an inbound webhook. One path for every kind of message: the message, what it changes
// (its parent's reply count, its attachments, its conversation) and its events are written in
// one transaction; after commit the relay is woken to position and publish the events, and the
// job outbox to hand the message's jobs (push) to their queues.
import { and, eq, gt, inArray, isNull, or, sql } from "drizzle-orm";
import type { Transaction } from "../../../db/client.ts";
import {
  attachments,
  channelMembers,
  channels,
  conversations,
  messages,
  roomMembers,
  rooms,
  type Language,
  type Message,
  type MessageType,
  type User,
  workspaceMembers,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { streams, writeWithEvents, type EventEntry } from "../../events/streams.ts";
import { newId } from "../../ids.ts";
import { toMessageRecord, type MessageRecord } from "../../records/message.ts";
import { enqueueMessagePush } from "../push/jobs.ts";
import { queueTranslations } from "../translation/jobs.ts";
import { readerLanguageOf, translationEnabled, translationView } from "../translation/readers.ts";

export type MessageAuthor =
  | { type: "user"; user: Pick<User, "id" | "name" | "avatarUrl" | "preferredLanguage"> }
  | { type: "bot"; webhookId: string; name: string; avatarUrl: string | null };

export type MessageTarget =
  | { kind: "channel"; workspaceId: string; channelId: string }
  | { kind: "conversation"; conversationId: string }
  | { kind: "room"; roomId: string };

export type PostMessageInput = {
  author: MessageAuthor;
  /** A user author must be a member or participant there (checked as the message is written). */
  target: MessageTarget;
  content?: string | undefined;
  attachmentIds?: string[] | undefined;
  parentMessageId?: string | null | undefined;
  type?: MessageType | null | undefined;
  skipTranslation?: boolean | null | undefined;
  /**
   * Rows the caller writes with the message, in its transaction (an inbound webhook's request
   * log entry and idempotency key); throwing rolls the message back.
   */
  alsoWrite?: ((tx: Transaction, record: MessageRecord) => Promise<void>) | undefined;
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

/**
 * Writes the message and publishes its event. Returns null, writing nothing, when a user
 * author may not post to the target (not a member of the channel and its workspace, or not a
 * participant of the conversation), or a bot's channel is not one of its workspace: the
 * caller knows which error to give. The check locks the membership (or the bot's channel) it
 * found until the commit, so a member removed meanwhile cannot slip a message in.
 */
export async function postMessage(deps: Deps, input: PostMessageInput): Promise<MessageRecord | null> {
  const now = deps.clock.now();
  const id = newId("message", now.getTime());
  const authorUser = input.author.type === "user" ? input.author.user : null;
  const authorUserId = authorUser?.id ?? null;
  const message: Message = {
    id,
    workspaceId: input.target.kind === "channel" ? input.target.workspaceId : null,
    channelId: input.target.kind === "channel" ? input.target.channelId : null,
    conversationId: input.target.kind === "conversation" ? input.target.conversationId : null,
    roomId: input.target.kind === "room" ? input.target.roomId : null,
    authorUserId,
    authorWebhookId: input.author.type === "bot" ? input.author.webhookId : null,
    authorName: input.author.type === "bot" ? input.author.name : null,
    authorAvatarUrl: input.author.type === "bot" ? input.author.avatarUrl : null,
    content: input.content ?? "",
    type: input.type ?? "text",
    parentMessageId: input.parentMessageId ?? null,
    replyCount: 0,
    skipTranslation: input.skipTranslation ?? false,
    // Set below for a user author, once their membership (and its language) is read.
    language: null,
    createdAt: now,
    updatedAt: now,
  };
  const attachmentIds = input.attachmentIds ?? [];

  // One transaction, whatever the message: the author's right to post, the parent's reply count,
  // the message, its attachments, the conversation's last message, the events and the jobs that
  // follow a message commit together or not at all.
  let jobsQueued = false;
  const translating = translationEnabled(deps.config) && !message.skipTranslation;
  const record = await writeWithEvents(deps, async (tx, emit) => {
    if (authorUser !== null) {
      const membership = await userMayPost(tx, authorUser.id, input.target, now);
      if (!membership) return null;
      message.language = readerLanguageOf(authorUser, membership.memberLanguage);
    } else if (!(await botMayPost(tx, input.target))) {
      return null;
    }
    if (message.parentMessageId) await checkParent(tx, input.target, message.parentMessageId);
    await tx.insert(messages).values(message);
    // Its push job, when anyone else there has a device (server notices wake nobody).
    if (message.type !== "system") {
      jobsQueued = await enqueueMessagePush(tx, now, { id, authorUserId, target: input.target });
    }
    // Its translations, when anyone who may read it reads another language.
    if (translating && (await queueTranslations(tx, now, { ...message, target: input.target }))) jobsQueued = true;
    const claimed = await claimAttachments(tx, authorUserId, attachmentIds, id);
    if (message.conversationId) {
      await tx
        .update(conversations)
        .set({ lastMessageId: id, updatedAt: now })
        .where(eq(conversations.id, message.conversationId));
    }
    // Subscribers see it with the translation state for their own language (ReaderLanguages).
    emit(messageCreated(toMessageRecord(message, authorUser, claimed, deps.config.appUrl, null), message.language));
    // The author reads it in the language they wrote it in; a bot's post has no reader yet.
    const view =
      message.language === null
        ? null
        : translationView(translationEnabled(deps.config), message, message.language, undefined);
    const record = toMessageRecord(message, authorUser, claimed, deps.config.appUrl, view);
    await input.alsoWrite?.(tx, record);
    return record;
  });
  if (record && jobsQueued) deps.jobOutbox.wake();
  return record;
}

/**
 * A member of the channel and its workspace, a participant of the conversation, or a member of
 * the room while it lives; the rows that say so are locked until the caller's transaction ends,
 * so a removal (or the room's closing) waits for it.
 */
async function userMayPost(
  tx: Transaction,
  userId: number,
  target: MessageTarget,
  now: Date,
): Promise<{ memberLanguage: Language | null } | null> {
  if (target.kind === "room") {
    const rows = await tx
      .select({ memberLanguage: sql<null>`null` })
      .from(rooms)
      .innerJoin(roomMembers, and(eq(roomMembers.roomId, rooms.id), eq(roomMembers.userId, userId)))
      .where(and(eq(rooms.id, target.roomId), gt(rooms.expiresAt, now)))
      .for("share");
    return rows[0] ?? null;
  }
  const rows =
    target.kind === "channel"
      ? await tx
          .select({ memberLanguage: workspaceMembers.preferredLanguage })
          .from(channels)
          .innerJoin(
            workspaceMembers,
            and(eq(workspaceMembers.workspaceId, channels.workspaceId), eq(workspaceMembers.userId, userId)),
          )
          .innerJoin(channelMembers, and(eq(channelMembers.channelId, channels.id), eq(channelMembers.userId, userId)))
          .where(and(eq(channels.id, target.channelId), eq(channels.workspaceId, target.workspaceId)))
          .for("share")
      : await tx
          .select({ memberLanguage: sql<null>`null` })
          .from(conversations)
          .where(
            and(
              eq(conversations.id, target.conversationId),
              or(eq(conversations.userAId, userId), eq(conversations.userBId, userId)),
            ),
          )
          // The lock the update of its last message takes anyway: two posts to one conversation
          // queue here rather than deadlock on upgrading two shared locks.
          .for("no key update");
  return rows[0] ?? null;
}

/**
 * A bot (an inbound webhook) posts into any channel of its workspace, never into a
 * conversation; the channel is locked until the commit, so it cannot go meanwhile.
 */
async function botMayPost(tx: Transaction, target: MessageTarget): Promise<boolean> {
  if (target.kind !== "channel") return false;
  const rows = await tx
    .select({ id: channels.id })
    .from(channels)
    .where(and(eq(channels.id, target.channelId), eq(channels.workspaceId, target.workspaceId)))
    .for("share");
  return rows.length > 0;
}

/** Where a stored message was posted. */
export function messageTargetOf(
  message: Pick<Message, "workspaceId" | "channelId" | "conversationId" | "roomId">,
): MessageTarget {
  if (message.roomId !== null) return { kind: "room", roomId: message.roomId };
  return message.conversationId !== null
    ? { kind: "conversation", conversationId: message.conversationId }
    : { kind: "channel", workspaceId: message.workspaceId!, channelId: message.channelId! };
}

/** Where a message's events go: its channel's, conversation's or room's stream, with their scope. */
export function messageStream(
  message: Pick<Message, "workspaceId" | "channelId" | "conversationId" | "roomId">,
): Pick<EventEntry, "stream" | "scope"> {
  if (message.roomId !== null) return { stream: streams.room(message.roomId), scope: { room_id: message.roomId } };
  return message.conversationId !== null
    ? { stream: streams.conversation(message.conversationId), scope: { conversation_id: message.conversationId } }
    : {
        stream: streams.channel(message.channelId!),
        scope: { workspace_id: message.workspaceId!, channel_id: message.channelId! },
      };
}

/** The message.created event on its channel's or conversation's stream. */
function messageCreated(record: MessageRecord, sourceLanguage: Language | null): EventEntry {
  return {
    sourceLanguage,
    ...messageStream({
      workspaceId: record.workspace_id,
      channelId: record.channel_id,
      conversationId: record.conversation_id,
      roomId: record.room_id,
    }),
    type: "message.created",
    data: { message: record },
  };
}
