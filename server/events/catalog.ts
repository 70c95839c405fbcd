// Every live event a client can receive, one zod schema per type: the writer is checked
// against it (recordEvents parses `data` before it is stored) and the typed client infers
// `event.data` from the union, so TypeScript users get `event.data.message` on
// "message.created" without a cast. docs/realtime.md lists the same events for everyone else.
import { z } from "zod";
import { LANGUAGES, type Language } from "../../db/schema/index.ts";
import { timestamp } from "../records/common.ts";
import { messageRecord } from "../records/message.ts";
import { userRecord } from "../records/user.ts";
import { channelRecord, memberRecord } from "../records/workspace.ts";

const channelMembership = z.object({ channel_id: z.string(), user_id: z.number().int() });
const reactionChange = z.object({
  message_id: z.string(),
  emoji: z.string(),
  user_id: z.number().int(),
  count: z.number().int(),
});

/** The `data` of each event type. */
export const eventData = {
  "message.created": z.object({ message: messageRecord }),
  /**
   * A message's translation into `language` is stored (status "done", with its content) or
   * given up on ("failed", content null). Delivered only to subscribers who read that language.
   */
  "translation.ready": z.object({
    message_id: z.string(),
    language: z.enum(LANGUAGES),
    status: z.enum(["done", "failed"]),
    content: z.string().nullable(),
  }),
  /** A message was edited: the record in the subscriber's reader view, its reactions without `me`. */
  "message.updated": z.object({ message: messageRecord }),
  /**
   * A message was deleted (a thread parent with replies stays as a tombstone). When a tombstone
   * goes with its last reply, a second `message.deleted`, after the reply's, names the parent.
   */
  "message.deleted": z.object({
    id: z.string(),
    parent_message_id: z.string().nullable(),
    workspace_id: z.string().nullable(),
    channel_id: z.string().nullable(),
    conversation_id: z.string().nullable(),
    room_id: z.string().nullable(),
  }),
  /** Someone reacted; `count`: the emoji's count after it. */
  "reaction.added": reactionChange,
  /** Someone took a reaction back; `count`: the emoji's count after it (0: it is gone from the message). */
  "reaction.removed": reactionChange,
  /**
   * On the reader's own stream: their read position in the event's channel (workspace_id and
   * channel_id) or conversation (conversation_id) moved, with the counts after it, so that every
   * device of theirs updates its badge.
   */
  "read.updated": z.object({
    last_read_message_id: z.string().nullable(),
    unread_count: z.number().int(),
    mention_count: z.number().int(),
  }),
  /** Ephemeral: published to subscribers, never stored or replayed. */
  typing: z.object({ user: z.object({ id: z.number().int(), name: z.string() }) }),
  "user.updated": z.object({ user: userRecord }),
  /** On the user's own stream: they became a member of workspace_id. */
  "workspace.joined": z.object({}),
  /** On each participant's own stream: conversation_id was opened with them. */
  "conversation.created": z.object({}),
  "member.joined": z.object({ member: memberRecord }),
  "member.updated": z.object({ member: memberRecord }),
  "member.left": z.object({ member_id: z.string(), user_id: z.number().int() }),
  "channel.created": z.object({ channel: channelRecord }),
  "channel.updated": z.object({ channel: channelRecord }),
  "channel.deleted": z.object({ channel_id: z.string() }),
  "channel.member_joined": channelMembership,
  "channel.member_left": channelMembership,
  /** On a room's stream, 10 minutes before it closes (an extension moves it). */
  "room.expiring": z.object({ room_id: z.string(), expires_at: timestamp }),
  /** On a room's stream when it closed: its messages and files are gone; subscriptions end with this event. */
  "room.expired": z.object({ room_id: z.string() }),
} as const;

export type EventType = keyof typeof eventData;
export type EventData<T extends EventType> = z.infer<(typeof eventData)[T]>;

/** Where an event belongs: a workspace (and channel), a conversation, or a temporary room. */
const eventScope = {
  workspace_id: z.string().optional(),
  channel_id: z.string().optional(),
  conversation_id: z.string().optional(),
  room_id: z.string().optional(),
};
export type EventScope = { workspace_id?: string; channel_id?: string; conversation_id?: string; room_id?: string };

function liveEventOf<T extends EventType>(type: T) {
  return z.object({
    /** The event's position: pass the last one seen as lastEventId to resume after it. */
    id: z.string(),
    type: z.literal(type),
    ...eventScope,
    created_at: timestamp,
    data: eventData[type] as (typeof eventData)[T],
  });
}

/** What subscribers receive, discriminated by `type` (also the AsyncAPI document's event schemas, server/http/asyncapi.ts). */
export const liveEvent = z.discriminatedUnion("type", [
  liveEventOf("message.created"),
  liveEventOf("message.updated"),
  liveEventOf("message.deleted"),
  liveEventOf("reaction.added"),
  liveEventOf("reaction.removed"),
  liveEventOf("translation.ready"),
  liveEventOf("read.updated"),
  liveEventOf("typing"),
  liveEventOf("user.updated"),
  liveEventOf("workspace.joined"),
  liveEventOf("conversation.created"),
  liveEventOf("member.joined"),
  liveEventOf("member.updated"),
  liveEventOf("member.left"),
  liveEventOf("channel.created"),
  liveEventOf("channel.updated"),
  liveEventOf("channel.deleted"),
  liveEventOf("channel.member_joined"),
  liveEventOf("channel.member_left"),
  liveEventOf("room.expiring"),
  liveEventOf("room.expired"),
]);
export type LiveEvent = z.infer<typeof liveEvent>;

/**
 * Who may receive an event beyond "everyone who follows its stream". An event about a
 * private channel travels on the workspace's stream but is seen only by the channel's members
 * (and by `user_id`, the member it is about, who knew the channel), as the channel itself is
 * over REST. Checked live and on replay, against the subscriber's current channels.
 */
export type Audience = { channel_id: string; user_id?: number };

/**
 * An event to write: its stream, type, scope, audience and checked data; for a new message, the
 * language it was written in (`sourceLanguage`), which decides what each subscriber is shown of
 * its translation (translation/readers.ts). Kept with the event, never sent.
 */
export type EventEntry = {
  [T in EventType]: {
    stream: string;
    type: T;
    scope?: EventScope;
    audience?: Audience;
    sourceLanguage?: Language | null;
    data: EventData<T>;
  };
}[EventType];

/** Events the service sends itself on internal streams; no subscription can follow those. */
const internalEventData = {
  /** Some of the user's credentials were revoked: every process re-checks the user's live connections. */
  "session.revoked": z.object({ user_id: z.number().int() }),
  /**
   * The user's row changed (profile, e-mail, plan, password, last sign-in): every process forgets
   * the sign-ins it serves from memory for the user (server/services/accounts/credential-watch.ts).
   */
  "user.changed": z.object({ user_id: z.number().int() }),
  /** A push device was registered: the push consumer looks again whether anyone has one. */
  "push.device_registered": z.object({ user_id: z.number().int() }),
  /** A workspace's outbound webhooks changed: the outbound consumer reloads which workspaces have active ones. */
  "outbound.webhooks_changed": z.object({ workspace_id: z.string() }),
} as const;
export type InternalEventType = keyof typeof internalEventData;
export type InternalEventEntry = {
  [T in InternalEventType]: { stream: string; type: T; data: z.infer<(typeof internalEventData)[T]> };
}[InternalEventType];

/** The data of an event to be written, parsed by its type's schema (a wrong shape throws). */
export function checkedEventData(type: string, data: unknown): Record<string, unknown> {
  const schema =
    (eventData as Record<string, z.ZodType>)[type] ?? (internalEventData as Record<string, z.ZodType>)[type];
  if (!schema) throw new Error(`Unknown live event type "${type}"`);
  return schema.parse(data) as Record<string, unknown>;
}
