// Records of outbound webhooks and their delivery log (contract, "Records").
import { z } from "zod";
import {
  DELIVERY_STATUSES,
  type OutboundDelivery,
  type OutboundDeliveryAttempt,
  type OutboundWebhook,
} from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { OUTBOUND_EVENTS, type OutboundEvent } from "../services/outbound-webhooks/events.ts";
import { timestamp } from "./common.ts";

export const outboundWebhookRecord = z
  .object({
    id: z.string(),
    workspace_id: z.string(),
    url: z.string(),
    events: z.array(z.enum(OUTBOUND_EVENTS)),
    is_active: z.boolean(),
    secret: z
      .string()
      .nullable()
      .describe(
        "the key of X-Service-Signature's HMAC-SHA256 (docs/outbound-webhooks.md); null while no configured key opens it (APP_KEY_PREVIOUS, docs/operations.md)",
      ),
    disabled_reason: z
      .string()
      .nullable()
      .describe("why the service switched the webhook off (a day of failed deliveries); null otherwise"),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "OutboundWebhook" });
export type OutboundWebhookRecord = z.infer<typeof outboundWebhookRecord>;

/** Only owners and admins ever see a webhook, so its record always carries the secret. */
export function toOutboundWebhookRecord(webhook: OutboundWebhook, secret: string | null): OutboundWebhookRecord {
  return {
    id: webhook.id,
    workspace_id: webhook.workspaceId,
    url: webhook.url,
    events: webhook.events as OutboundEvent[],
    is_active: webhook.isActive,
    secret,
    disabled_reason: webhook.disabledReason,
    created_at: isoTimestamp(webhook.createdAt),
    updated_at: isoTimestamp(webhook.updatedAt),
  };
}

export const deliveryAttemptRecord = z
  .object({
    attempt: z.number().int(),
    status_code: z.number().int().nullable().describe("the receiver's HTTP status; null when none came"),
    duration_ms: z.number().int(),
    error: z.string().nullable().describe("timeout, connection error, refused target, …; null when a status came"),
    response_body: z.string().nullable().describe("the first 1 KB of the receiver's answer"),
    created_at: timestamp,
  })
  .meta({ id: "DeliveryAttempt" });

export const deliveryRecord = z
  .object({
    id: z.string().describe("also the body's `id` and the X-Service-Delivery header: receivers dedupe by it"),
    webhook_id: z.string(),
    event: z.enum(OUTBOUND_EVENTS),
    status: z.enum(DELIVERY_STATUSES),
    attempt_count: z.number().int(),
    next_attempt_at: timestamp.nullable(),
    payload: z.record(z.string(), z.unknown()).describe("the JSON body sent"),
    attempts: z.array(deliveryAttemptRecord).describe("oldest first"),
    created_at: timestamp,
    completed_at: timestamp.nullable(),
  })
  .meta({ id: "Delivery" });
export type DeliveryRecord = z.infer<typeof deliveryRecord>;

export function toDeliveryRecord(delivery: OutboundDelivery, attempts: OutboundDeliveryAttempt[]): DeliveryRecord {
  return {
    id: delivery.id,
    webhook_id: delivery.webhookId,
    event: delivery.event as OutboundEvent,
    status: delivery.status,
    attempt_count: delivery.attempts,
    next_attempt_at:
      delivery.status === "pending" && delivery.nextAttemptAt ? isoTimestamp(delivery.nextAttemptAt) : null,
    payload: JSON.parse(delivery.body) as Record<string, unknown>,
    attempts: [...attempts]
      .sort((a, b) => a.attempt - b.attempt)
      .map((attempt) => ({
        attempt: attempt.attempt,
        status_code: attempt.statusCode,
        duration_ms: attempt.durationMs,
        error: attempt.error,
        response_body: attempt.responseBody,
        created_at: isoTimestamp(attempt.createdAt),
      })),
    created_at: isoTimestamp(delivery.createdAt),
    completed_at: delivery.completedAt ? isoTimestamp(delivery.completedAt) : null,
  };
}
