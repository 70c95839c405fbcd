// Push preferences (docs/push.md): a member's push level and mute in a channel, a participant's
// mute in a direct conversation, and the user's own default level for channels. Each read or
// change is one statement after the token check: it asks the target policy whether the caller
// may read the place (server/policy/places.ts, `readingRight`) and reads or writes their row in
// it; its final select says which check failed, so a refusal needs no second query. Whoever may
// not read the place is told it does not exist (404); a workspace member who can read a public
// channel without having joined it has no settings there (403).
import { sql } from "drizzle-orm";
import { runStatement } from "../../../db/prepared.ts";
import { channelMembers, conversationReadStates, conversations, users } from "../../../db/schema/index.ts";
import type { ChannelPushLevel } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { forbidden, notFound } from "../../errors.ts";
import { CHANNEL_NOT_FOUND, CONVERSATION_NOT_FOUND, readingRight } from "../../policy/places.ts";

/** A channel's push setting: a level, or `default` (follow the user's own `channel_push`). */
export const CHANNEL_PUSH_SETTINGS = ["default", "all", "mentions", "none"] as const;
export type ChannelPushSetting = (typeof CHANNEL_PUSH_SETTINGS)[number];

export type ChannelPreferences = { push: ChannelPushSetting; muted: boolean };
export type ConversationPreferences = { muted: boolean };
export type UserPreferences = { channel_push: ChannelPushLevel };

export const JOIN_TO_SET_PREFERENCES = "Join the channel to set its notification preferences.";

type ChannelRow = { readable: boolean; member: boolean; push: ChannelPushSetting | null; muted: boolean | null };

/**
 * The caller's preferences in a channel, changed first by `change` (a field left out keeps its
 * value). 404 when they may not read it, 403 when they have not joined it.
 */
export async function channelPreferences(
  deps: Deps,
  userId: number,
  place: { workspaceId: string; channelId: string },
  change?: Partial<ChannelPreferences>,
): Promise<ChannelPreferences> {
  const now = deps.clock.now();
  const own = sql`s.channel_id = ${place.channelId} and s.user_id = ${userId}::integer and exists (select 1 from readable)`;
  const setting = change
    ? sql`update ${channelMembers} s set push = coalesce(${change.push ?? null}::text, s.push),
        muted = coalesce(${change.muted ?? null}::boolean, s.muted)
        where ${own} returning s.push, s.muted`
    : sql`select s.push, s.muted from ${channelMembers} s where ${own}`;
  const row = await runStatement<ChannelRow>(
    deps.db,
    sql`with readable as (${readingRight(userId, { kind: "channel", ...place }, now)}),
      setting as (${setting})
      select exists (select 1 from readable) as readable, exists (select 1 from setting) as member,
        (select push from setting) as push, (select muted from setting) as muted`,
  );
  if (!row?.readable) throw notFound(CHANNEL_NOT_FOUND);
  if (!row.member || row.push === null || row.muted === null) throw forbidden(JOIN_TO_SET_PREFERENCES);
  return { push: row.push, muted: row.muted };
}

type ConversationRow = { readable: boolean; muted: boolean | null };

/** The caller's preferences in a direct conversation, changed first by `change`; 404 for anyone but its participants. */
export async function conversationPreferences(
  deps: Deps,
  userId: number,
  conversationId: string,
  change?: ConversationPreferences,
): Promise<ConversationPreferences> {
  const now = deps.clock.now();
  // Each participant's row is written with the conversation; should one be missing, a change
  // writes it, starting its read position where a new conversation's starts (its newest message).
  const setting = change
    ? sql`insert into ${conversationReadStates} (conversation_id, user_id, last_read_message_id, muted)
        select c.id, ${userId}::integer, c.last_message_id, ${change.muted}::boolean
        from ${conversations} c where c.id = ${conversationId} and exists (select 1 from readable)
        on conflict (conversation_id, user_id) do update set muted = excluded.muted
        returning muted`
    : sql`select s.muted from ${conversationReadStates} s
        where s.conversation_id = ${conversationId} and s.user_id = ${userId}::integer and exists (select 1 from readable)`;
  const row = await runStatement<ConversationRow>(
    deps.db,
    sql`with readable as (${readingRight(userId, { kind: "conversation", conversationId }, now)}),
      setting as (${setting})
      select exists (select 1 from readable) as readable, (select muted from setting) as muted`,
  );
  if (!row?.readable) throw notFound(CONVERSATION_NOT_FOUND);
  return { muted: row.muted ?? false };
}

/** The user's own default push level for channels, changed first when `change` is given. */
export async function userPreferences(deps: Deps, userId: number, change?: UserPreferences): Promise<UserPreferences> {
  const row = await runStatement<{ channel_push: ChannelPushLevel }>(
    deps.db,
    change
      ? sql`update ${users} set channel_push = ${change.channel_push}::text where id = ${userId}::integer
          returning channel_push`
      : sql`select channel_push from ${users} where id = ${userId}::integer`,
  );
  // The caller's token was just checked: their row exists.
  return { channel_push: row?.channel_push ?? "mentions" };
}
