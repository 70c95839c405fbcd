// Records of inbound webhooks and their request log (contract, "Records").
import { z } from "zod";
import { WEBHOOK_OUTCOMES, type InboundWebhook, type WebhookRequest } from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { timestamp } from "./common.ts";

export const webhookRecord = z
  .object({
    id: z.string(),
    workspace_id: z.string(),
    name: z.string(),
    default_channel_id: z.string().nullable(),
    bot_name: z.string().nullable(),
    bot_avatar_url: z.string().nullable(),
    signature_required: z.boolean(),
    is_active: z.boolean(),
    url: z.string().describe("the posting URL: POST it with the secret (docs/webhooks.md)"),
    secret: z
      .string()
      .nullable()
      .describe(
        "the static secret (X-Service-Webhook-Secret, or the body field secret); null while no configured key opens it (APP_KEY_PREVIOUS, docs/operations.md)",
      ),
    signing_secret: z
      .string()
      .nullable()
      .describe("the key of X-Service-Signature's HMAC-SHA256; null while no configured key opens it"),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "InboundWebhook" });
export type WebhookRecord = z.infer<typeof webhookRecord>;

/** The posting URL of a webhook: outside /api/v1, authenticated by its secret. */
export const webhookPostingUrl = (appUrl: string, webhookId: string) => `${appUrl}/webhooks/${webhookId}/messages`;

/** Only owners and admins ever see a webhook, so its record always carries the secrets. */
export function toWebhookRecord(
  webhook: InboundWebhook,
  secrets: { secret: string | null; signingSecret: string | null },
  appUrl: string,
): WebhookRecord {
  return {
    id: webhook.id,
    workspace_id: webhook.workspaceId,
    name: webhook.name,
    default_channel_id: webhook.defaultChannelId,
    bot_name: webhook.botName,
    bot_avatar_url: webhook.botAvatarUrl,
    signature_required: webhook.signatureRequired,
    is_active: webhook.isActive,
    url: webhookPostingUrl(appUrl, webhook.id),
    secret: secrets.secret,
    signing_secret: secrets.signingSecret,
    created_at: isoTimestamp(webhook.createdAt),
    updated_at: isoTimestamp(webhook.updatedAt),
  };
}

export const webhookRequestRecord = z
  .object({
    id: z.string(),
    webhook_id: z.string(),
    status: z.number().int().describe("the HTTP status answered"),
    outcome: z.enum(WEBHOOK_OUTCOMES),
    reason: z.string().nullable().describe("why it was rejected (or replayed); null for a plain accepted post"),
    idempotency_key: z.string().nullable(),
    ip: z.string(),
    created_at: timestamp,
  })
  .meta({ id: "InboundWebhookRequest" });

export function toWebhookRequestRecord(entry: WebhookRequest): z.infer<typeof webhookRequestRecord> {
  return {
    id: entry.id,
    webhook_id: entry.webhookId,
    status: entry.status,
    outcome: entry.outcome,
    reason: entry.reason,
    idempotency_key: entry.idempotencyKey,
    ip: entry.ip,
    created_at: isoTimestamp(entry.createdAt),
  };
}
