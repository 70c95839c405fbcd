// One-to-one conversations: create-or-get with another user, list the caller's, and their
// messages. Only the two participants see anything of a conversation (404 otherwise).
import { and, desc, eq, inArray, or, sql } from "drizzle-orm";
import {
  conversationReadStates,
  conversations,
  messages,
  users,
  type Conversation,
  type User,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField, notFound } from "../../errors.ts";
import { streams, writeWithEvents } from "../../events/streams.ts";
import { newId } from "../../ids.ts";
import { toConversationRecord, toParticipantRecord } from "../../records/conversation.ts";
import type { MessageRecord } from "../../records/message.ts";
import { normaliseEmail } from "../accounts/sign-in.ts";
import { postRefusal, requireParticipant } from "../../policy/places.ts";
import { messagePage, type PageRequest } from "./history.ts";
import { postMessage } from "./post-message.ts";
import { conversationMentionCount, conversationUnreadCount } from "./unread-counts.ts";

export const USER_NOT_FOUND = "No user has that e-mail address.";

const otherUserId = (conversation: Conversation, userId: number) =>
  conversation.userAId === userId ? conversation.userBId : conversation.userAId;

async function lastMessages(deps: Deps, userId: number, ids: string[]): Promise<Map<string, MessageRecord>> {
  if (ids.length === 0) return new Map();
  const page = await messagePage(deps, { userId, workspaceId: null }, inArray(messages.id, ids), {
    limit: ids.length,
  });
  return new Map(page.data.map((message) => [message.id, message]));
}

/** Create-or-get; `created` tells which (201 or 200). */
export async function openConversation(deps: Deps, userId: number, participantUserId: number) {
  if (participantUserId === userId)
    throw invalidField("participant_user_id", "You cannot start a conversation with yourself.");
  const [other] = await deps.db.select().from(users).where(eq(users.id, participantUserId)).limit(1);
  // The participant is a field of the request body: an unknown one is a validation error.
  if (!other) throw invalidField("participant_user_id", "The selected participant user id is invalid.");
  const [userAId, userBId] = userId < participantUserId ? [userId, participantUserId] : [participantUserId, userId];
  const now = deps.clock.now();
  const inserted = await writeWithEvents(deps, async (tx, emit) => {
    const [row] = await tx
      .insert(conversations)
      .values({ id: newId("conversation", now.getTime()), userAId, userBId, createdAt: now, updatedAt: now })
      .onConflictDoNothing({ target: [conversations.userAId, conversations.userBId] })
      .returning();
    // Each participant's read state: a new conversation has no message to start at (docs/unread.md).
    if (row) {
      await tx.insert(conversationReadStates).values([
        { conversationId: row.id, userId: userAId },
        { conversationId: row.id, userId: userBId },
      ]);
    }
    // Both participants' own streams follow them into it.
    for (const participant of row ? [userAId, userBId] : []) {
      const scope = { conversation_id: row!.id };
      emit({ stream: streams.user(participant), type: "conversation.created", scope, data: {} });
    }
    return row;
  });
  const conversation =
    inserted ??
    (
      await deps.db
        .select()
        .from(conversations)
        .where(and(eq(conversations.userAId, userAId), eq(conversations.userBId, userBId)))
    )[0]!;
  const last = await lastMessages(deps, userId, conversation.lastMessageId ? [conversation.lastMessageId] : []);
  return {
    created: Boolean(inserted),
    record: toConversationRecord(
      conversation,
      other,
      conversation.lastMessageId ? (last.get(conversation.lastMessageId) ?? null) : null,
    ),
  };
}

export async function listConversations(deps: Deps, userId: number) {
  // Each with the caller's read state (docs/unread.md), in the same query.
  const states = await deps.db
    .select({
      conversation: conversations,
      lastRead: conversationReadStates.lastReadMessageId,
      muted: conversationReadStates.muted,
      unread: conversationUnreadCount(
        userId,
        sql`${conversations.id}`,
        sql`${conversationReadStates.lastReadMessageId}`,
      ),
      mentions: conversationMentionCount(
        userId,
        sql`${conversations.id}`,
        sql`${conversationReadStates.lastReadMessageId}`,
      ),
    })
    .from(conversations)
    .leftJoin(
      conversationReadStates,
      and(eq(conversationReadStates.conversationId, conversations.id), eq(conversationReadStates.userId, userId)),
    )
    .where(or(eq(conversations.userAId, userId), eq(conversations.userBId, userId)))
    .orderBy(desc(conversations.updatedAt), desc(conversations.id));
  const rows = states.map((state) => state.conversation);
  const others = rows.length
    ? await deps.db
        .select()
        .from(users)
        .where(
          inArray(
            users.id,
            rows.map((row) => otherUserId(row, userId)),
          ),
        )
    : [];
  const usersById = new Map(others.map((user) => [user.id, user]));
  const last = await lastMessages(
    deps,
    userId,
    rows.flatMap((row) => (row.lastMessageId ? [row.lastMessageId] : [])),
  );
  return states.map(({ conversation: row, lastRead, muted, unread, mentions }) => ({
    ...toConversationRecord(
      row,
      usersById.get(otherUserId(row, userId))!,
      row.lastMessageId ? (last.get(row.lastMessageId) ?? null) : null,
    ),
    last_read_message_id: lastRead,
    unread_count: Number(unread),
    mention_count: Number(mentions),
    muted: muted ?? false,
  }));
}

export async function resolveRecipient(deps: Deps, email: string) {
  const [user] = await deps.db
    .select()
    .from(users)
    .where(eq(users.email, normaliseEmail(email)))
    .limit(1);
  if (!user || !user.isActive) throw notFound(USER_NOT_FOUND);
  return toParticipantRecord(user);
}

export async function listDirectMessages(deps: Deps, userId: number, conversationId: string, page: PageRequest) {
  const conversation = await requireParticipant(deps, userId, conversationId);
  return messagePage(deps, { userId, workspaceId: null }, eq(messages.conversationId, conversation.id), {
    limit: page.limit,
    before: page.before,
    after: page.after,
    around: page.around,
  });
}

export async function postDirectMessage(
  deps: Deps,
  user: User,
  conversationId: string,
  input: {
    content?: string | undefined;
    attachmentIds?: string[] | undefined;
    clientMessageId?: string | null | undefined;
  },
) {
  const posted = await postMessage(deps, {
    author: { type: "user", user },
    target: { kind: "conversation", conversationId },
    ...input,
  });
  if (!posted) throw await postRefusal(deps, user.id, { kind: "conversation", conversationId });
  return posted;
}
