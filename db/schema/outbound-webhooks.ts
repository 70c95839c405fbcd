import { bigint, boolean, index, integer, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { timestamps, timestamptz } from "./columns.ts";
import { workspaces } from "./workspaces.ts";

/**
 * An outbound webhook: a URL that receives a workspace's events, signed with its secret
 * (docs/outbound-webhooks.md). The secret is shown to owners and admins in every response, so
 * it is kept, but sealed (AES-256-GCM under APP_KEY, server/crypto.ts).
 */
export const outboundWebhooks = pgTable(
  "outbound_webhooks",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    url: text("url").notNull(),
    /** The event types it receives (server/services/outbound-webhooks/events.ts). */
    events: text("events").array().notNull(),
    isActive: boolean("is_active").notNull().default(true),
    secretSealed: text("secret_sealed").notNull(),
    /** Since when every attempt has failed (null after a success); a day of it switches the webhook off. */
    failingSince: timestamptz("failing_since"),
    /** Why the service switched it off; null while active or when a manager switched it off. */
    disabledReason: text("disabled_reason"),
    ...timestamps,
  },
  (table) => [index("outbound_webhooks_workspace_id_idx").on(table.workspaceId, table.id)],
);

export type OutboundWebhook = typeof outboundWebhooks.$inferSelect;

export const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/**
 * One event for one webhook: the exact body sent (every attempt sends the same bytes, signed
 * afresh), and where it stands. Kept 30 days.
 */
export const outboundDeliveries = pgTable(
  "outbound_deliveries",
  {
    id: text("id").primaryKey(),
    webhookId: text("webhook_id")
      .notNull()
      .references(() => outboundWebhooks.id, { onDelete: "cascade" }),
    event: text("event").notNull(),
    /** The event's stream position; null for a test send. */
    eventPosition: bigint("event_position", { mode: "number" }),
    body: text("body").notNull(),
    status: text("status").$type<DeliveryStatus>().notNull().default("pending"),
    /** Attempts made so far. */
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: timestamptz("next_attempt_at"),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    completedAt: timestamptz("completed_at"),
  },
  (table) => [
    index("outbound_deliveries_webhook_id_id_idx").on(table.webhookId, table.id),
    index("outbound_deliveries_created_at_idx").on(table.createdAt),
  ],
);

export type OutboundDelivery = typeof outboundDeliveries.$inferSelect;

/** Every attempt of a delivery, once (the key makes a repeated job record nothing twice). */
export const outboundDeliveryAttempts = pgTable(
  "outbound_delivery_attempts",
  {
    deliveryId: text("delivery_id")
      .notNull()
      .references(() => outboundDeliveries.id, { onDelete: "cascade" }),
    attempt: integer("attempt").notNull(),
    /** The receiver's HTTP status; null when none came (refused target, timeout, connection error). */
    statusCode: integer("status_code"),
    durationMs: integer("duration_ms").notNull(),
    error: text("error"),
    /** The first 1 KB of the receiver's answer. */
    responseBody: text("response_body"),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (table) => [primaryKey({ columns: [table.deliveryId, table.attempt] })],
);

export type OutboundDeliveryAttempt = typeof outboundDeliveryAttempts.$inferSelect;
