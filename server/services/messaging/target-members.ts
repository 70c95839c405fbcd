// Who belongs where a message is posted: the users a new message is for (its push recipients,
// the author aside). A channel's members are the users who joined it and are still members of
// its workspace (the same pair of rows postMessage checks, and locks, before a user posts); a
// conversation's are its two participants. Workspace members who can read a public channel
// without having joined it are not woken by its messages (as in Slack and Mattermost).
import { and, eq, or } from "drizzle-orm";
import type { Executor } from "../../../db/client.ts";
import { channelMembers, conversations, users, workspaceMembers } from "../../../db/schema/index.ts";
import type { MessageTarget } from "./post-message.ts";

/** A subquery of the members' user ids, for `inArray(column, targetMemberIds(…))`. */
export function targetMemberIds(db: Executor, target: MessageTarget) {
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
