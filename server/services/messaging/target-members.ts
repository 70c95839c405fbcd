// Who belongs where a message is posted: the users a new message is for (its push recipients,
// the author aside). A channel's members are the users who joined it and are still members of
// its workspace (the same pair of rows postMessage checks, and locks, before a user posts); a
// conversation's are its two participants; a room's, whoever joined it (its owner included). Workspace members who can read a public channel
// without having joined it are not woken by its messages (as in Slack and Mattermost).
import { and, eq, or, sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../../db/client.ts";
import {
  channelMembers,
  channels,
  conversations,
  roomMembers,
  users,
  workspaceMembers,
} from "../../../db/schema/index.ts";
import { readerLanguageSql } from "../translation/readers.ts";
import type { MessageTarget } from "./post-message.ts";

/** A subquery of the members' user ids, for `inArray(column, targetMemberIds(…))`. */
export function targetMemberIds(db: Executor, target: MessageTarget) {
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
 * SQL selecting the distinct languages (column `language`) of everyone who may read messages
 * posted where `target` says: a public channel's workspace members (any of them may open it),
 * a private channel's members (the rule of visibleChannel in workspaces/channels.ts), a
 * conversation's two participants, a room's members (their own language: rooms belong to no
 * workspace). Their reading language: readers.ts.
 */
export function targetReaderLanguages(target: MessageTarget): SQL {
  if (target.kind === "room") {
    return sql`select distinct ${users.preferredLanguage} as language from ${users}
      join ${roomMembers} on ${roomMembers.userId} = ${users.id} and ${roomMembers.roomId} = ${target.roomId}`;
  }
  if (target.kind === "conversation") {
    return sql`select distinct ${users.preferredLanguage} as language from ${users}
      join ${conversations} on ${conversations.id} = ${target.conversationId}
        and ${users.id} in (${conversations.userAId}, ${conversations.userBId})`;
  }
  return sql`select distinct ${readerLanguageSql()} as language from ${workspaceMembers}
    join ${users} on ${users.id} = ${workspaceMembers.userId}
    where ${workspaceMembers.workspaceId} = ${target.workspaceId}
      and (exists (select 1 from ${channels} where ${channels.id} = ${target.channelId} and ${channels.visibility} = 'public')
        or exists (select 1 from ${channelMembers} where ${channelMembers.channelId} = ${target.channelId}
          and ${channelMembers.userId} = ${workspaceMembers.userId}))`;
}
