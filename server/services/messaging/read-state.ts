// Read positions (docs/unread.md): `POST …/read` moves the caller's position in a channel or a
// direct conversation forward to a message, `POST …/unread` moves it back to just before one.
// Each is one statement after the token check: it checks that the caller may read the place
// (the target policy, server/policy/places.ts) and keeps a position there, that the message is
// a live message of the place, moves the position (forward only for `read`: the comparison is
// made on the locked row, so two devices racing leave the further one), counts what is left
// and, when the position moved, appends `read.updated` to the caller's own stream. The final
// select says which check failed, so a refusal needs no second query.
import { sql, type SQL } from "drizzle-orm";
import { runStatement } from "../../../db/prepared.ts";
import {
  channelMembers,
  channels,
  conversationReadStates,
  messages,
  workspaceMembers,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import type { PlaceCounts, UnreadSummary } from "../../records/read-state.ts";
import { forbidden, invalidField, notFound } from "../../errors.ts";
import { commitWithEvents, eventCte, EVENTS_WRITTEN, streams } from "../../events/streams.ts";
import {
  CHANNEL_NOT_FOUND,
  CONVERSATION_NOT_FOUND,
  inPlace,
  readingRight,
  type MessageTarget,
} from "../../policy/places.ts";
import {
  channelMentionCount,
  channelUnreadCount,
  conversationMentionCount,
  conversationUnreadCount,
} from "./unread-counts.ts";

/** The places that keep read positions: channels and direct conversations (not threads, not rooms). */
export type ReadPlace = Extract<MessageTarget, { kind: "channel" } | { kind: "conversation" }>;

export const NOT_A_MESSAGE_HERE = "The selected message id is invalid.";

type Row = {
  readable: boolean;
  kept: boolean;
  found: boolean;
  moved: boolean;
  last_read_message_id: string | null;
  unread_count: number | null;
  mention_count: number | null;
  events_written: number;
};

/** How the place's read-state row, its counts and its event scope are written in SQL. */
function placeSql(userId: number, place: ReadPlace) {
  if (place.kind === "channel") {
    const id = sql`${place.channelId}::text`;
    return {
      table: channelMembers,
      row: sql`s.channel_id = ${place.channelId} and s.user_id = ${userId}::integer`,
      unread: (position: SQL) => channelUnreadCount(userId, id, position),
      mentions: (position: SQL) => channelMentionCount(userId, id, position),
      scope: JSON.stringify({ workspace_id: place.workspaceId, channel_id: place.channelId }),
      notFound: CHANNEL_NOT_FOUND,
    };
  }
  const id = sql`${place.conversationId}::text`;
  return {
    table: conversationReadStates,
    row: sql`s.conversation_id = ${place.conversationId} and s.user_id = ${userId}::integer`,
    unread: (position: SQL) => conversationUnreadCount(userId, id, position),
    mentions: (position: SQL) => conversationMentionCount(userId, id, position),
    scope: JSON.stringify({ conversation_id: place.conversationId }),
    notFound: CONVERSATION_NOT_FOUND,
  };
}

/**
 * Moves the caller's read position: `read` forward to `messageId` (an older id changes nothing),
 * `unread` back to the message before it in the place (null when none is). Answers the position
 * and the counts after it.
 */
export async function moveReadPosition(
  deps: Deps,
  userId: number,
  place: ReadPlace,
  messageId: string,
  direction: "read" | "unread",
): Promise<PlaceCounts> {
  const now = deps.clock.now();
  const at = now.toISOString();
  const p = placeSql(userId, place);
  const next =
    direction === "read"
      ? sql`t.id`
      : sql`(select max(o.id) from ${messages} o where ${inPlace("o", place)} and o.deleted_at is null and o.id < t.id)`;
  const moves =
    direction === "read"
      ? sql`(s.last_read_message_id is null or s.last_read_message_id < t.id)`
      : sql`s.last_read_message_id is distinct from ${next}`;
  const row = await commitWithEvents(deps, () =>
    runStatement<Row>(
      deps.db,
      sql`with readable as (${readingRight(userId, place, now)}),
    kept as (select s.last_read_message_id, s.muted from ${p.table} s
      where ${p.row} and exists (select 1 from readable)),
    target as (select m.id from ${messages} m
      where m.id = ${messageId} and ${inPlace("m", place)} and m.deleted_at is null
        and exists (select 1 from readable)),
    moved as (update ${p.table} s set last_read_message_id = ${next} from target t
      where ${p.row} and ${moves}
      returning s.last_read_message_id, s.muted),
    now_at as (select case when exists (select 1 from moved) then (select last_read_message_id from moved)
      else (select last_read_message_id from kept) end as id, exists (select 1 from moved) as moved),
    counts as (select n.id, ${p.unread(sql`n.id`)} as unread_count, ${p.mentions(sql`n.id`)} as mention_count
      from now_at n where exists (select 1 from target) and exists (select 1 from kept)),
    ${eventCte(sql`select ${streams.user(userId)}, jsonb_build_object('type', 'read.updated', 'scope', ${p.scope}::jsonb,
          'data', jsonb_build_object('last_read_message_id', c.id, 'unread_count', c.unread_count,
            'mention_count', c.mention_count),
          -- For the push consumer: this read lowered the badge (a silent badge update is due).
          'reader_id', ${userId}::integer,
          'lowers_badge', not (select muted from moved)
            and ${p.mentions(sql`(select last_read_message_id from kept)`)} > c.mention_count),
        ${at}::timestamptz
      from counts c where exists (select 1 from moved)`)}
    select exists (select 1 from readable) as readable, exists (select 1 from kept) as kept,
      exists (select 1 from target) as found, (select moved from now_at) as moved,
      (select id from counts) as last_read_message_id, (select unread_count from counts) as unread_count,
      (select mention_count from counts) as mention_count,
      ${EVENTS_WRITTEN}`,
    ),
  );
  if (!row?.readable) throw notFound(p.notFound);
  if (!row.found) throw invalidField("message_id", NOT_A_MESSAGE_HERE);
  if (!row.kept) throw forbidden("Join the channel to keep a read position in it.");
  return {
    last_read_message_id: row.last_read_message_id,
    unread_count: row.unread_count ?? 0,
    mention_count: row.mention_count ?? 0,
  };
}

/**
 * `GET /api/v1/unread`: every channel (still in its workspace) and conversation of the caller
 * with anything unread, the sums per workspace, and `total_mentions` (the badge: mentions and
 * direct messages outside muted places). One statement; its CTEs are materialized so that each
 * count runs once per place (inlined, the filter on the counts would run them twice).
 */
export async function unreadSummary(deps: Pick<Deps, "db">, userId: number): Promise<UnreadSummary> {
  const row = await runStatement<{
    channels: UnreadSummary["channels"] | null;
    conversations: UnreadSummary["conversations"] | null;
  }>(
    deps.db,
    sql`with ch as materialized (select ch.workspace_id, cm.channel_id, cm.last_read_message_id, cm.muted,
        ${channelUnreadCount(userId, sql`cm.channel_id`, sql`cm.last_read_message_id`)} as unread_count,
        ${channelMentionCount(userId, sql`cm.channel_id`, sql`cm.last_read_message_id`)} as mention_count
      from ${channelMembers} cm join ${channels} ch on ch.id = cm.channel_id
        join ${workspaceMembers} wm on wm.workspace_id = ch.workspace_id and wm.user_id = cm.user_id
      where cm.user_id = ${userId}::integer),
    cv as materialized (select rs.conversation_id, rs.last_read_message_id, rs.muted,
        ${conversationUnreadCount(userId, sql`rs.conversation_id`, sql`rs.last_read_message_id`)} as unread_count,
        ${conversationMentionCount(userId, sql`rs.conversation_id`, sql`rs.last_read_message_id`)} as mention_count
      from ${conversationReadStates} rs where rs.user_id = ${userId}::integer)
    select (select jsonb_agg(to_jsonb(ch) order by ch.workspace_id, ch.channel_id) from ch
        where ch.unread_count > 0 or ch.mention_count > 0) as channels,
      (select jsonb_agg(to_jsonb(cv) order by cv.conversation_id) from cv
        where cv.unread_count > 0 or cv.mention_count > 0) as conversations`,
  );
  const channelRows = row?.channels ?? [];
  const conversationRows = row?.conversations ?? [];
  const workspaces = new Map<string, UnreadSummary["workspaces"][number]>();
  for (const channel of channelRows) {
    const sums = workspaces.get(channel.workspace_id) ?? {
      workspace_id: channel.workspace_id,
      unread_count: 0,
      mention_count: 0,
    };
    sums.unread_count += channel.unread_count;
    sums.mention_count += channel.mention_count;
    workspaces.set(channel.workspace_id, sums);
  }
  const unmuted = [...channelRows, ...conversationRows].filter((place) => !place.muted);
  return {
    total_mentions: unmuted.reduce((sum, place) => sum + place.mention_count, 0),
    workspaces: [...workspaces.values()],
    channels: channelRows,
    conversations: conversationRows,
  };
}
