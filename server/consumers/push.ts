// The push consumer: a push job (`push-<message id>`) for each new message that someone there
// but its author can be woken for (a member with a device). One statement per batch, with the
// cursor; none at all while nobody has registered a device. The job applies the whole rule
// (members, active accounts, devices) when it runs (server/services/push/delivery.ts).
import { sql } from "drizzle-orm";
import { rowsOf, type Database } from "../../db/client.ts";
import { jobOutbox, pushDevices } from "../../db/schema/index.ts";
import type { Clock } from "../clock.ts";
import { placeMembersOfRow } from "../policy/audiences.ts";
import { pushJobs } from "../services/push/jobs.ts";
import { createdMessages, messageRows } from "./batch-places.ts";
import { batchResultOf, type BatchResult, type Consumer, type CursorMove, type LoggedEvent } from "./kit.ts";

export function pushConsumer(deps: { db: Database; clock: Clock }): Consumer {
  let anyDevice = true;
  return {
    name: "push",
    types: new Set(["message.created"]),
    refreshOn: new Set(["push.device_registered"]),
    async refresh() {
      const [row] = rowsOf<{ any: boolean }>(
        await deps.db.execute(sql`select exists (select 1 from ${pushDevices}) as any`),
      );
      anyDevice = row?.any ?? true;
    },
    async handle(events: LoggedEvent[], move: CursorMove): Promise<BatchResult> {
      // Server notices wake nobody.
      const messages = createdMessages(events).filter(({ record }) => record.type !== "system");
      if (!anyDevice || messages.length === 0) return "nothing";
      const now = deps.clock.now().toISOString();
      const [row] = rowsOf<{ moved: number; jobs: number }>(
        await deps.db.execute(sql`
          with ${move.cte},
          jobs as (
            insert into ${jobOutbox} (name, payload, job_id, created_at)
            select ${pushJobs.message.name}, jsonb_build_object('messageId', m.id), 'push-' || m.id, ${now}::timestamptz
            from ${messageRows(messages)}
            where exists (select 1 from moved) and exists (
              select 1 from (${placeMembersOfRow}) members
                join ${pushDevices} d on d.user_id = members.user_id
              where m.author_id is null or d.user_id <> m.author_id)
            on conflict (job_id) do nothing
            returning 1)
          select (select count(*) from moved)::integer as moved, (select count(*) from jobs)::integer as jobs`),
      );
      return batchResultOf(row);
    },
  };
}
