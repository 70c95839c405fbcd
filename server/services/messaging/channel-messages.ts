// Channel messages: any workspace member reads a channel they can see (public, or private and
// theirs); posting needs channel membership. `system` messages are the server's alone.
import { and, eq, sql } from "drizzle-orm";
import type { Database } from "../../../db/client.ts";
import { prepared } from "../../../db/prepared.ts";
import { channelMembers, channels, workspaceMembers, type MessageType, type User } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { forbidden, invalidField } from "../../errors.ts";
import { requireVisibleChannel } from "../workspaces/channels.ts";
import { channelScope, messagePage } from "./history.ts";
import { postMessage } from "./post-message.ts";

export async function listChannelMessages(
  deps: Deps,
  userId: number,
  path: { workspaceId: string; channelId: string },
  page: { limit?: number | undefined; before?: string | undefined; parentMessageId?: string | undefined },
) {
  const { channel } = await requireVisibleChannel(deps.db, path.workspaceId, userId, path.channelId);
  return messagePage(deps.db, deps.config.appUrl, channelScope(channel.id, page.parentMessageId), page);
}

/** "Member of the workspace, channel visible, in the channel": the channel row when so. */
function preparePostingAccess(db: Database, name: string) {
  return db
    .select({ channel: channels, inChannel: channelMembers.userId })
    .from(channels)
    .innerJoin(
      workspaceMembers,
      and(
        eq(workspaceMembers.workspaceId, channels.workspaceId),
        eq(workspaceMembers.userId, sql.placeholder("userId")),
      ),
    )
    .leftJoin(
      channelMembers,
      and(eq(channelMembers.channelId, channels.id), eq(channelMembers.userId, sql.placeholder("userId"))),
    )
    .where(and(eq(channels.id, sql.placeholder("channelId")), eq(channels.workspaceId, sql.placeholder("workspaceId"))))
    .limit(1)
    .prepare(name);
}

/**
 * Posting is the hot path: one prepared query answers whether the user may post. Only when it
 * says no do the precise checks run, to give the right 404 or 403.
 */
async function postingChannel(deps: Deps, userId: number, path: { workspaceId: string; channelId: string }) {
  const access = prepared(deps.db, "channel_posting_access", preparePostingAccess);
  const [row] = await access.execute({ userId, channelId: path.channelId, workspaceId: path.workspaceId });
  if (row?.inChannel) return row.channel;
  await requireVisibleChannel(deps.db, path.workspaceId, userId, path.channelId);
  throw forbidden("Join the channel to post in it.");
}

export async function postChannelMessage(
  deps: Deps,
  user: User,
  path: { workspaceId: string; channelId: string },
  input: {
    content?: string | undefined;
    attachmentIds?: string[] | undefined;
    parentMessageId?: string | null | undefined;
    type?: MessageType | null | undefined;
    skipTranslation?: boolean | null | undefined;
  },
) {
  if (input.type === "system") throw invalidField("type", "The system type is reserved for the server.");
  const channel = await postingChannel(deps, user.id, path);
  return postMessage(deps, {
    author: { type: "user", user },
    target: { kind: "channel", workspaceId: path.workspaceId, channelId: channel.id },
    ...input,
  });
}
