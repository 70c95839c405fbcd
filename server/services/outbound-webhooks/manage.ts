// Outbound webhook management (docs/outbound-webhooks.md): owners and admins list, create,
// update and delete a workspace's outbound webhooks, read their delivery log and send a test;
// plain members get 403, others 404. The URL must be http(s) and, unless OUTBOUND_ALLOW_PRIVATE,
// resolve to public addresses only (422 `url`); the secret is 32 random bytes, kept sealed.
import { randomBytes } from "node:crypto";
import { and, desc, eq, inArray, lt } from "drizzle-orm";
import type { Executor } from "../../../db/client.ts";
import {
  outboundDeliveries,
  outboundDeliveryAttempts,
  outboundWebhooks,
  type OutboundDelivery,
  type OutboundWebhook,
} from "../../../db/schema/index.ts";
import { isoTimestamp } from "../../clock.ts";
import { openStored, SEALED } from "../keys/sealed-values.ts";
import type { InternalEventEntry } from "../../events/catalog.ts";
import { streams, writeWithEvents } from "../../events/streams.ts";
import type { Deps } from "../../deps.ts";
import { invalidField, notFound } from "../../errors.ts";
import { newId } from "../../ids.ts";
import { checkTarget, RefusedTargetError } from "../../ssrf-guard.ts";
import { LOG_PAGE_DEFAULT, pageOf, type LogPage } from "../../records/common.ts";
import {
  toDeliveryRecord,
  toOutboundWebhookRecord,
  type DeliveryRecord,
  type OutboundWebhookRecord,
} from "../../records/outbound-webhook.ts";
import { requireManager } from "../../policy/workspaces.ts";
import { recordAttempts, send } from "./deliver.ts";
import { deliveryBody, type OutboundEvent } from "./events.ts";

export const OUTBOUND_WEBHOOK_NOT_FOUND = "Outbound webhook not found.";

const newSecret = () => `owhs_${randomBytes(32).toString("base64url")}`;

export type OutboundWebhookInput = {
  url?: string | undefined;
  events?: OutboundEvent[] | undefined;
  is_active?: boolean | undefined;
  regenerate_secret?: boolean | undefined;
};

const recordOf = (deps: Deps, webhook: OutboundWebhook): OutboundWebhookRecord =>
  toOutboundWebhookRecord(webhook, openStored(deps, SEALED.outboundWebhookSecret, webhook.id, webhook.secretSealed));

/** 422 `url` for a target the SSRF guard refuses. */
async function checkUrl(deps: Deps, url: string | undefined): Promise<void> {
  if (url === undefined) return;
  try {
    await checkTarget(url, { allowPrivate: deps.config.outboundAllowPrivate });
  } catch (error) {
    if (error instanceof RefusedTargetError) throw invalidField("url", error.message);
    throw error;
  }
}

async function managedWebhook(deps: Deps, userId: number, workspaceId: string, webhookId: string) {
  await requireManager(deps.db, workspaceId, userId);
  const [webhook] = await deps.db
    .select()
    .from(outboundWebhooks)
    .where(and(eq(outboundWebhooks.id, webhookId), eq(outboundWebhooks.workspaceId, workspaceId)))
    .limit(1);
  if (!webhook) throw notFound(OUTBOUND_WEBHOOK_NOT_FOUND);
  return webhook;
}

export async function listOutboundWebhooks(deps: Deps, userId: number, workspaceId: string) {
  await requireManager(deps.db, workspaceId, userId);
  const rows = await deps.db
    .select()
    .from(outboundWebhooks)
    .where(eq(outboundWebhooks.workspaceId, workspaceId))
    .orderBy(desc(outboundWebhooks.id));
  return rows.map((webhook) => recordOf(deps, webhook));
}

/** Tells the outbound consumer to reload which workspaces have active webhooks. */
function webhooksChanged(workspaceId: string): InternalEventEntry {
  return { stream: streams.consumers, type: "outbound.webhooks_changed", data: { workspace_id: workspaceId } };
}

export async function createOutboundWebhook(
  deps: Deps,
  userId: number,
  workspaceId: string,
  input: OutboundWebhookInput & { url: string; events: OutboundEvent[] },
): Promise<OutboundWebhookRecord> {
  await requireManager(deps.db, workspaceId, userId);
  await checkUrl(deps, input.url);
  const now = deps.clock.now();
  const [webhook] = await writeWithEvents(deps, async (tx, emit) => {
    emit(webhooksChanged(workspaceId));
    return tx
      .insert(outboundWebhooks)
      .values({
        id: newId("outboundWebhook", now.getTime()),
        workspaceId,
        url: input.url,
        events: [...new Set(input.events)],
        isActive: input.is_active ?? true,
        secretSealed: deps.keys.seal("outbound-webhook-secret", newSecret()),
        createdAt: now,
        updatedAt: now,
      })
      .returning();
  });
  return recordOf(deps, webhook!);
}

export async function updateOutboundWebhook(
  deps: Deps,
  userId: number,
  workspaceId: string,
  webhookId: string,
  input: OutboundWebhookInput,
): Promise<OutboundWebhookRecord> {
  await managedWebhook(deps, userId, workspaceId, webhookId);
  await checkUrl(deps, input.url);
  const [webhook] = await writeWithEvents(deps, async (tx, emit) => {
    // What the consumer keeps of a webhook (server/consumers/outbound-webhooks.ts): whether it
    // is active, and which events it asked for.
    if (input.is_active !== undefined || input.events !== undefined) emit(webhooksChanged(workspaceId));
    return tx
      .update(outboundWebhooks)
      .set({
        ...(input.url !== undefined && { url: input.url }),
        ...(input.events !== undefined && { events: [...new Set(input.events)] }),
        // Switched on or off by a manager: the service's reason and the failing streak start over.
        ...(input.is_active !== undefined && { isActive: input.is_active, disabledReason: null, failingSince: null }),
        ...(input.regenerate_secret && { secretSealed: deps.keys.seal("outbound-webhook-secret", newSecret()) }),
        updatedAt: deps.clock.now(),
      })
      .where(and(eq(outboundWebhooks.id, webhookId), eq(outboundWebhooks.workspaceId, workspaceId)))
      .returning();
  });
  if (!webhook) throw notFound(OUTBOUND_WEBHOOK_NOT_FOUND);
  return recordOf(deps, webhook);
}

export async function deleteOutboundWebhook(deps: Deps, userId: number, workspaceId: string, webhookId: string) {
  await managedWebhook(deps, userId, workspaceId, webhookId);
  await writeWithEvents(deps, async (tx, emit) => {
    emit(webhooksChanged(workspaceId));
    await tx
      .delete(outboundWebhooks)
      .where(and(eq(outboundWebhooks.id, webhookId), eq(outboundWebhooks.workspaceId, workspaceId)));
  });
}

async function withAttempts(db: Executor, deliveries: OutboundDelivery[]): Promise<DeliveryRecord[]> {
  if (deliveries.length === 0) return [];
  const attempts = await db
    .select()
    .from(outboundDeliveryAttempts)
    .where(
      inArray(
        outboundDeliveryAttempts.deliveryId,
        deliveries.map((delivery) => delivery.id),
      ),
    );
  return deliveries.map((delivery) =>
    toDeliveryRecord(
      delivery,
      attempts.filter((attempt) => attempt.deliveryId === delivery.id),
    ),
  );
}

/** The delivery log, newest first, cursor paginated by delivery id. */
export async function listDeliveries(
  deps: Deps,
  userId: number,
  workspaceId: string,
  webhookId: string,
  page: LogPage,
) {
  await managedWebhook(deps, userId, workspaceId, webhookId);
  const limit = page.limit ?? LOG_PAGE_DEFAULT;
  // One snapshot for the deliveries and their attempts: an attempt recorded between the two
  // reads would otherwise show beside a delivery that does not count it yet.
  return deps.db.transaction(
    async (tx) => {
      const rows = await tx
        .select()
        .from(outboundDeliveries)
        .where(
          and(
            eq(outboundDeliveries.webhookId, webhookId),
            page.before ? lt(outboundDeliveries.id, page.before) : undefined,
          ),
        )
        .orderBy(desc(outboundDeliveries.id))
        .limit(limit + 1);
      const { shown, nextCursor } = pageOf(rows, limit);
      return { data: await withAttempts(tx, shown), meta: { next_cursor: nextCursor } };
    },
    { isolationLevel: "repeatable read", accessMode: "read only" },
  );
}

/**
 * The test send: a `webhook.test` delivery, attempted once, now, whether the webhook is active
 * or not (so a switched-off URL can be checked before it is switched back on). Its result is
 * logged like any attempt, but it is not retried and leaves the failing streak alone.
 */
export async function sendTestDelivery(
  deps: Deps,
  userId: number,
  workspaceId: string,
  webhookId: string,
): Promise<DeliveryRecord> {
  const webhook = await managedWebhook(deps, userId, workspaceId, webhookId);
  const now = deps.clock.now();
  const id = newId("delivery", now.getTime());
  const [delivery] = await deps.db
    .insert(outboundDeliveries)
    .values({
      id,
      webhookId,
      event: "webhook.test",
      eventPosition: null,
      body: deliveryBody({
        id,
        event: "webhook.test",
        createdAt: isoTimestamp(now),
        workspaceId,
        data: { webhook_id: webhookId, message: "A test delivery from the chat service." },
      }),
      status: "pending",
      createdAt: now,
      nextAttemptAt: now,
    })
    .returning();
  const result = await send(deps, webhook, delivery!);
  await recordAttempts(deps, [{ delivery: delivery!, attempt: 1, result, retry: false, health: false }]);
  const [settled] = await deps.db.select().from(outboundDeliveries).where(eq(outboundDeliveries.id, id));
  return (await withAttempts(deps.db, [settled!]))[0]!;
}
