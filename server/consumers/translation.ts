// The translation consumer: for each new or edited message with prose, a pending translation
// for each language its readers read but its own (all of them when its language is unknown, as
// for a bot's post), and for the messages of a batch that got one, one job
// (`translation.messages`, at most MESSAGES_PER_JOB messages a job, its id
// `translate-p<position of its first message's event>`: positions are never reused, so an edit's
// job never meets the post's in the queue's memory). One statement per batch, with the cursor;
// nothing, not even a job, for a message whose readers all share its language. Registered only
// when the server translates (TRANSLATION_PROVIDER).
import { sql } from "drizzle-orm";
import type { Database } from "../../db/client.ts";
import { messageTranslations } from "../../db/schema/index.ts";
import type { Clock } from "../clock.ts";
import { placeReaderLanguagesOfRow } from "../policy/audiences.ts";
import { arrayParam, runStatement } from "../../db/prepared.ts";
import { MESSAGES_PER_JOB, translationJobs } from "../services/translation/jobs.ts";
import { hasProse } from "../services/translation/protect.ts";
import { createdMessages, messageJobsInsert, messageRows } from "./batch-places.ts";
import {
  batchResultOf,
  PROMPT_COALESCE_MS,
  type BatchResult,
  type Consumer,
  type CursorMove,
  type LoggedEvent,
} from "./kit.ts";

export function translationConsumer(deps: { db: Database; clock: Clock }): Consumer {
  return {
    name: "translation",
    types: new Set(["message.created", "message.updated"]),
    coalesceMs: PROMPT_COALESCE_MS,
    async handle(events: LoggedEvent[], move: CursorMove): Promise<BatchResult> {
      const messages = createdMessages(events, { edited: true }).filter(
        ({ record }) => !record.skip_translation && hasProse(record.content),
      );
      if (messages.length === 0) return "nothing";
      const now = deps.clock.now().toISOString();
      // Prepared: the same text for every batch (each list is one parameter), planned once.
      const row = await runStatement<{ moved: number; jobs: number }>(
        deps.db,
        sql`
          with ${move.cte},
          batch as materialized (select * from ${messageRows(messages)}),
          -- Each place's reading languages once, not once per message.
          readers as materialized (
            select m.kind, m.place_id, r.language
            from (select distinct kind, place_id, workspace_id from batch) m
              cross join lateral (${placeReaderLanguagesOfRow}) r),
          pending as (
            insert into ${messageTranslations} (message_id, language, status, created_at, updated_at)
            select m.id, readers.language, 'pending', ${now}::timestamptz, ${now}::timestamptz
            from batch m join readers on readers.kind = m.kind and readers.place_id = m.place_id
            where exists (select 1 from moved) and readers.language is distinct from m.language
            on conflict do nothing
            returning message_id),
          owed as (
            select j.id, j.position, (row_number() over (order by j.ord) - 1) / ${MESSAGES_PER_JOB} as chunk
            from unnest(${arrayParam(messages.map(({ record }) => record.id))}::text[],
              ${arrayParam(messages.map(({ position }) => position))}::bigint[]) with ordinality j(id, position, ord)
            where j.id in (select message_id from pending)),
          jobs as (${messageJobsInsert(translationJobs.messages.name, "translate", now)})
          select (select count(*) from moved)::integer as moved, (select count(*) from jobs)::integer as jobs`,
      );
      return batchResultOf(row);
    },
  };
}
