// Channel messages: any workspace member reads a channel they can see (public, or private and
// theirs); posting needs channel membership. `system` messages are the server's alone.
import { and, eq } from "drizzle-orm";
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

/**
 * Posting is the hot path: one query answers "member of the workspace, channel visible, in the
 * channel". Only when it says no do the precise checks run, to give the right 404 or 403.
 */
async function postingChannel(deps: Deps, userId: number, path: { workspaceId: string; channelId: string }) {
  const [row] = await deps.db
    .select({ channel: channels, inChannel: channelMembers.userId })
    .from(channels)
    .innerJoin(
      workspaceMembers,
      and(eq(workspaceMembers.workspaceId, channels.workspaceId), eq(workspaceMembers.userId, userId)),
    )
    .leftJoin(channelMembers, and(eq(channelMembers.channelId, channels.id), eq(channelMembers.userId, userId)))
    .where(and(eq(channels.id, path.channelId), eq(channels.workspaceId, path.workspaceId)))
    .limit(1);
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
