// The outbound consumer: turns the workspace events of the log into outbound webhook deliveries.
// For each event, a delivery for each active webhook of its workspace that asked for its type
// (and existed when it happened), and for the batch's deliveries the jobs of their first attempts
// (`outbound.first`, up to FIRSTS_PER_JOB deliveries a job), in one statement with the cursor. It keeps
// the active webhooks in memory (reloaded when one changes, through the
// `outbound.webhooks_changed` event, before the batch that carries it is handled), so a batch
// of events that no webhook asked for costs no statement at all.
import { sql } from "drizzle-orm";
import { rowsOf, type Database } from "../../db/client.ts";
import { arrayParam, runStatement } from "../../db/prepared.ts";
import { jobOutbox, outboundDeliveries, outboundWebhooks } from "../../db/schema/index.ts";
import { isoTimestamp, type Clock } from "../clock.ts";
import { newId } from "../ids.ts";
import { deliveryBody, OUTBOUND_EVENTS, outboundWorkspaceOf } from "../services/outbound-webhooks/events.ts";
import { FIRSTS_PER_JOB, outboundJobs } from "../services/outbound-webhooks/jobs.ts";
import {
  batchResultOf,
  SENDS_COALESCE_MS,
  type BatchResult,
  type Consumer,
  type CursorMove,
  type LoggedEvent,
} from "./kit.ts";

type ActiveWebhook = { id: string; workspace_id: string; events: string[]; created_at: Date };

export function outboundConsumer(deps: { db: Database; clock: Clock }): Consumer {
  /** The active webhooks, by workspace. */
  let active = new Map<string, ActiveWebhook[]>();
  return {
    name: "outbound",
    types: new Set(OUTBOUND_EVENTS),
    coalesceMs: SENDS_COALESCE_MS,
    refreshOn: new Set(["outbound.webhooks_changed"]),
    async refresh() {
      const rows = rowsOf<ActiveWebhook & { created_at: Date | string }>(
        await deps.db.execute(
          sql`select id, workspace_id, events, created_at from ${outboundWebhooks} where ${outboundWebhooks.isActive}`,
        ),
      );
      active = new Map();
      for (const row of rows) {
        const webhook = { ...row, created_at: new Date(row.created_at) };
        active.set(row.workspace_id, [...(active.get(row.workspace_id) ?? []), webhook]);
      }
    },
    async handle(events: LoggedEvent[], move: CursorMove): Promise<BatchResult> {
      // Each event for each active webhook of its workspace that asked for its type and existed then.
      const matches = events.flatMap((event) => {
        const workspaceId = outboundWorkspaceOf(event.payload);
        if (workspaceId === null) return [];
        return (active.get(workspaceId) ?? [])
          .filter((webhook) => webhook.events.includes(event.payload.type) && event.createdAt >= webhook.created_at)
          .map((webhook) => ({ event, workspaceId, webhook }));
      });
      if (matches.length === 0) return "nothing";
      const now = deps.clock.now();
      // Ids share the millisecond; sorted and handed out in event order, the log (by id) keeps that order.
      const ids = matches.map(() => newId("delivery", now.getTime())).sort();
      const bodies = matches.map(({ event, workspaceId }, index) =>
        deliveryBody({
          id: ids[index]!,
          event: event.payload.type,
          createdAt: isoTimestamp(event.createdAt),
          workspaceId,
          data: event.payload.data,
        }),
      );
      const at = now.toISOString();
      // Prepared: the same text for every batch (each list is one parameter), planned once. A
      // webhook switched off or deleted since the last refresh gets no delivery (its change's
      // event refreshes the list before the events after it are handled).
      const row = await runStatement<{ moved: number; jobs: number }>(
        deps.db,
        sql`
          with ${move.cte},
          matched as (select * from unnest(${arrayParam(ids)}::text[],
              ${arrayParam(matches.map(({ webhook }) => webhook.id))}::text[],
              ${arrayParam(matches.map(({ event }) => event.payload.type))}::text[],
              ${arrayParam(matches.map(({ event }) => event.position))}::bigint[],
              ${arrayParam(bodies)}::text[])
            as v(id, webhook_id, event, position, body)),
          deliveries as (
            insert into ${outboundDeliveries} (id, webhook_id, event, event_position, body, status, attempts,
              next_attempt_at, created_at)
            select v.id, v.webhook_id, v.event, v.position, v.body, 'pending', 0, ${at}::timestamptz, ${at}::timestamptz
            from matched v
            where exists (select 1 from moved)
              and exists (select 1 from ${outboundWebhooks} w where w.id = v.webhook_id and w.is_active)
            returning id),
          chunked as (
            select v.id, v.position, (row_number() over (order by v.id) - 1) / ${FIRSTS_PER_JOB} as chunk
            from deliveries d join matched v on v.id = d.id),
          jobs as (
            insert into ${jobOutbox} (name, payload, job_id, created_at)
            select ${outboundJobs.first.name}, jsonb_build_object('deliveryIds', jsonb_agg(c.id order by c.id)),
              'deliver-p' || min(c.position)::text || '-' || c.chunk::text, ${at}::timestamptz
            from chunked c group by c.chunk
            on conflict (job_id) do nothing
            returning 1)
          select (select count(*) from moved)::integer as moved, (select count(*) from jobs)::integer as jobs`,
      );
      return batchResultOf(row);
    },
  };
}
