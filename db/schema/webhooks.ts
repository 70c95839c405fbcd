import { sql } from "drizzle-orm";
import { boolean, index, integer, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { timestamps, timestamptz } from "./columns.ts";
import { channels, workspaces } from "./workspaces.ts";

/**
 * An inbound webhook: a bot that posts into a workspace's channels (docs/webhooks.md). Both
 * secrets are shown to owners and admins in every response, so they are kept, but sealed
 * (AES-256-GCM under APP_KEY, server/crypto.ts): a dump of the table posts nothing.
 */
export const inboundWebhooks = pgTable(
  "inbound_webhooks",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** Where a post that names no channel goes; null when that channel was deleted. */
    defaultChannelId: text("default_channel_id").references(() => channels.id, { onDelete: "set null" }),
    botName: text("bot_name"),
    botAvatarUrl: text("bot_avatar_url"),
    signatureRequired: boolean("signature_required").notNull().default(false),
    isActive: boolean("is_active").notNull().default(true),
    secretSealed: text("secret_sealed").notNull(),
    signingSecretSealed: text("signing_secret_sealed").notNull(),
    ...timestamps,
  },
  (table) => [index("inbound_webhooks_workspace_id_idx").on(table.workspaceId, table.id)],
);

export type InboundWebhook = typeof inboundWebhooks.$inferSelect;

export const WEBHOOK_OUTCOMES = ["accepted", "rejected"] as const;
export type WebhookOutcome = (typeof WEBHOOK_OUTCOMES)[number];

/**
 * Every request to a webhook's posting URL, accepted or rejected (never its secret or its
 * signature). Kept 30 days, then pruned by a recurring job.
 */
export const webhookRequests = pgTable(
  "webhook_requests",
  {
    id: text("id").primaryKey(),
    webhookId: text("webhook_id")
      .notNull()
      .references(() => inboundWebhooks.id, { onDelete: "cascade" }),
    status: integer("status").notNull(),
    outcome: text("outcome").$type<WebhookOutcome>().notNull(),
    reason: text("reason"),
    idempotencyKey: text("idempotency_key"),
    ip: text("ip").notNull(),
    /** The message an accepted post created (not shown; ties the log to what it did). */
    messageId: text("message_id"),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (table) => [
    index("webhook_requests_webhook_id_id_idx").on(table.webhookId, table.id),
    index("webhook_requests_created_at_idx").on(table.createdAt),
  ],
);

export type WebhookRequest = typeof webhookRequests.$inferSelect;

/**
 * The first result of a post made with an Idempotency-Key, per webhook and key, kept 24 hours:
 * written in the transaction of the message it reports, so two identical requests racing on
 * two processes post once (the second waits on the key's row, then replays it).
 */
export const webhookIdempotencyKeys = pgTable(
  "webhook_idempotency_keys",
  {
    webhookId: text("webhook_id")
      .notNull()
      .references(() => inboundWebhooks.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    /** A hash of the request's fields (the secret left out): the same key with other fields is refused. */
    requestHash: text("request_hash").notNull(),
    status: integer("status").notNull(),
    body: text("body").notNull(),
    createdAt: timestamptz("created_at")
      .notNull()
      .default(sql`now()`),
  },
  (table) => [
    primaryKey({ columns: [table.webhookId, table.key] }),
    index("webhook_idempotency_keys_created_at_idx").on(table.createdAt),
  ],
);
