// Talking in a temporary room (docs/rooms.md): its members read and post messages through the
// one message service (translation and push as in channels; no threads) and follow it live;
// the subscription ends with the room's `room.expired` event, or when the room is found gone.
import { eq } from "drizzle-orm";
import { messages, type User } from "../../../db/schema/index.ts";
import type { Auth } from "../../auth.ts";
import type { Deps } from "../../deps.ts";
import { LiveSubscription } from "../../events/live-subscription.ts";
import { streams } from "../../events/streams.ts";
import { messagePage, type PageRequest } from "../messaging/history.ts";
import { readerView } from "../messaging/live.ts";
import { postMessage } from "../messaging/post-message.ts";
import { postRefusal, requireRoomMember } from "../../policy/places.ts";

export async function listRoomMessages(deps: Deps, userId: number, roomId: string, page: PageRequest) {
  await requireRoomMember(deps, userId, roomId);
  return messagePage(deps, { userId, workspaceId: null }, eq(messages.roomId, roomId), page);
}

export async function postRoomMessage(
  deps: Deps,
  user: User,
  roomId: string,
  input: {
    content?: string | undefined;
    attachmentIds?: string[] | undefined;
    skipTranslation?: boolean | null | undefined;
    clientMessageId?: string | null | undefined;
  },
) {
  const posted = await postMessage(deps, {
    author: { type: "user", user },
    target: { kind: "room", roomId },
    ...input,
  });
  // Not posted: not a member, or the room is gone.
  if (!posted) throw await postRefusal(deps, user.id, { kind: "room", roomId });
  return posted;
}

export async function roomEvents(
  deps: Deps,
  auth: Auth,
  input: { roomId: string; lastEventId?: string | null | undefined },
  signal: AbortSignal | undefined,
) {
  const room = await requireRoomMember(deps, auth.user.id, input.roomId);
  return new LiveSubscription({
    db: deps.db,
    bus: deps.events,
    // The user's own stream too: their language changes arrive there.
    topics: [streams.room(room.id), streams.user(auth.user.id)],
    lastEventId: input.lastEventId,
    viewerId: auth.user.id,
    signal,
    view: await readerView(deps, auth.user.id),
    watch: (event) => {
      if (event.room_id !== room.id) return "skip";
      return event.type === "room.expired" ? "end" : undefined;
    },
  });
}
