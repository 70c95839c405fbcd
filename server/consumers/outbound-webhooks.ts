// The outbound consumer: turns the workspace events of the log into outbound webhook deliveries.
// For each event, a delivery and its first job for each active webhook of its workspace that
// asked for its type (and existed when it happened), in one transaction with the cursor. It
// keeps in memory which workspaces have an active webhook (reloaded when one changes, through
// the `outbound.webhooks_changed` event), so a batch of events of workspaces without one costs
// no statement at all.
import { and, eq, inArray, sql } from "drizzle-orm";
import { rowsOf, type Database } from "../../db/client.ts";
import { outboundDeliveries, outboundWebhooks } from "../../db/schema/index.ts";
import { isoTimestamp, type Clock } from "../clock.ts";
import { newId } from "../ids.ts";
import { enqueueJobs } from "../jobs/outbox.ts";
import { deliveryBody, OUTBOUND_EVENTS, outboundWorkspaceOf } from "../services/outbound-webhooks/events.ts";
import { deliverJobId, outboundJobs } from "../services/outbound-webhooks/jobs.ts";
import type { BatchResult, Consumer, CursorMove, LoggedEvent } from "./kit.ts";

export function outboundConsumer(deps: { db: Database; clock: Clock }): Consumer {
  let activeWorkspaces = new Set<string>();
  return {
    name: "outbound",
    types: new Set(OUTBOUND_EVENTS),
    refreshOn: new Set(["outbound.webhooks_changed"]),
    async refresh() {
      const rows = rowsOf<{ workspace_id: string }>(
        await deps.db.execute(
          sql`select distinct workspace_id from ${outboundWebhooks} where ${outboundWebhooks.isActive}`,
        ),
      );
      activeWorkspaces = new Set(rows.map((row) => row.workspace_id));
    },
    async handle(events: LoggedEvent[], move: CursorMove): Promise<BatchResult> {
      const listened = events.flatMap((event) => {
        const workspaceId = outboundWorkspaceOf(event.payload);
        return workspaceId !== null && activeWorkspaces.has(workspaceId) ? [{ event, workspaceId }] : [];
      });
      if (listened.length === 0) return "nothing";
      return deps.db.transaction(async (tx): Promise<BatchResult> => {
        if (!(await move.inTransaction(tx))) return "moved_elsewhere";
        const webhooks = await tx
          .select({
            id: outboundWebhooks.id,
            workspaceId: outboundWebhooks.workspaceId,
            events: outboundWebhooks.events,
            createdAt: outboundWebhooks.createdAt,
          })
          .from(outboundWebhooks)
          .where(
            and(
              inArray(outboundWebhooks.workspaceId, [...new Set(listened.map(({ workspaceId }) => workspaceId))]),
              eq(outboundWebhooks.isActive, true),
            ),
          );
        // Each event for each active webhook of its workspace that asked for its type and existed then.
        const matches = listened.flatMap(({ event, workspaceId }) =>
          webhooks
            .filter(
              (webhook) =>
                webhook.workspaceId === workspaceId &&
                webhook.events.includes(event.payload.type) &&
                event.createdAt >= webhook.createdAt,
            )
            .map((webhook) => ({ event, workspaceId, webhook })),
        );
        if (matches.length === 0) return { wrote: "rows" };
        const now = deps.clock.now();
        // Ids share the millisecond; sorted and handed out in event order, the log (by id) keeps that order.
        const ids = matches.map(() => newId("delivery", now.getTime())).sort();
        const deliveries = matches.map(
          ({ event, workspaceId, webhook }, index): typeof outboundDeliveries.$inferInsert => ({
            id: ids[index]!,
            webhookId: webhook.id,
            event: event.payload.type,
            eventPosition: event.position,
            body: deliveryBody({
              id: ids[index]!,
              event: event.payload.type,
              createdAt: isoTimestamp(event.createdAt),
              workspaceId,
              data: event.payload.data,
            }),
            status: "pending",
            attempts: 0,
            nextAttemptAt: now,
            createdAt: now,
          }),
        );
        await tx.insert(outboundDeliveries).values(deliveries);
        await enqueueJobs(
          tx,
          now,
          outboundJobs.deliver,
          deliveries.map(({ id }) => {
            const payload = { deliveryId: id, attempt: 1 };
            return { payload, jobId: deliverJobId(payload) };
          }),
        );
        return { wrote: "jobs" };
      });
    },
  };
}
