// Rows of the search index (db/schema/search.ts) from message texts: the one way both the
// search consumer and the backfill write them.
import { sql, type SQL } from "drizzle-orm";
import { arrayParam } from "../../../db/prepared.ts";
import { messageSearch, messages, messageTranslations } from "../../../db/schema/index.ts";
import { lowered, searchKeys } from "./text.ts";

/** A text to index: a message's content (`source` 'content') or its translation into `source`. */
export type SearchText = { messageId: string; source: string; text: string };

export const CONTENT = "content";

/**
 * `insert into message_search … select …` for `texts`, each lowered and cut into keys here. The
 * place and author come from the message row, and only while it stands (not deleted, not a
 * tombstone), so a text read before a delete is not indexed after it. `onConflict` decides what
 * an existing row gets (the consumer replaces it; the backfill, which may have read older text,
 * keeps it). `guard` ANDs a condition (the consumer's cursor move).
 */
export function insertSearchRows(texts: SearchText[], options: { onConflict: "replace" | "keep"; guard?: SQL }): SQL {
  const rows = texts
    .map((text) => ({ ...text, lowered: lowered(text.text) }))
    .filter((text) => text.lowered.length > 0);
  return sql`insert into ${messageSearch} (message_id, source, place_id, author_user_id, lowered, keys)
    select m.id, v.source, coalesce(m.channel_id, m.conversation_id, m.room_id), m.author_user_id, v.lowered,
      string_to_array(v.keys, ' ')
    from unnest(${arrayParam(rows.map((row) => row.messageId))}::text[],
      ${arrayParam(rows.map((row) => row.source))}::text[],
      ${arrayParam(rows.map((row) => row.lowered))}::text[],
      ${arrayParam(rows.map((row) => searchKeys(row.lowered).join(" ")))}::text[]) as v(id, source, lowered, keys)
    join ${messages} m on m.id = v.id and m.deleted_at is null
    where ${options.guard ?? sql`true`}
      ${
        options.onConflict === "keep"
          ? // A translation read before an edit dropped it is not brought back.
            sql`and (v.source = ${CONTENT} or exists (select 1 from ${messageTranslations} t
              where t.message_id = v.id and t.language = v.source and t.status = 'done'))`
          : sql``
      }
    on conflict (message_id, source) do ${
      options.onConflict === "keep"
        ? sql`nothing`
        : sql`update set lowered = excluded.lowered, keys = excluded.keys, place_id = excluded.place_id,
            author_user_id = excluded.author_user_id`
    }
    returning 1`;
}
