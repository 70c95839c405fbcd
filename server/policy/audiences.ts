// Who a message is for, in SQL: the members a new message wakes (push) and the languages its
// readers read (translation), for one place (`placeMemberIds`) and as batch SQL over the rows of
// many messages (`placeMembersOfRow`, `placeReaderLanguagesOfRow`), so that a consumer of the
// event log decides a whole batch in one statement. The rules are those of places.ts.
import { and, eq, or, sql } from "drizzle-orm";
import type { Executor } from "../../db/client.ts";
import {
  channelMembers,
  channels,
  conversations,
  roomMembers,
  users,
  workspaceMembers,
} from "../../db/schema/index.ts";
import type { BoundTarget } from "./places.ts";

/** A subquery of the members' user ids, for `inArray(column, placeMemberIds(…))`. */
export function placeMemberIds(db: Executor, target: BoundTarget) {
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
