// Unread and mention counts (docs/unread.md), in SQL, for every list that shows them: a
// channel's or a conversation's counts after a read position are read from the messages' own
// indexes at the moment of the query, so the post writes nothing for them and a count is never
// behind a message that committed. Each count stops at COUNT_CAP, so a place with a million
// unread messages costs what one with a thousand does.
//
// The rules (the contract's "Read state, unread counts, mentions and push preferences"):
// - unread_count: top-level messages after the position, not by the reader, not deleted;
// - mention_count: messages (replies included) after the position, not by the reader, that
//   mention the reader (`<@id>` lists them in mentioned_user_ids, which holds only members who
//   could read the message) or everyone (`<!channel>`, `<!here>`); in a direct conversation
//   every unread message counts as a mention.
import { sql, type SQL } from "drizzle-orm";
import {
  channelMembers,
  channels,
  conversationReadStates,
  messages,
  workspaceMembers,
} from "../../../db/schema/index.ts";

/** Counts stop here (the contract allows it): the cost of a count is bounded. */
export const COUNT_CAP = 1000;

/** A user id as a parameter, or an SQL expression naming one (a column of a batch). */
export type UserRef = number | SQL;
const user = (userId: UserRef) => (typeof userId === "number" ? sql`${userId}::integer` : userId);

const capped = (rows: SQL) => sql`(select count(*)::integer from (${rows} limit ${sql.raw(String(COUNT_CAP))}) capped)`;

/**
 * SQL of a channel's `unread_count` for `userId` after `position` (an SQL expression, null: the
 * beginning), served by the history index (messages_channel_id_id_idx) alone.
 */
export function channelUnreadCount(userId: UserRef, channelId: SQL, position: SQL): SQL {
  return capped(sql`select 1 from ${messages} u where u.channel_id = ${channelId} and u.parent_message_id is null
    and u.id > coalesce(${position}, '') and u.deleted_at is null
    and u.author_user_id is distinct from ${user(userId)}`);
}

/** SQL of a channel's `mention_count` for `userId` after `position`, served by messages_channel_mentions_idx. */
export function channelMentionCount(userId: UserRef, channelId: SQL, position: SQL): SQL {
  return capped(sql`select 1 from ${messages} x where x.channel_id = ${channelId} and x.deleted_at is null
    and (x.mentions_channel or x.mentioned_user_ids <> '{}'::integer[])
    and x.id > coalesce(${position}, '') and x.author_user_id is distinct from ${user(userId)}
    and (x.mentions_channel or ${user(userId)} = any(x.mentioned_user_ids))`);
}

/** SQL of a conversation's `unread_count` for `userId` after `position`. */
export function conversationUnreadCount(userId: UserRef, conversationId: SQL, position: SQL): SQL {
  return capped(sql`select 1 from ${messages} u where u.conversation_id = ${conversationId}
    and u.id > coalesce(${position}, '') and u.deleted_at is null and u.parent_message_id is null
    and u.author_user_id is distinct from ${user(userId)}`);
}

/** SQL of a conversation's `mention_count`: every unread message, replies included. */
export function conversationMentionCount(userId: UserRef, conversationId: SQL, position: SQL): SQL {
  return capped(sql`select 1 from ${messages} x where x.conversation_id = ${conversationId}
    and x.id > coalesce(${position}, '') and x.deleted_at is null
    and x.author_user_id is distinct from ${user(userId)}`);
}

/**
 * SQL of the position a new member of a channel starts at: its newest live message, reply or not
 * (null when it has none), so that joining shows nothing old as unread. Two index lookups: the
 * newest top-level message and the newest reply.
 */
export function channelStartPosition(channelId: string): SQL {
  return sql`greatest(
    (select max(m.id) from ${messages} m where m.channel_id = ${channelId} and m.parent_message_id is null and m.deleted_at is null),
    (select max(r.id) from ${messages} r where r.channel_id = ${channelId} and r.parent_message_id is not null and r.deleted_at is null))`;
}

/**
 * SQL of a user's `total_mentions` (what an app badge shows): the mention counts of their
 * channels (still in the channel's workspace) and conversations, muted places left out. `userId`
 * may name a column, to count many users' badges in one statement.
 */
export function totalMentions(userId: UserRef): SQL {
  const who = user(userId);
  return sql`(coalesce((select sum(${channelMentionCount(who, sql`cm.channel_id`, sql`cm.last_read_message_id`)})
      from ${channelMembers} cm join ${channels} ch on ch.id = cm.channel_id
        join ${workspaceMembers} wm on wm.workspace_id = ch.workspace_id and wm.user_id = cm.user_id
      where cm.user_id = ${who} and not cm.muted), 0)
    + coalesce((select sum(${conversationMentionCount(who, sql`rs.conversation_id`, sql`rs.last_read_message_id`)})
      from ${conversationReadStates} rs where rs.user_id = ${who} and not rs.muted), 0))::integer`;
}
