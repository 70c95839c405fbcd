// The push consumer (docs/push.md): for the new messages of a batch that someone there but their
// author can be woken for (a member with a device), push jobs of up to MESSAGES_PER_JOB messages
// each (`push.messages`, its id `push-p<position of its first message's event>`: positions are
// never reused); for each read that lowered its reader's badge (`read.updated` with
// `lowers_badge`) while they have a device, a silent badge update (`push.badge`), at most one per
// user per BADGE_WINDOW_MS: its job id names the window and it is due at the window's end, so the
// reads of one window share one job (its row waits in the outbox until then). One statement per
// batch, with the cursor; none at all while nobody has registered a device.
//
// The message check is cheap on purpose (an `exists` that stops at the first member with a
// device): the preferences (levels, mentions, threads, muted places) are applied by the job
// (server/services/push/audience.ts), off this serialized path. Applying them here would scan
// every member of a channel for each plain message at the default level, in the statement every
// other consumer of the log waits behind.
import { sql } from "drizzle-orm";
import { rowsOf, type Database } from "../../db/client.ts";
import { arrayParam, runStatement } from "../../db/prepared.ts";
import { jobOutbox, pushDevices } from "../../db/schema/index.ts";
import type { Clock } from "../clock.ts";
import { placeMembersOfRow } from "../policy/audiences.ts";
import { BADGE_WINDOW_MS, MESSAGES_PER_JOB, pushJobs } from "../services/push/jobs.ts";
import { createdMessages, messageJobsInsert, messageRows } from "./batch-places.ts";
import {
  batchResultOf,
  SENDS_COALESCE_MS,
  type BatchResult,
  type Consumer,
  type CursorMove,
  type LoggedEvent,
} from "./kit.ts";

export function pushConsumer(deps: { db: Database; clock: Clock }): Consumer {
  let anyDevice = true;
  return {
    name: "push",
    types: new Set(["message.created", "read.updated"]),
    coalesceMs: SENDS_COALESCE_MS,
    refreshOn: new Set(["push.device_registered"]),
    async refresh() {
      const [row] = rowsOf<{ any: boolean }>(
        await deps.db.execute(sql`select exists (select 1 from ${pushDevices}) as any`),
      );
      anyDevice = row?.any ?? true;
    },
    async handle(events: LoggedEvent[], move: CursorMove): Promise<BatchResult> {
      if (!anyDevice) return "nothing";
      // Server notices wake nobody.
      const messages = createdMessages(events).filter(({ record }) => record.type !== "system");
      // The readers whose read lowered their badge (the stored payload names them).
      const lowered = [
        ...new Set(
          events.flatMap((event) =>
            event.payload.type === "read.updated" && event.payload.lowers_badge === true && event.payload.reader_id
              ? [event.payload.reader_id]
              : [],
          ),
        ),
      ];
      if (messages.length === 0 && lowered.length === 0) return "nothing";
      const now = deps.clock.now();
      const window = Math.floor(now.getTime() / BADGE_WINDOW_MS);
      const windowEnd = new Date((window + 1) * BADGE_WINDOW_MS).toISOString();
      // Prepared: the same text for every batch (each list is one parameter), planned once.
      const row = await runStatement<{ moved: number; jobs: number }>(
        deps.db,
        sql`
          with ${move.cte},
          owed as (
            select m.id, p.position, (row_number() over (order by p.position) - 1) / ${MESSAGES_PER_JOB} as chunk
            from ${messageRows(messages)}
              join unnest(${arrayParam(messages.map(({ record }) => record.id))}::text[],
                ${arrayParam(messages.map(({ position }) => position))}::bigint[]) p(id, position) on p.id = m.id
            where exists (select 1 from moved) and exists (
              select 1 from (${placeMembersOfRow}) members
                join ${pushDevices} d on d.user_id = members.user_id
              where m.author_id is null or d.user_id <> m.author_id)),
          message_jobs as (${messageJobsInsert(pushJobs.messages.name, "push", now.toISOString())}),
          readers as (select unnest(${arrayParam(lowered)}::integer[]) as user_id),
          badge_jobs as (
            insert into ${jobOutbox} (name, payload, job_id, run_at, created_at)
            select ${pushJobs.badge.name}, jsonb_build_object('userId', r.user_id, 'window', ${window}::bigint),
              'badge-' || r.user_id || '-' || ${window}::bigint, ${windowEnd}::timestamptz, ${now.toISOString()}::timestamptz
            from readers r
            where exists (select 1 from moved) and exists (select 1 from ${pushDevices} d where d.user_id = r.user_id)
            on conflict (job_id) do nothing
            returning 1)
          select (select count(*) from moved)::integer as moved,
            ((select count(*) from message_jobs) + (select count(*) from badge_jobs))::integer as jobs`,
      );
      return batchResultOf(row);
    },
  };
}
