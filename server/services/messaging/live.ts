// Live subscriptions (tRPC over WebSocket or SSE): a channel, a conversation, or everything
// the user can see. Each checks access first, resumes from lastEventId, and ends when the
// subscriber loses access (removed from the channel or workspace, channel deleted).
import type { Auth } from "../../auth.ts";
import type { Deps } from "../../deps.ts";
import { isoTimestamp } from "../../clock.ts";
import { LiveSubscription, type WatchDecision } from "../../events/live-subscription.ts";
import { streams, type BusEvent, type StreamEvent } from "../../events/streams.ts";
import { invalidField } from "../../errors.ts";
import { requireVisibleChannel } from "../../policy/places.ts";
import { ReaderLanguages, translationEnabled } from "../translation/readers.ts";
import { requireParticipant, userStreams } from "../../policy/places.ts";

type Signal = AbortSignal | undefined;

/** Whether a workspace event takes away the user's access to the channel. */
function losesChannel(event: StreamEvent, userId: number, channelId: string): boolean {
  switch (event.type) {
    case "channel.deleted":
      return event.data.channel_id === channelId;
    case "channel.member_left":
      return event.data.user_id === userId && event.data.channel_id === channelId;
    case "member.left":
      return event.data.user_id === userId;
    default:
      return false;
  }
}

export async function channelEvents(
  deps: Deps,
  auth: Auth,
  input: { workspaceId: string; channelId: string; lastEventId?: string | null | undefined },
  signal: Signal,
) {
  const { channel } = await requireVisibleChannel(deps.db, input.workspaceId, auth.user.id, input.channelId);
  return new LiveSubscription({
    db: deps.db,
    bus: deps.events,
    // The user's own stream too: their language changes arrive there.
    topics: [streams.channel(channel.id), streams.workspace(input.workspaceId), streams.user(auth.user.id)],
    lastEventId: input.lastEventId,
    viewerId: auth.user.id,
    signal,
    view: await readerView(deps, auth.user.id),
    watch: (event) => {
      if (event.channel_id === channel.id) return undefined;
      return losesChannel(event, auth.user.id, channel.id) ? "end" : "skip";
    },
  });
}

export async function conversationEvents(
  deps: Deps,
  auth: Auth,
  input: { conversationId: string; lastEventId?: string | null | undefined },
  signal: Signal,
) {
  const conversation = await requireParticipant(deps, auth.user.id, input.conversationId);
  return new LiveSubscription({
    db: deps.db,
    bus: deps.events,
    // The user's own stream too: their language changes arrive there.
    topics: [streams.conversation(conversation.id), streams.user(auth.user.id)],
    lastEventId: input.lastEventId,
    viewerId: auth.user.id,
    signal,
    view: await readerView(deps, auth.user.id),
    watch: (event) => (event.conversation_id === conversation.id ? undefined : "skip"),
  });
}

/** Each event as the subscriber sees it: messages with the translation state for their language. */
export function readerView(deps: Deps, userId: number): Promise<ReaderLanguages> {
  return new ReaderLanguages(userId, translationEnabled(deps.config)).load(deps.db);
}

/**
 * How the user's own stream follows their memberships: an event that changes what they belong
 * to makes it look their streams up again; a deleted channel is dropped without a query.
 * Membership changes of other people change nothing here.
 */
function followMemberships(deps: Deps, userId: number) {
  return (event: StreamEvent, followed: readonly string[]): WatchDecision | Promise<WatchDecision> => {
    switch (event.type) {
      case "workspace.joined":
      case "conversation.created":
        return userStreams(deps.db, userId);
      case "member.left":
      case "channel.member_joined":
      case "channel.member_left":
        return event.data.user_id === userId ? userStreams(deps.db, userId) : undefined;
      case "channel.deleted": {
        const topic = streams.channel(event.data.channel_id);
        return followed.includes(topic) ? followed.filter((other) => other !== topic) : undefined;
      }
      default:
        return undefined;
    }
  };
}

export async function userEvents(
  deps: Deps,
  auth: Auth,
  input: { lastEventId?: string | null | undefined },
  signal: Signal,
) {
  return new LiveSubscription({
    db: deps.db,
    bus: deps.events,
    topics: await userStreams(deps.db, auth.user.id),
    lastEventId: input.lastEventId,
    viewerId: auth.user.id,
    signal,
    view: await readerView(deps, auth.user.id),
    watch: followMemberships(deps, auth.user.id),
  });
}

/**
 * "Someone is typing": ephemeral, not stored and not resumable. Sent on the channel's or
 * conversation's stream to the people who may see it.
 */
export async function startTyping(
  deps: Deps,
  auth: Auth,
  input: { workspaceId?: string | undefined; channelId?: string | undefined; conversationId?: string | undefined },
) {
  let stream: string;
  let scope: Pick<StreamEvent, "workspace_id" | "channel_id" | "conversation_id">;
  if (input.conversationId) {
    const conversation = await requireParticipant(deps, auth.user.id, input.conversationId);
    stream = streams.conversation(conversation.id);
    scope = { conversation_id: conversation.id };
  } else if (input.workspaceId && input.channelId) {
    const { channel } = await requireVisibleChannel(deps.db, input.workspaceId, auth.user.id, input.channelId);
    stream = streams.channel(channel.id);
    scope = { workspace_id: input.workspaceId, channel_id: channel.id };
  } else {
    throw invalidField("conversation_id", "Name a conversation, or a workspace and channel.");
  }
  const event: StreamEvent = {
    id: "",
    type: "typing",
    ...scope,
    created_at: isoTimestamp(deps.clock.now()),
    data: { user: { id: auth.user.id, name: auth.user.name } },
  };
  await deps.events.publish(stream, { event } satisfies BusEvent);
}
