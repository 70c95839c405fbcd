// The target policy: who belongs to a place where messages are posted (a channel, a thread in
// it, a direct conversation, a temporary room), answered once for every caller. The post's one
// statement asks `postingRight`; the push and translation consumers ask `placeMemberIds` and
// `placeReaderLanguages` (one message) or their batch forms (many messages in one query).
//
// The rules:
// - channel: a user may post when they are a member of the channel and of its workspace; its
//   readers are every member of its workspace when it is public, its members when private; its
//   members (who are woken by its messages) are the users who joined it and are still in its
//   workspace. Workspace members who can read a public channel without joining it are not woken
//   (as in Slack and Mattermost).
// - conversation: its two participants, for everything.
// - room: whoever joined it, while it lives (its owner included).
// - a bot (an inbound webhook) posts into any channel of its own workspace, nowhere else.
import { and, eq, or, sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../db/client.ts";
import {
  channelMembers,
  channels,
  conversations,
  roomMembers,
  rooms,
  users,
  workspaceMembers,
  type Message,
} from "../../db/schema/index.ts";
import { streams, type EventEntry } from "../events/streams.ts";

export type MessageTarget =
  | { kind: "channel"; workspaceId: string; channelId: string }
  | { kind: "conversation"; conversationId: string }
  | { kind: "room"; roomId: string };

export type PlaceKind = MessageTarget["kind"];

/** The id of the place itself (channel, conversation or room). */
export function placeIdOf(target: MessageTarget): string {
  return target.kind === "channel" ? target.channelId : target.kind === "room" ? target.roomId : target.conversationId;
}

/**
 * SQL selecting one row (column `member_language`: the author's language set in the channel's
 * workspace, or null) when `author` may post to `target` now, and none otherwise. The rows that
 * grant the right are locked until the statement's transaction ends, so a member removed (or a
 * room closed) meanwhile cannot slip a message in.
 */
export function postingRight(author: { userId: number } | { botOf: "channel" }, target: MessageTarget, now: Date): SQL {
  if ("botOf" in author) {
    if (target.kind !== "channel") return sql`select null::text as member_language where false`;
    return sql`select null::text as member_language from ${channels}
      where ${channels.id} = ${target.channelId} and ${channels.workspaceId} = ${target.workspaceId}
      for share`;
  }
  const { userId } = author;
  if (target.kind === "room") {
    return sql`select null::text as member_language from ${rooms}
      join ${roomMembers} on ${roomMembers.roomId} = ${rooms.id} and ${roomMembers.userId} = ${userId}
      where ${rooms.id} = ${target.roomId} and ${rooms.expiresAt} > ${now.toISOString()}::timestamptz
      for share`;
  }
  if (target.kind === "conversation") {
    // The lock the update of its last message takes anyway: two posts to one conversation queue
    // here rather than deadlock on upgrading two shared locks.
    return sql`select null::text as member_language from ${conversations}
      where ${conversations.id} = ${target.conversationId}
        and (${conversations.userAId} = ${userId} or ${conversations.userBId} = ${userId})
      for no key update`;
  }
  return sql`select ${workspaceMembers.preferredLanguage} as member_language from ${channels}
    join ${workspaceMembers} on ${workspaceMembers.workspaceId} = ${channels.workspaceId} and ${workspaceMembers.userId} = ${userId}
    join ${channelMembers} on ${channelMembers.channelId} = ${channels.id} and ${channelMembers.userId} = ${userId}
    where ${channels.id} = ${target.channelId} and ${channels.workspaceId} = ${target.workspaceId}
    for share`;
}

/** A subquery of the members' user ids, for `inArray(column, placeMemberIds(…))`. */
export function placeMemberIds(db: Executor, target: MessageTarget) {
  if (target.kind === "room")
    return db.select({ userId: roomMembers.userId }).from(roomMembers).where(eq(roomMembers.roomId, target.roomId));
  return target.kind === "channel"
    ? db
        .select({ userId: channelMembers.userId })
        .from(channelMembers)
        .innerJoin(
          workspaceMembers,
          and(eq(workspaceMembers.workspaceId, target.workspaceId), eq(workspaceMembers.userId, channelMembers.userId)),
        )
        .where(eq(channelMembers.channelId, target.channelId))
    : db
        .select({ userId: users.id })
        .from(users)
        .innerJoin(
          conversations,
          and(
            eq(conversations.id, target.conversationId),
            or(eq(conversations.userAId, users.id), eq(conversations.userBId, users.id)),
          ),
        );
}

/**
 * Batch form of the members rule for a query over many messages: SQL selecting the member
 * user ids (column `user_id`) of the place described by the columns `kind`, `place_id` and
 * `workspace_id` of the row alias `m` (an unnest of the batch).
 */
export const placeMembersOfRow = sql`
  select cm.user_id from ${channelMembers} cm
    join ${workspaceMembers} wm on wm.workspace_id = m.workspace_id and wm.user_id = cm.user_id
    where m.kind = 'channel' and cm.channel_id = m.place_id
  union all
  select rm.user_id from ${roomMembers} rm where m.kind = 'room' and rm.room_id = m.place_id
  union all
  select unnest(array[c.user_a_id, c.user_b_id]) from ${conversations} c
    where m.kind = 'conversation' and c.id = m.place_id`;

/**
 * Batch form of the readers rule: SQL selecting the distinct reading languages (column
 * `language`) of everyone who may read the place of row `m` (as placeMembersOfRow). A channel
 * reader's language is their member language in its workspace, else their own.
 */
export const placeReaderLanguagesOfRow = sql`
  select distinct coalesce(wm.preferred_language, u.preferred_language) as language
    from ${workspaceMembers} wm join ${users} u on u.id = wm.user_id
    where m.kind = 'channel' and wm.workspace_id = m.workspace_id
      and (exists (select 1 from ${channels} ch where ch.id = m.place_id and ch.visibility = 'public')
        or exists (select 1 from ${channelMembers} cm where cm.channel_id = m.place_id and cm.user_id = wm.user_id))
  union
  select u.preferred_language from ${users} u join ${roomMembers} rm on rm.user_id = u.id
    where m.kind = 'room' and rm.room_id = m.place_id
  union
  select u.preferred_language from ${users} u join ${conversations} c on u.id in (c.user_a_id, c.user_b_id)
    where m.kind = 'conversation' and c.id = m.place_id`;

/** Where a stored message was posted. */
export function messageTargetOf(
  message: Pick<Message, "workspaceId" | "channelId" | "conversationId" | "roomId">,
): MessageTarget {
  if (message.roomId !== null) return { kind: "room", roomId: message.roomId };
  return message.conversationId !== null
    ? { kind: "conversation", conversationId: message.conversationId }
    : { kind: "channel", workspaceId: message.workspaceId!, channelId: message.channelId! };
}

/** The live stream that carries a place's messages, and the scope its events name. */
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
