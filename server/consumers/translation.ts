// The translation consumer: for each new message with prose, a pending translation for each
// language its readers read but its own (all of them when its language is unknown, as for a
// bot's post) and one job `translate-<message id>`. One statement per batch, with the cursor;
// nothing, not even a job, for a message whose readers all share its language. Registered only
// when the server translates (TRANSLATION_PROVIDER).
import { sql } from "drizzle-orm";
import { rowsOf, type Database } from "../../db/client.ts";
import { jobOutbox, messageTranslations } from "../../db/schema/index.ts";
import type { Clock } from "../clock.ts";
import { placeReaderLanguagesOfRow } from "../policy/audiences.ts";
import { translationJobs } from "../services/translation/jobs.ts";
import { hasProse } from "../services/translation/protect.ts";
import { createdMessages, messageRows } from "./batch-places.ts";
import { batchResultOf, type BatchResult, type Consumer, type CursorMove, type LoggedEvent } from "./kit.ts";

export function translationConsumer(deps: { db: Database; clock: Clock }): Consumer {
  return {
    name: "translation",
    types: new Set(["message.created"]),
    async handle(events: LoggedEvent[], move: CursorMove): Promise<BatchResult> {
      const messages = createdMessages(events).filter(
        ({ record }) => !record.skip_translation && hasProse(record.content),
      );
      if (messages.length === 0) return "nothing";
      const now = deps.clock.now().toISOString();
      // translationJobId({ messageId }) for each message.
      const jobPrefix = "translate-";
      const [row] = rowsOf<{ moved: number; jobs: number }>(
        await deps.db.execute(sql`
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
            select ${translationJobs.message.name}, jsonb_build_object('messageId', p.id), ${jobPrefix} || p.id,
              ${now}::timestamptz
            from (select distinct message_id as id from pending) p
            on conflict (job_id) do nothing
            returning 1)
          select (select count(*) from moved)::integer as moved, (select count(*) from jobs)::integer as jobs`),
      );
      return batchResultOf(row);
    },
  };
}
