// Inbound webhook management (docs/webhooks.md): owners and admins list, create, update and
// delete a workspace's webhooks and read their request log; plain members get 403, others 404.
// Secrets are 32 random bytes, kept sealed under APP_KEY and shown in every response.
import { randomBytes } from "node:crypto";
import { and, desc, eq, lt } from "drizzle-orm";
import type { Executor } from "../../../db/client.ts";
import { channels, inboundWebhooks, webhookRequests, type InboundWebhook } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField, notFound } from "../../errors.ts";
import { newId } from "../../ids.ts";
import { LOG_PAGE_DEFAULT, pageOf, type LogPage } from "../../records/common.ts";
import { toWebhookRecord, toWebhookRequestRecord, type WebhookRecord } from "../../records/webhook.ts";
import { requireManager } from "../../policy/workspaces.ts";
import { openStored, SEALED } from "../keys/sealed-values.ts";

export const WEBHOOK_NOT_FOUND = "Webhook not found.";

/** A new secret: 256 random bits, prefixed so that it is recognisable in a config file. */
const newSecret = (prefix: "whs" | "whsign") => `${prefix}_${randomBytes(32).toString("base64url")}`;

export type WebhookInput = {
  name?: string | undefined;
  default_channel_id?: string | null | undefined;
  bot_name?: string | null | undefined;
  bot_avatar_url?: string | null | undefined;
  signature_required?: boolean | undefined;
  is_active?: boolean | undefined;
  regenerate_secret?: boolean | undefined;
  regenerate_signing_secret?: boolean | undefined;
};

/** The webhook's secrets; null while no configured key opens one (it is kept, and said at start). */
export function webhookSecrets(deps: Pick<Deps, "db" | "keys" | "logger">, webhook: InboundWebhook) {
  return {
    secret: openStored(deps, SEALED.webhookSecret, webhook.id, webhook.secretSealed),
    signingSecret: openStored(deps, SEALED.webhookSigningSecret, webhook.id, webhook.signingSecretSealed),
  };
}

const recordOf = (deps: Deps, webhook: InboundWebhook): WebhookRecord =>
  toWebhookRecord(webhook, webhookSecrets(deps, webhook), deps.config.appUrl);

/** A default channel must be a channel of the webhook's workspace (any of them: admins chose it). */
async function checkDefaultChannel(db: Executor, workspaceId: string, channelId: string | null | undefined) {
  if (!channelId) return;
  const [channel] = await db
    .select({ id: channels.id })
    .from(channels)
    .where(and(eq(channels.id, channelId), eq(channels.workspaceId, workspaceId)))
    .limit(1);
  if (!channel) throw invalidField("default_channel_id", "The selected default channel id is invalid.");
}

async function managedWebhook(deps: Deps, userId: number, workspaceId: string, webhookId: string) {
  await requireManager(deps.db, workspaceId, userId);
  const [webhook] = await deps.db
    .select()
    .from(inboundWebhooks)
    .where(and(eq(inboundWebhooks.id, webhookId), eq(inboundWebhooks.workspaceId, workspaceId)))
    .limit(1);
  if (!webhook) throw notFound(WEBHOOK_NOT_FOUND);
  return webhook;
}

export async function listWebhooks(deps: Deps, userId: number, workspaceId: string): Promise<WebhookRecord[]> {
  await requireManager(deps.db, workspaceId, userId);
  const rows = await deps.db
    .select()
    .from(inboundWebhooks)
    .where(eq(inboundWebhooks.workspaceId, workspaceId))
    .orderBy(desc(inboundWebhooks.id));
  return rows.map((webhook) => recordOf(deps, webhook));
}

export async function createWebhook(
  deps: Deps,
  userId: number,
  workspaceId: string,
  input: WebhookInput & { name: string },
): Promise<WebhookRecord> {
  await requireManager(deps.db, workspaceId, userId);
  await checkDefaultChannel(deps.db, workspaceId, input.default_channel_id);
  const now = deps.clock.now();
  const [webhook] = await deps.db
    .insert(inboundWebhooks)
    .values({
      id: newId("webhook", now.getTime()),
      workspaceId,
      name: input.name,
      defaultChannelId: input.default_channel_id ?? null,
      botName: input.bot_name ?? null,
      botAvatarUrl: input.bot_avatar_url ?? null,
      signatureRequired: input.signature_required ?? false,
      isActive: input.is_active ?? true,
      secretSealed: deps.keys.seal("webhook-secret", newSecret("whs")),
      signingSecretSealed: deps.keys.seal("webhook-secret", newSecret("whsign")),
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return recordOf(deps, webhook!);
}

export async function updateWebhook(
  deps: Deps,
  userId: number,
  workspaceId: string,
  webhookId: string,
  input: WebhookInput,
): Promise<WebhookRecord> {
  await managedWebhook(deps, userId, workspaceId, webhookId);
  await checkDefaultChannel(deps.db, workspaceId, input.default_channel_id);
  const [webhook] = await deps.db
    .update(inboundWebhooks)
    .set({
      ...(input.name !== undefined && { name: input.name }),
      ...(input.default_channel_id !== undefined && { defaultChannelId: input.default_channel_id }),
      ...(input.bot_name !== undefined && { botName: input.bot_name }),
      ...(input.bot_avatar_url !== undefined && { botAvatarUrl: input.bot_avatar_url }),
      ...(input.signature_required !== undefined && { signatureRequired: input.signature_required }),
      ...(input.is_active !== undefined && { isActive: input.is_active }),
      ...(input.regenerate_secret && { secretSealed: deps.keys.seal("webhook-secret", newSecret("whs")) }),
      ...(input.regenerate_signing_secret && {
        signingSecretSealed: deps.keys.seal("webhook-secret", newSecret("whsign")),
      }),
      updatedAt: deps.clock.now(),
    })
    .where(and(eq(inboundWebhooks.id, webhookId), eq(inboundWebhooks.workspaceId, workspaceId)))
    .returning();
  // Deleted by someone else between the two statements.
  if (!webhook) throw notFound(WEBHOOK_NOT_FOUND);
  return recordOf(deps, webhook);
}

export async function deleteWebhook(deps: Deps, userId: number, workspaceId: string, webhookId: string) {
  await managedWebhook(deps, userId, workspaceId, webhookId);
  await deps.db
    .delete(inboundWebhooks)
    .where(and(eq(inboundWebhooks.id, webhookId), eq(inboundWebhooks.workspaceId, workspaceId)));
}

/** The request log, newest first, cursor paginated by entry id. */
export async function listWebhookRequests(
  deps: Deps,
  userId: number,
  workspaceId: string,
  webhookId: string,
  page: LogPage,
) {
  await managedWebhook(deps, userId, workspaceId, webhookId);
  const limit = page.limit ?? LOG_PAGE_DEFAULT;
  const rows = await deps.db
    .select()
    .from(webhookRequests)
    .where(and(eq(webhookRequests.webhookId, webhookId), page.before ? lt(webhookRequests.id, page.before) : undefined))
    .orderBy(desc(webhookRequests.id))
    .limit(limit + 1);
  const { shown, nextCursor } = pageOf(rows, limit);
  return { data: shown.map(toWebhookRequestRecord), meta: { next_cursor: nextCursor } };
}
