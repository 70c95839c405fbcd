// Channel messages: any workspace member reads a channel they can see (public, or private and
// theirs); posting needs channel membership. `system` messages are the server's alone.
import type { MessageType, User } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { postRefusal, requireVisibleChannel } from "../../policy/places.ts";
import { channelAnchorScope, channelScope, messagePage, type PageRequest } from "./history.ts";
import { postMessage } from "./post-message.ts";

export async function listChannelMessages(
  deps: Deps,
  userId: number,
  path: { workspaceId: string; channelId: string },
  page: PageRequest & { parentMessageId?: string | undefined },
) {
  const { channel } = await requireVisibleChannel(deps.db, path.workspaceId, userId, path.channelId);
  // `after` and `around` name a message of what is listed: in a thread, one of its replies; in
  // the top-level history, any message of the channel (a reply's id is a position there too).
  const scope = channelScope(channel.id, page.parentMessageId);
  return messagePage(
    deps,
    { userId, workspaceId: path.workspaceId },
    scope,
    { limit: page.limit, before: page.before, after: page.after, around: page.around },
    page.parentMessageId ? scope : channelAnchorScope(channel.id),
  );
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
    clientMessageId?: string | null | undefined;
  },
) {
  if (input.type === "system") throw invalidField("type", "The system type is reserved for the server.");
  const posted = await postMessage(deps, {
    author: { type: "user", user },
    target: { kind: "channel", workspaceId: path.workspaceId, channelId: path.channelId },
    ...input,
  });
  if (posted) return posted;
  // Not posted: say why, 404 for a workspace or channel the user cannot see, else 403.
  throw await postRefusal(deps, user.id, { kind: "channel", ...path });
}
