// Who gets a push for a message (docs/push.md), in SQL: the push job (delivery.ts) finds in one
// statement who gets each of its messages, on which devices, with what badge. The members of
// each place come from the target policy (server/policy/audiences.ts), read once per place of
// the job's messages (`pushCandidatesOfPlace`); this module adds only what push decides on top
// of membership (`pushWanted`, per message):
// - a channel message: members whose level is `all`, or `mentions` and it mentions them (they
//   are in `mentioned_user_ids`, or it says `<!channel>`/`<!here>`); a member's level is their
//   channel setting, `default` following their own `users.channel_push`;
// - a thread reply, besides: the thread's participants (the parent's author and whoever replied
//   before it, still members) unless their level is `none`;
// - a temporary room's message: as a channel message, at each member's own default level;
// - a direct message: the other participant;
// - never a muted channel or conversation, never the author, never a deactivated account.
import { sql, type SQL } from "drizzle-orm";
import { channelMembers, conversationReadStates, messages, users } from "../../../db/schema/index.ts";
import { placeMembersOfRow } from "../../policy/audiences.ts";

/**
 * The messages of `ids` (an SQL text[] expression) as rows `m` for `pushWanted`, read
 * from the table by primary key (the mentions as they are now, an edit included). Server
 * notices and deleted messages wake nobody, so they are left out.
 */
export function pushMessageRows(ids: SQL): SQL {
  return sql`(select x.id,
      case when x.room_id is not null then 'room' when x.conversation_id is not null then 'conversation'
        else 'channel' end as kind,
      coalesce(x.room_id, x.conversation_id, x.channel_id) as place_id, x.workspace_id,
      x.author_user_id as author_id, x.parent_message_id as parent_id, x.mentioned_user_ids, x.mentions_channel
    from ${messages} x where x.id = any(${ids}) and x.type <> 'system' and x.deleted_at is null) m`;
}

/** A member's push level in the place of `m`: their channel setting, or (`default`, a room) their own. */
const level = sql`case when pcm.push is null or pcm.push = 'default' then pu.channel_push else pcm.push end`;

/**
 * SQL selecting, for the place row `m` (columns `kind`, `place_id`, `workspace_id`, what the
 * policy's `placeMembersOfRow` reads), the members who may get its messages' pushes at all:
 * active accounts that have not muted it, each with their push level there (column `level`;
 * unused for a conversation). What depends on the message (its author, mentions, thread) is
 * `pushWanted`. Run once per place of a job's messages, not once per message. A user may
 * appear twice (a conversation with oneself): `select distinct` where it matters.
 */
export const pushCandidatesOfPlace = sql`
  select pu.id as user_id, ${level} as level
  from (${placeMembersOfRow}) members
    join ${users} pu on pu.id = members.user_id and pu.is_active
    left join ${channelMembers} pcm on m.kind = 'channel' and pcm.channel_id = m.place_id and pcm.user_id = pu.id
    left join ${conversationReadStates} prs
      on m.kind = 'conversation' and prs.conversation_id = m.place_id and prs.user_id = pu.id
  where not coalesce(pcm.muted, false) and not coalesce(prs.muted, false)`;

/**
 * SQL condition: the candidate row `c` (of `pushCandidatesOfPlace`, for the place of `m`) gets
 * a push for the message row `m` (columns as `pushMessageRows` names them). The thread's
 * participants are read once per message (the subquery depends on `m` alone, so PostgreSQL
 * hashes it), not once per candidate.
 */
export const pushWanted = sql`
  c.user_id is distinct from m.author_id
    and (m.kind = 'conversation'
      or c.level = 'all'
      or (c.level = 'mentions' and (m.mentions_channel or c.user_id = any(m.mentioned_user_ids)))
      or (m.parent_id is not null and c.level <> 'none' and c.user_id in (
        select p.author_user_id from ${messages} p where p.id = m.parent_id and p.author_user_id is not null
        union all
        select r.author_user_id from ${messages} r
          where r.parent_message_id = m.parent_id and r.id < m.id and r.author_user_id is not null)))`;
