// Messages after they are posted: edit and delete (the contract's "Messages after they are
// posted"), for every kind of place. Like the post (post-message.ts), each is one statement of
// data-modifying CTEs after the token check: it finds the message where the path says it is,
// checks that the caller may read it and may change it (the target policy, server/policy/
// places.ts), writes the change and its event, all or nothing; the final select says which
// check failed, so the answer (404, 403, 422) needs no second query. The message row is
// locked first, so an edit, a delete, a reaction and a reply to it take turns. What follows a
// change (a new translation, outbound deliveries, removing files) reads the event log or, for
// files, the attachments' delete trigger: nothing else is written here.
import { sql, type SQL } from "drizzle-orm";
import { runStatement } from "../../../db/prepared.ts";
import {
  attachments,
  conversations,
  messageReactions,
  messages,
  messageTranslations,
  type Language,
  type TranslationState,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { forbidden, invalidField, notFound } from "../../errors.ts";
import { commitWithEvents, eventCte, EVENTS_WRITTEN } from "../../events/streams.ts";
import {
  inPlace,
  MESSAGE_NOT_FOUND,
  moderatingRight,
  placeStream,
  readingRight,
  type MessageTarget,
} from "../../policy/places.ts";
import { messageRecordSql, type MessageRecord } from "../../records/message.ts";
import { translationEnabled, translationView, userReaderLanguageSql } from "../translation/readers.ts";
import { mentionedMembers, parseMentions } from "./post-message.ts";

/**
 * The CTE `target`: the message `messageId` where `place` says it is, not deleted, when the
 * caller may read the place, locked until the statement's transaction ends.
 */
export function targetCte(userId: number, place: MessageTarget, messageId: string, now: Date, lock: SQL): SQL {
  return sql`target as (select m.* from ${messages} m
    where m.id = ${messageId} and ${inPlace("m", place)} and m.deleted_at is null
      and exists (${readingRight(userId, place, now)})
    ${lock})`;
}

/** What the final select of a change returns about the message as the caller now reads it (`shown`). */
export type ReaderViewRow = {
  record: Omit<MessageRecord, "translation"> | null;
  source_language: Language | null;
  skip_translation: boolean | null;
  reader_language: Language | null;
  stored: { status: TranslationState; content: string | null } | null;
  mine: string[] | null;
};

/**
 * Columns of the final select: the record of the CTE `shown` (one messages row) and what makes
 * it the caller's view (their language, their stored translation, their own reactions).
 */
export function readerViewColumns(deps: Pick<Deps, "config">, userId: number, place: MessageTarget): SQL {
  const readerLanguage = userReaderLanguageSql(userId, place.kind === "channel" ? place.workspaceId : null);
  return sql`(select ${messageRecordSql("s", deps.config.appUrl)} from shown s) as record,
    (select s.language from shown s) as source_language,
    (select s.skip_translation from shown s) as skip_translation,
    ${readerLanguage} as reader_language,
    (select jsonb_build_object('status', t.status, 'content', t.content) from ${messageTranslations} t
      where t.message_id = (select id from shown) and t.language = ${readerLanguage}) as stored,
    (select array_agg(r.emoji) from ${messageReactions} r
      where r.message_id = (select id from shown) and r.user_id = ${userId}) as mine`;
}

/**
 * The caller's record from a ReaderViewRow. `retranslated`: the statement dropped the stored
 * translations (an edit); `mine` what the caller's reactions are now when the statement changed them.
 */
export function readerRecord(
  deps: Pick<Deps, "config">,
  row: ReaderViewRow,
  options: { retranslated?: boolean; mine?: string[] } = {},
): MessageRecord {
  const record = row.record!;
  const mine = options.mine ?? row.mine ?? [];
  const translation =
    row.reader_language === null
      ? null
      : translationView(
          translationEnabled(deps.config),
          { skipTranslation: row.skip_translation ?? false, language: row.source_language, content: record.content },
          row.reader_language,
          options.retranslated ? undefined : (row.stored ?? undefined),
        );
  return {
    ...record,
    translation,
    reactions: record.reactions.map(({ emoji, count }) => ({ emoji, count, me: mine.includes(emoji) })),
  };
}

/** The stream of a place's message events, and their scope as JSON for SQL. */
export function eventHead(place: MessageTarget) {
  const { stream, scope } = placeStream(place);
  return { stream, scope: JSON.stringify(scope ?? {}) };
}

type EditRow = ReaderViewRow & {
  found: number;
  is_author: boolean | null;
  allowed: boolean;
  changed: boolean;
  events_written: number;
};

/**
 * Edits a message's content: its author only (a user; a bot's message cannot be edited). The
 * same text is a no-op that answers the message as it is. Mentions are evaluated again; the
 * old translations go, and the translation consumer asks for new ones from `message.updated`.
 */
export async function editMessage(
  deps: Deps,
  userId: number,
  place: MessageTarget,
  messageId: string,
  content: string,
): Promise<MessageRecord> {
  const now = deps.clock.now();
  const at = now.toISOString();
  const mentions = parseMentions(content);
  const { stream, scope } = eventHead(place);
  const row = await commitWithEvents(deps, () =>
    runStatement<EditRow>(
      deps.db,
      sql`with ${targetCte(userId, place, messageId, now, sql`for no key update`)},
    allowed as (select t.id from target t
      where t.author_user_id = ${userId}::integer and t.author_webhook_id is null
        and (${content.trim() !== ""}::boolean or exists (select 1 from ${attachments} a where a.message_id = t.id))),
    changed as (update ${messages} m set content = ${content}::text, edited_at = ${at}::timestamptz,
        updated_at = ${at}::timestamptz, mentioned_user_ids = ${mentionedMembers(deps.db, place, mentions.userIds)},
        mentions_channel = ${mentions.channel}::boolean
      where m.id in (select id from allowed) and m.content <> ${content}::text
      returning m.*),
    dropped as (delete from ${messageTranslations} where message_id in (select id from changed)),
    ${eventCte(sql`select ${stream}, jsonb_build_object('type', 'message.updated', 'scope', ${scope}::jsonb,
          'data', jsonb_build_object('message', ${messageRecordSql("c", deps.config.appUrl)}),
          'source_language', c.language),
        ${at}::timestamptz
      from changed c`)},
    shown as (select * from changed union all select * from target where not exists (select 1 from changed))
    select (select count(*) from target)::integer as found,
      (select t.author_user_id = ${userId}::integer and t.author_webhook_id is null from target t) as is_author,
      exists (select 1 from allowed) as allowed,
      exists (select 1 from changed) as changed,
      ${readerViewColumns(deps, userId, place)},
      ${EVENTS_WRITTEN}`,
    ),
  );
  if (!row || row.found === 0) throw notFound(MESSAGE_NOT_FOUND);
  if (!row.is_author) throw forbidden("Only its author can edit a message.");
  if (!row.allowed) throw invalidField("content", "The content field is required.");
  return readerRecord(deps, row, { retranslated: row.changed });
}

type DeleteRow = { found: number; allowed: boolean; events_written: number };

/**
 * Deletes a message: its author; in a channel also the workspace's owners and admins, in a
 * room also its owner. A thread parent with replies stays as a tombstone; a reply's delete
 * lowers its parent's count and takes a tombstone parent with its last reply; a conversation's
 * last message falls back to the one before. Its files go by the attachments' delete trigger
 * (their rows cascade), its translations and reactions with it.
 */
export async function deleteMessage(
  deps: Deps,
  userId: number,
  place: MessageTarget,
  messageId: string,
): Promise<void> {
  const now = deps.clock.now();
  const at = now.toISOString();
  const { stream, scope } = eventHead(place);
  const deletedData = (d: string) =>
    sql.raw(`jsonb_build_object('id', ${d}.id, 'parent_message_id', ${d}.parent_message_id,
      'workspace_id', ${d}.workspace_id, 'channel_id', ${d}.channel_id,
      'conversation_id', ${d}.conversation_id, 'room_id', ${d}.room_id)`);
  const row = await commitWithEvents(deps, () =>
    runStatement<DeleteRow>(
      deps.db,
      sql`with ${targetCte(userId, place, messageId, now, sql`for update`)},
    allowed as (select t.* from target t
      where (t.author_user_id = ${userId}::integer and t.author_webhook_id is null)
        or exists (${moderatingRight(userId, place)})),
    tombstoned as (update ${messages} m set deleted_at = ${at}::timestamptz, updated_at = ${at}::timestamptz,
        content = '', reactions = '[]'::jsonb, mentioned_user_ids = '{}'::integer[], mentions_channel = false
      where m.id in (select id from allowed where reply_count > 0)
      returning m.id),
    gone as (delete from ${messages} m where m.id in (select id from allowed where reply_count = 0)
      returning m.id, m.parent_message_id, m.conversation_id),
    files_gone as (delete from ${attachments} where message_id in (select id from tombstoned)),
    reactions_gone as (delete from ${messageReactions} where message_id in (select id from tombstoned)),
    translations_gone as (delete from ${messageTranslations} where message_id in (select id from tombstoned)),
    parent_gone as (delete from ${messages} p
      where p.id in (select parent_message_id from gone) and p.deleted_at is not null and p.reply_count <= 1
      returning p.*),
    parent_counted as (update ${messages} p set reply_count = p.reply_count - 1
      where p.id in (select parent_message_id from gone) and p.id not in (select id from parent_gone)),
    last_moved as (update ${conversations} c set last_message_id = (select id from ${messages} o
        where o.conversation_id = c.id and o.id <> ${messageId} order by o.id desc limit 1)
      where c.id in (select conversation_id from gone) and c.last_message_id = ${messageId}),
    ${eventCte(sql`select ${stream}, jsonb_build_object('type', 'message.deleted', 'scope', ${scope}::jsonb, 'data', d.data,
          -- For the file purge (server/consumers/file-purge.ts): the delete queued files.
          'deletes_files', d.files),
        ${at}::timestamptz
      from (select ${deletedData("a")} as data, 1 as ord,
          exists (select 1 from ${attachments} f where f.message_id = a.id) as files from allowed a
        union all select ${deletedData("p")}, 2, false from parent_gone p) d
      order by d.ord`)}
    select (select count(*) from target)::integer as found, exists (select 1 from allowed) as allowed,
      ${EVENTS_WRITTEN}`,
    ),
  );
  if (!row || row.found === 0) throw notFound(MESSAGE_NOT_FOUND);
  if (!row.allowed) throw forbidden("You may not delete this message.");
}
