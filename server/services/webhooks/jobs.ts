// The maintenance job of webhooks: inbound request log entries and outbound deliveries older
// than 30 days, and idempotency keys past their 24 hours, are deleted. Scheduled hourly by
// workers/index.ts.
import { lt } from "drizzle-orm";
import { z } from "zod";
import { outboundDeliveries, webhookIdempotencyKeys, webhookRequests } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { defineJob } from "../../jobs/definition.ts";
import { IDEMPOTENCY_RETENTION_MS } from "./post.ts";

export const WEBHOOK_LOG_RETENTION_MS = 30 * 24 * 3600_000;
export const PRUNE_WEBHOOK_LOG_EVERY_MS = 60 * 60 * 1000;

export const webhookJobs = {
  prune: defineJob({
    queue: "maintenance",
    name: "webhooks.prune",
    payload: z.object({}),
    attempts: 3,
    backoffMs: 60_000,
  }),
};

export async function pruneWebhookRecords(deps: Pick<Deps, "db" | "clock">): Promise<void> {
  const now = deps.clock.now().getTime();
  await deps.db.delete(webhookRequests).where(lt(webhookRequests.createdAt, new Date(now - WEBHOOK_LOG_RETENTION_MS)));
  // Settled or not: a delivery is retried for a day at most.
  await deps.db
    .delete(outboundDeliveries)
    .where(lt(outboundDeliveries.createdAt, new Date(now - WEBHOOK_LOG_RETENTION_MS)));
  await deps.db
    .delete(webhookIdempotencyKeys)
    .where(lt(webhookIdempotencyKeys.createdAt, new Date(now - IDEMPOTENCY_RETENTION_MS)));
}
