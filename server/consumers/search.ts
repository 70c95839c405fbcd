// The search consumer: keeps the search index (db/schema/search.ts, docs/search.md) in step
// with the messages through the event log, so the post writes nothing for search. A post
// indexes its content, an edit replaces it and drops its translations (the edit dropped them
// too), a delete takes the message out, and a translation arriving indexes it for the readers
// of its language. It coalesces (Consumer.coalesceMs): at most every quarter second, one statement
// with its cursor, so a message is found well within the contract's two seconds. Room expiry
// and channel deletion take their messages' rows with them (a foreign key's cascade). What
// existed before the consumer did is indexed by its backfill (services/search/backfill.ts).
import { sql } from "drizzle-orm";
import type { Database } from "../../db/client.ts";
import { arrayParam, runStatement } from "../../db/prepared.ts";
import { messageSearch } from "../../db/schema/index.ts";
import type { TranslationReady } from "../events/streams.ts";
import type { MessageRecord } from "../records/message.ts";
import { backfillSearchStep } from "../services/search/backfill.ts";
import { CONTENT, insertSearchRows, type SearchText } from "../services/search/index-rows.ts";
import { batchResultOf, type BatchResult, type Consumer, type CursorMove, type LoggedEvent } from "./kit.ts";

/** What a batch does to one message's rows, its events applied in order. */
type Change = {
  /** New content (replacing the row; "" removes it), or undefined: untouched. */
  content?: string;
  /** An edit: translations stored before it go. */
  dropTranslations: boolean;
  /** Translations arrived (text), or given up on (null: the row goes). */
  translations: Map<string, string | null>;
  deleted: boolean;
};

export function changesOf(events: LoggedEvent[]): Map<string, Change> {
  const changes = new Map<string, Change>();
  const of = (id: string) => {
    let change = changes.get(id);
    if (!change) changes.set(id, (change = { dropTranslations: false, translations: new Map(), deleted: false }));
    return change;
  };
  for (const { payload } of events) {
    if (payload.type === "message.created" || payload.type === "message.updated") {
      const { message } = payload.data as { message: MessageRecord };
      const change = of(message.id);
      change.content = message.content;
      if (payload.type === "message.updated") {
        change.dropTranslations = true;
        change.translations.clear();
      }
    } else if (payload.type === "message.deleted") {
      const change = of((payload.data as { id: string }).id);
      change.deleted = true;
    } else if (payload.type === "translation.ready") {
      // One event may announce several languages of the message (EventPayload.other_translations).
      for (const data of [payload.data as TranslationReady, ...(payload.other_translations ?? [])])
        of(data.message_id).translations.set(data.language, data.status === "done" ? data.content : null);
    }
  }
  return changes;
}

export function searchConsumer(deps: { db: Database }): Consumer {
  return {
    name: "search",
    types: new Set(["message.created", "message.updated", "message.deleted", "translation.ready"]),
    // Found within two seconds of the post (the contract) even under load, for at most four
    // statements a second rather than one per batch the relay positions.
    coalesceMs: 250,
    backfillStep: () => backfillSearchStep(deps.db),
    async handle(events: LoggedEvent[], move: CursorMove): Promise<BatchResult> {
      const changes = changesOf(events);
      const texts: SearchText[] = [];
      const gone: string[] = [];
      const contentGone: string[] = [];
      const translationsGone: string[] = [];
      const pairsGone: string[] = [];
      for (const [id, change] of changes) {
        if (change.deleted) {
          gone.push(id);
          continue;
        }
        if (change.content !== undefined) {
          if (change.content.length > 0) texts.push({ messageId: id, source: CONTENT, text: change.content });
          else contentGone.push(id);
        }
        if (change.dropTranslations) translationsGone.push(id);
        for (const [language, text] of change.translations) {
          if (text) texts.push({ messageId: id, source: language, text });
          else pairsGone.push(`${id} ${language}`);
        }
      }
      // Rows this batch writes are kept by its deletes (the two would touch one row in one statement).
      const written = texts.map((text) => `${text.messageId} ${text.source}`);
      const touched = [...gone, ...contentGone, ...translationsGone, ...pairsGone.map((pair) => pair.split(" ")[0]!)];
      // Prepared: the same text for every batch (each list is one parameter), planned once.
      const row = await runStatement<{ moved: number; jobs: number }>(
        deps.db,
        sql`
          with ${move.cte},
          removed as (delete from ${messageSearch} s
            where exists (select 1 from moved) and s.message_id = any(${arrayParam(touched)}::text[]) and (
              s.message_id = any(${arrayParam(gone)}::text[])
              or (s.source = ${CONTENT} and s.message_id = any(${arrayParam(contentGone)}::text[]))
              or (s.source <> ${CONTENT} and s.message_id = any(${arrayParam(translationsGone)}::text[])
                and not (s.message_id || ' ' || s.source = any(${arrayParam(written)}::text[])))
              or s.message_id || ' ' || s.source = any(${arrayParam(pairsGone)}::text[]))
            returning 1),
          written as (${insertSearchRows(texts, { onConflict: "replace", guard: sql`exists (select 1 from moved)` })})
          select (select count(*) from moved)::integer as moved, 0 as jobs`,
      );
      return batchResultOf(row);
    },
  };
}
