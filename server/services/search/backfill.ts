// The search backfill: indexes the messages that existed before the search consumer started (a
// consumer starts at the newest position of the event log), newest first, so recent history is
// searchable first. It keeps its progress in consumer_backfills (the id it reached), so a
// restart or another process taking the lead continues where it stopped; once finished it costs
// one read when the consumers start. Texts are inserted without replacing a row the consumer
// wrote meanwhile (which is newer), and only while the message stands (index-rows.ts).
import { sql } from "drizzle-orm";
import { jsonOf, rowsOf, type Database } from "../../../db/client.ts";
import { consumerBackfills, messages, messageTranslations } from "../../../db/schema/index.ts";
import { CONTENT, insertSearchRows, type SearchText } from "./index-rows.ts";

const NAME = "search";
/** Messages read per step. */
export const BACKFILL_BATCH = 1_000;

/** Indexes the next batch of older messages; "done" when there is nothing left (or nothing to do). */
export async function backfillSearchStep(db: Database, batch = BACKFILL_BATCH): Promise<"more" | "done"> {
  const [state] = rowsOf<{ before: string | null; finished: boolean }>(
    await db.execute(sql`select before, finished_at is not null as finished from ${consumerBackfills}
      where name = ${NAME}`),
  );
  if (!state || state.finished) return "done";
  const found = rowsOf<{ id: string; content: string; translations: unknown }>(
    await db.execute(sql`
      select m.id, m.content, coalesce((select json_agg(json_build_object('language', t.language, 'content', t.content))
          from ${messageTranslations} t where t.message_id = m.id and t.status = 'done' and t.content is not null),
        '[]'::json) as translations
      from ${messages} m
      where m.deleted_at is null ${state.before === null ? sql`` : sql`and m.id < ${state.before}`}
      order by m.id desc limit ${batch}`),
  );
  const texts: SearchText[] = [];
  for (const message of found) {
    if (message.content) texts.push({ messageId: message.id, source: CONTENT, text: message.content });
    for (const translation of jsonOf<{ language: string; content: string }[]>(message.translations)) {
      texts.push({ messageId: message.id, source: translation.language, text: translation.content });
    }
  }
  const finished = found.length < batch;
  const reached = found.at(-1)?.id ?? state.before;
  // The progress moves only from where this step read it (another process may lead meanwhile).
  await db.execute(sql`
    with written as (${insertSearchRows(texts, { onConflict: "keep" })})
    update ${consumerBackfills} set before = ${reached},
      finished_at = ${finished ? sql`now()` : sql`null`}
    where name = ${NAME} and before is not distinct from ${state.before}`);
  return finished ? "done" : "more";
}
