// Reactions (the contract's "Messages after they are posted"): anyone who may post in a place
// reacts to its messages; each person counts once per emoji; at most 50 distinct emoji per
// message. The counts, in the order each emoji was first used, are kept on the message row
// (`messages.reactions`), which every reaction locks first: concurrent reactions to one message
// take turns, so the 50-emoji limit and the counts hold when they race, and a history page
// reads them without a query per message. Who reacted is in message_reactions. Each verb is one
// statement after the token check, with its event (`reaction.added`, `reaction.removed`).
import { sql } from "drizzle-orm";
import { runStatement } from "../../../db/prepared.ts";
import { messageReactions, messages } from "../../../db/schema/index.ts";
import { commitWithEvents, eventCte, EVENTS_WRITTEN } from "../../events/streams.ts";
import type { Deps } from "../../deps.ts";
import { forbidden, invalidField, notFound } from "../../errors.ts";
import { MESSAGE_NOT_FOUND, postingRight, type MessageTarget } from "../../policy/places.ts";
import type { MessageRecord } from "../../records/message.ts";
import { eventHead, readerRecord, readerViewColumns, targetCte, type ReaderViewRow } from "./message-changes.ts";

/** Distinct emoji on one message at most. */
export const MAX_REACTION_EMOJI = 50;
/** `user_ids` listed per emoji by GET …/reactions. */
const REACTORS_LISTED = 100;

/** SQL: the emoji's count on the row `m` after the change (0 when it is gone). */
function countOf(m: string, emoji: string) {
  return sql`coalesce((select (x.r->>'count')::integer from jsonb_array_elements(${sql.raw(m)}.reactions) x(r)
    where x.r->>'emoji' = ${emoji}::text), 0)`;
}

type ReactRow = ReaderViewRow & {
  found: number;
  may_post: boolean;
  fits: boolean;
  added: boolean;
  events_written: number;
};

/** Adds the caller's reaction; reacting twice with the same emoji counts once. Answers the message as the caller reads it. */
export async function addReaction(
  deps: Deps,
  userId: number,
  place: MessageTarget,
  messageId: string,
  emoji: string,
): Promise<MessageRecord> {
  const now = deps.clock.now();
  const at = now.toISOString();
  const { stream, scope } = eventHead(place);
  const has = sql`m.reactions @> jsonb_build_array(jsonb_build_object('emoji', ${emoji}::text))`;
  const row = await commitWithEvents(deps, () =>
    runStatement<ReactRow>(
      deps.db,
      sql`with ${targetCte(userId, place, messageId, now, sql`for no key update`)},
    allowed as (select m.* from target m where exists (${postingRight({ userId }, place, now)})),
    fits as (select m.id from allowed m where ${has} or jsonb_array_length(m.reactions) < ${MAX_REACTION_EMOJI}::integer),
    added as (insert into ${messageReactions} (message_id, emoji, user_id, created_at)
      select id, ${emoji}::text, ${userId}::integer, ${at}::timestamptz from fits
      on conflict (message_id, emoji, user_id) do nothing
      returning message_id),
    counted as (update ${messages} m set reactions = case when ${has}
        then (select jsonb_agg(case when x.r->>'emoji' = ${emoji}::text
            then jsonb_set(x.r, '{count}', to_jsonb((x.r->>'count')::integer + 1)) else x.r end order by x.i)
          from jsonb_array_elements(m.reactions) with ordinality x(r, i))
        else m.reactions || jsonb_build_array(jsonb_build_object('emoji', ${emoji}::text, 'count', 1)) end
      where m.id in (select message_id from added)
      returning m.*),
    ${eventCte(sql`select ${stream}, jsonb_build_object('type', 'reaction.added', 'scope', ${scope}::jsonb,
          'data', jsonb_build_object('message_id', c.id, 'emoji', ${emoji}::text, 'user_id', ${userId}::integer,
            'count', ${countOf("c", emoji)})),
        ${at}::timestamptz
      from counted c`)},
    shown as (select * from counted union all select * from target where not exists (select 1 from counted))
    select (select count(*) from target)::integer as found,
      exists (select 1 from allowed) as may_post,
      exists (select 1 from fits) as fits,
      exists (select 1 from added) as added,
      ${readerViewColumns(deps, userId, place)},
      ${EVENTS_WRITTEN}`,
    ),
  );
  if (!row || row.found === 0) throw notFound(MESSAGE_NOT_FOUND);
  if (!row.may_post) throw forbidden("Join the channel to react in it.");
  if (!row.fits) throw invalidField("emoji", `A message can have at most ${MAX_REACTION_EMOJI} different reactions.`);
  // The statement's own insert is not in its snapshot: the caller has the emoji now.
  return readerRecord(deps, row, { mine: [...new Set([...(row.mine ?? []), emoji])] });
}

type UnreactRow = { found: number; removed: boolean; events_written: number };

/** Removes the caller's reaction; removing one they do not have is done too. */
export async function removeReaction(
  deps: Deps,
  userId: number,
  place: MessageTarget,
  messageId: string,
  emoji: string,
): Promise<void> {
  const now = deps.clock.now();
  const at = now.toISOString();
  const { stream, scope } = eventHead(place);
  const row = await commitWithEvents(deps, () =>
    runStatement<UnreactRow>(
      deps.db,
      sql`with ${targetCte(userId, place, messageId, now, sql`for no key update`)},
    removed as (delete from ${messageReactions}
      where message_id in (select id from target) and emoji = ${emoji}::text and user_id = ${userId}::integer
      returning message_id),
    counted as (update ${messages} m set reactions = coalesce((select jsonb_agg(case when x.r->>'emoji' = ${emoji}::text
            then jsonb_set(x.r, '{count}', to_jsonb((x.r->>'count')::integer - 1)) else x.r end order by x.i)
          from jsonb_array_elements(m.reactions) with ordinality x(r, i)
          where not (x.r->>'emoji' = ${emoji}::text and (x.r->>'count')::integer <= 1)), '[]'::jsonb)
      where m.id in (select message_id from removed)
      returning m.*),
    ${eventCte(sql`select ${stream}, jsonb_build_object('type', 'reaction.removed', 'scope', ${scope}::jsonb,
          'data', jsonb_build_object('message_id', c.id, 'emoji', ${emoji}::text, 'user_id', ${userId}::integer,
            'count', ${countOf("c", emoji)})),
        ${at}::timestamptz
      from counted c`)}
    select (select count(*) from target)::integer as found, exists (select 1 from removed) as removed,
      ${EVENTS_WRITTEN}`,
    ),
  );
  if (!row || row.found === 0) throw notFound(MESSAGE_NOT_FOUND);
}

export type ReactionList = { emoji: string; count: number; user_ids: number[] }[];

/** Who reacted, per emoji in the record's order: the first 100 users in the order they reacted. */
export async function listReactions(
  deps: Deps,
  userId: number,
  place: MessageTarget,
  messageId: string,
): Promise<ReactionList> {
  const now = deps.clock.now();
  const rows = await runStatement<{ found: number; list: ReactionList | null }>(
    deps.db,
    sql`with ${targetCte(userId, place, messageId, now, sql``)}
    select (select count(*) from target)::integer as found,
      (select jsonb_agg(jsonb_build_object('emoji', x.r->>'emoji', 'count', (x.r->>'count')::integer,
          'user_ids', coalesce((select jsonb_agg(u.user_id order by u.id) from (select r.user_id, r.id from ${messageReactions} r
            where r.message_id = t.id and r.emoji = x.r->>'emoji' order by r.id limit ${REACTORS_LISTED}::integer) u), '[]'::jsonb))
        order by x.i)
        from target t, jsonb_array_elements(t.reactions) with ordinality x(r, i)) as list`,
  );
  if (!rows || rows.found === 0) throw notFound(MESSAGE_NOT_FOUND);
  return rows.list ?? [];
}
