// The target policy: who may read, post in and hear a place where messages are posted (a
// channel, a thread in it, a direct conversation, a temporary room), answered here once for every
// caller. Reads, downloads and live subscriptions ask `requireReadable` (or the kind's own
// `requireVisibleChannel`, `requireParticipant`, `requireRoomMember`); the post's one statement
// asks `postingRight`, and a refused post `postRefusal` (404 or 403); the live stream of a place
// is `messageStream`; the consumers of the event log ask audiences.ts (members and readers).
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
// Whoever may not read a place is told it does not exist (404); a workspace member who may read
// a channel but not post in it is told 403.
import { and, eq, gt, or, sql, type Placeholder, type SQL } from "drizzle-orm";
import type { Executor } from "../../db/client.ts";
import {
  channelMembers,
  channels,
  conversations,
  roomMembers,
  rooms,
  workspaceMembers,
  type Channel,
  type Conversation,
  type Message,
  type Room,
} from "../../db/schema/index.ts";
import type { Clock } from "../clock.ts";
import { forbidden, notFound, type AppError } from "../errors.ts";
import { streams, type EventEntry } from "../events/streams.ts";
import { requireMember, type Membership } from "./workspaces.ts";

export const CHANNEL_NOT_FOUND = "Channel not found.";
export const CONVERSATION_NOT_FOUND = "Conversation not found.";
export const ROOM_NOT_FOUND = "Room not found.";

export type MessageTarget =
  | { kind: "channel"; workspaceId: string; channelId: string }
  | { kind: "conversation"; conversationId: string }
  | { kind: "room"; roomId: string };

/** A value in SQL: the value itself, or a placeholder filled when a statement built once runs. */
export type Bound<T> = T | Placeholder;

/** A place as `MessageTarget`, with its ids possibly placeholders (a statement built once per shape). */
export type BoundTarget =
  | { kind: "channel"; workspaceId: Bound<string>; channelId: Bound<string> }
  | { kind: "conversation"; conversationId: Bound<string> }
  | { kind: "room"; roomId: Bound<string> };

/**
 * SQL selecting one row (column `member_language`: the author's language set in the channel's
 * workspace, or null) when `author` may post to `target` now, and none otherwise. The rows that
 * grant the right are locked until the statement's transaction ends, so a member removed (or a
 * room closed) meanwhile cannot slip a message in.
 */
export function postingRight(
  author: { userId: Bound<number> } | { botOf: "channel" },
  target: BoundTarget,
  now: Date | Placeholder,
): SQL {
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
      where ${rooms.id} = ${target.roomId} and ${rooms.expiresAt} > ${now instanceof Date ? now.toISOString() : now}::timestamptz
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

/**
 * SQL selecting a row when the user may read `place` now: the rule of `requireReadable`, for a
 * statement that acts on a message there (an edit, a delete, a reaction) and must answer 404
 * to whoever may not read it.
 */
export function readingRight(userId: number, place: MessageTarget, now: Date): SQL {
  const filter: PlaceFilter =
    place.kind === "room"
      ? { roomId: place.roomId }
      : place.kind === "conversation"
        ? { conversationId: place.conversationId }
        : { workspaceId: place.workspaceId, channelId: place.channelId };
  return sql`select 1 from (${readablePlaces(userId, filter, now)}) readable`;
}

/** What a search narrows the places to; each filter is optional, and those given all apply. */
export type PlaceFilter = {
  workspaceId?: string | undefined;
  channelId?: string | undefined;
  conversationId?: string | undefined;
  roomId?: string | undefined;
};

/**
 * SQL selecting every place the user may read now, narrowed by `filter`: rows of `place_id` (a
 * channel, conversation or room id) and `workspace_id` (null outside channels). The rule of
 * `readingRight`, for all places at once (a search over everything the caller can read).
 */
export function readablePlaces(userId: number, filter: PlaceFilter, now: Date): SQL {
  const parts: SQL[] = [];
  const channelsOnly = filter.workspaceId !== undefined || filter.channelId !== undefined;
  if (filter.conversationId === undefined && filter.roomId === undefined) {
    parts.push(sql`select ${channels.id} as place_id, ${channels.workspaceId} as workspace_id from ${channels}
      join ${workspaceMembers} on ${workspaceMembers.workspaceId} = ${channels.workspaceId} and ${workspaceMembers.userId} = ${userId}
      where (${channels.visibility} = 'public' or exists (select 1 from ${channelMembers}
          where ${channelMembers.channelId} = ${channels.id} and ${channelMembers.userId} = ${userId}))
        ${filter.workspaceId === undefined ? sql`` : sql`and ${channels.workspaceId} = ${filter.workspaceId}`}
        ${filter.channelId === undefined ? sql`` : sql`and ${channels.id} = ${filter.channelId}`}`);
  }
  if (!channelsOnly && filter.roomId === undefined) {
    parts.push(sql`select ${conversations.id} as place_id, null::text as workspace_id from ${conversations}
      where (${conversations.userAId} = ${userId} or ${conversations.userBId} = ${userId})
        ${filter.conversationId === undefined ? sql`` : sql`and ${conversations.id} = ${filter.conversationId}`}`);
  }
  if (!channelsOnly && filter.conversationId === undefined) {
    parts.push(sql`select ${rooms.id} as place_id, null::text as workspace_id from ${rooms}
      join ${roomMembers} on ${roomMembers.roomId} = ${rooms.id} and ${roomMembers.userId} = ${userId}
      where ${rooms.expiresAt} > ${now.toISOString()}::timestamptz
        ${filter.roomId === undefined ? sql`` : sql`and ${rooms.id} = ${filter.roomId}`}`);
  }
  if (parts.length === 0) return sql`select null::text as place_id, null::text as workspace_id where false`;
  return sql.join(parts, sql` union all `);
}

/**
 * SQL selecting a row when the user moderates `place`: may delete anyone's message there. A
 * channel's workspace owners and admins; a room's owner; nobody in a conversation.
 */
export function moderatingRight(userId: number, place: MessageTarget): SQL {
  if (place.kind === "room") {
    return sql`select 1 from ${rooms} where ${rooms.id} = ${place.roomId} and ${rooms.ownerId} = ${userId}`;
  }
  if (place.kind === "conversation") return sql`select 1 where false`;
  return sql`select 1 from ${workspaceMembers} where ${workspaceMembers.workspaceId} = ${place.workspaceId}
    and ${workspaceMembers.userId} = ${userId} and ${workspaceMembers.role} in ('owner', 'admin')`;
}

/** SQL: the message row `m` is in `place` (a thread reply is in its channel). */
export function inPlace(m: string, place: MessageTarget): SQL {
  const column = (name: string) => sql.raw(`${m}.${name}`);
  if (place.kind === "room") return sql`${column("room_id")} = ${place.roomId}`;
  if (place.kind === "conversation") return sql`${column("conversation_id")} = ${place.conversationId}`;
  return sql`${column("channel_id")} = ${place.channelId} and ${column("workspace_id")} = ${place.workspaceId}`;
}

export const MESSAGE_NOT_FOUND = "Message not found.";

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
  return placeStream(messageTargetOf(message));
}

/** The live stream that carries a place's messages, and the scope its events name. */
export function placeStream(place: MessageTarget): Pick<EventEntry, "stream" | "scope"> {
  if (place.kind === "room") return { stream: streams.room(place.roomId), scope: { room_id: place.roomId } };
  return place.kind === "conversation"
    ? { stream: streams.conversation(place.conversationId), scope: { conversation_id: place.conversationId } }
    : {
        stream: streams.channel(place.channelId),
        scope: { workspace_id: place.workspaceId, channel_id: place.channelId },
      };
}

/** Whether the user has joined the channel (a private channel's readers, a channel's posters). */
export async function isChannelMember(db: Executor, channelId: string, userId: number): Promise<boolean> {
  const rows = await db
    .select({ userId: channelMembers.userId })
    .from(channelMembers)
    .where(and(eq(channelMembers.channelId, channelId), eq(channelMembers.userId, userId)))
    .limit(1);
  return rows.length > 0;
}

/** The channel as the caller may see it: 404 when it is not in the workspace or is private and not theirs. */
async function visibleChannel(db: Executor, membership: Membership, channelId: string): Promise<Channel> {
  const [channel] = await db
    .select()
    .from(channels)
    .where(and(eq(channels.id, channelId), eq(channels.workspaceId, membership.workspace.id)))
    .limit(1);
  if (!channel) throw notFound(CHANNEL_NOT_FOUND);
  if (channel.visibility === "private" && !(await isChannelMember(db, channel.id, membership.member.userId))) {
    throw notFound(CHANNEL_NOT_FOUND);
  }
  return channel;
}

/** The caller's membership and a channel they may see: 404 for the workspace or the channel otherwise. */
export async function requireVisibleChannel(db: Executor, workspaceId: string, userId: number, channelId: string) {
  const membership = await requireMember(db, workspaceId, userId);
  return { membership, channel: await visibleChannel(db, membership, channelId) };
}

/** The conversation when the caller is in it; 404 otherwise. */
export async function requireParticipant(
  deps: { db: Executor },
  userId: number,
  conversationId: string,
): Promise<Conversation> {
  const [conversation] = await deps.db
    .select()
    .from(conversations)
    .where(
      and(
        eq(conversations.id, conversationId),
        or(eq(conversations.userAId, userId), eq(conversations.userBId, userId)),
      ),
    )
    .limit(1);
  if (!conversation) throw notFound(CONVERSATION_NOT_FOUND);
  return conversation;
}

/** The room when the caller has joined it and it lives; 404 otherwise (an expired room is gone at once). */
export async function requireRoomMember(
  deps: { db: Executor; clock: Clock },
  userId: number,
  roomId: string,
): Promise<Room> {
  const [found] = await deps.db
    .select({ room: rooms })
    .from(rooms)
    .innerJoin(roomMembers, and(eq(roomMembers.roomId, rooms.id), eq(roomMembers.userId, userId)))
    .where(and(eq(rooms.id, roomId), gt(rooms.expiresAt, deps.clock.now())))
    .limit(1);
  if (!found) throw notFound(ROOM_NOT_FOUND);
  return found.room;
}

/** May the user read the place? Resolves when they may; 404 (the kind's message) when not. */
export async function requireReadable(
  deps: { db: Executor; clock: Clock },
  userId: number,
  place: MessageTarget,
): Promise<void> {
  if (place.kind === "channel") await requireVisibleChannel(deps.db, place.workspaceId, userId, place.channelId);
  else if (place.kind === "conversation") await requireParticipant(deps, userId, place.conversationId);
  else await requireRoomMember(deps, userId, place.roomId);
}

/**
 * Why a user's post was refused (the post statement wrote nothing): 404 when they may not read
 * the place, else 403 (a workspace member who has not joined the channel).
 */
export async function postRefusal(
  deps: { db: Executor; clock: Clock },
  userId: number,
  place: MessageTarget,
): Promise<AppError> {
  try {
    await requireReadable(deps, userId, place);
  } catch (error) {
    return error as AppError;
  }
  return forbidden("Join the channel to post in it.");
}

/** The live streams a user hears: their own, and those of their workspaces, channels and conversations. */
export async function userStreams(db: Executor, userId: number): Promise<string[]> {
  const [workspaceRows, channelRows, conversationRows] = await Promise.all([
    db.select({ id: workspaceMembers.workspaceId }).from(workspaceMembers).where(eq(workspaceMembers.userId, userId)),
    db.select({ id: channelMembers.channelId }).from(channelMembers).where(eq(channelMembers.userId, userId)),
    db
      .select({ id: conversations.id })
      .from(conversations)
      .where(or(eq(conversations.userAId, userId), eq(conversations.userBId, userId))),
  ]);
  return [
    streams.user(userId),
    ...workspaceRows.map((row) => streams.workspace(row.id)),
    ...channelRows.map((row) => streams.channel(row.id)),
    ...conversationRows.map((row) => streams.conversation(row.id)),
  ];
}
