// The translation consumer: for each new or edited message with prose, a pending translation
// for each language its readers read but its own (all of them when its language is unknown, as
// for a bot's post) and one job: `translate-<message id>` for a post, `translate-<message id>-e<position>`
// for an edit (the edit dropped the old translations; a job id of its own is not taken for
// the post's job, which the queue may still remember). One statement per batch, with the cursor;
// nothing, not even a job, for a message whose readers all share its language. Registered only
// when the server translates (TRANSLATION_PROVIDER).
import { sql } from "drizzle-orm";
import type { Database } from "../../db/client.ts";
import { jobOutbox, messageTranslations } from "../../db/schema/index.ts";
import type { Clock } from "../clock.ts";
import { placeReaderLanguagesOfRow } from "../policy/audiences.ts";
import { arrayParam, runStatement } from "../../db/prepared.ts";
import { translationJobId, translationJobs } from "../services/translation/jobs.ts";
import { hasProse } from "../services/translation/protect.ts";
import { createdMessages, messageRows } from "./batch-places.ts";
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
      // translationJobId({ messageId }) for a post; an edit's own id.
      const jobIds = messages.map(({ record, type, position }) =>
        type === "message.created" ? translationJobId({ messageId: record.id }) : `translate-${record.id}-e${position}`,
      );
      // Prepared: the same text for every batch (each list is one parameter), planned once.
      const row = await runStatement<{ moved: number; jobs: number }>(
        deps.db,
        sql`
          with ${move.cte},
          pending as (
            insert into ${messageTranslations} (message_id, language, status, created_at, updated_at)
            select m.id, readers.language, 'pending', ${now}::timestamptz, ${now}::timestamptz
            from ${messageRows(messages)}
              cross join lateral (${placeReaderLanguagesOfRow}) readers
            where exists (select 1 from moved) and readers.language is distinct from m.language
            on conflict do nothing
            returning message_id),
          jobs as (
            insert into ${jobOutbox} (name, payload, job_id, created_at)
            select ${translationJobs.message.name}, jsonb_build_object('messageId', j.id), j.job_id, ${now}::timestamptz
            from unnest(${arrayParam(messages.map(({ record }) => record.id))}::text[], ${arrayParam(jobIds)}::text[]) j(id, job_id)
            where j.id in (select message_id from pending)
            on conflict (job_id) do nothing
            returning 1)
          select (select count(*) from moved)::integer as moved, (select count(*) from jobs)::integer as jobs`,
      );
      return batchResultOf(row);
    },
  };
}
