// Channel messages: any workspace member reads a channel they can see (public, or private and
// theirs); posting needs channel membership. `system` messages are the server's alone.
import { and, eq } from "drizzle-orm";
import { channelMembers, type MessageType } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { forbidden, invalidField } from "../../errors.ts";
import { visibleChannel } from "../workspaces/channels.ts";
import { requireMember } from "../workspaces/access.ts";
import { channelScope, messagePage } from "./history.ts";
import { postMessage } from "./post-message.ts";

export async function listChannelMessages(
  deps: Deps,
  userId: number,
  path: { workspaceId: string; channelId: string },
  page: { limit?: number | undefined; before?: string | undefined; parentMessageId?: string | undefined },
) {
  const membership = await requireMember(deps.db, path.workspaceId, userId);
  const channel = await visibleChannel(deps.db, membership, path.channelId);
  return messagePage(deps.db, deps.config.appUrl, channelScope(channel.id, page.parentMessageId), page);
}

export async function postChannelMessage(
  deps: Deps,
  userId: number,
  path: { workspaceId: string; channelId: string },
  input: {
    content?: string | undefined;
    attachmentIds?: string[] | undefined;
    parentMessageId?: string | null | undefined;
    type?: MessageType | null | undefined;
    skipTranslation?: boolean | null | undefined;
  },
) {
  const membership = await requireMember(deps.db, path.workspaceId, userId);
  const channel = await visibleChannel(deps.db, membership, path.channelId);
  const [inChannel] = await deps.db
    .select({ userId: channelMembers.userId })
    .from(channelMembers)
    .where(and(eq(channelMembers.channelId, channel.id), eq(channelMembers.userId, userId)));
  if (!inChannel) throw forbidden("Join the channel to post in it.");
  if (input.type === "system") throw invalidField("type", "The system type is reserved for the server.");
  return postMessage(deps, {
    author: { type: "user", userId },
    target: { kind: "channel", workspaceId: path.workspaceId, channelId: channel.id },
    ...input,
  });
}
