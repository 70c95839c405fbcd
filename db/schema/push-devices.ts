import { index, integer, pgTable, text, uniqueIndex, varchar } from "drizzle-orm/pg-core";
import { timestamptz } from "./columns.ts";
import { users } from "./users.ts";

/**
 * A phone or browser that gets push notifications for its user. The push token is the device's
 * identity: registering a known token (from any account) updates that row and moves it to the
 * caller. It is kept sealed (AES-256-GCM under APP_KEY, server/crypto.ts), so a dump of the
 * table hands out no working token, and found by a keyed hash (HMAC-SHA256 under APP_KEY).
 */
export const pushDevices = pgTable(
  "push_devices",
  {
    id: text("id").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    platform: text("platform").$type<"ios" | "android" | "web">().notNull(),
    provider: text("provider").$type<"expo" | "fcm" | "apns">().notNull(),
    tokenHash: text("token_hash").notNull(),
    tokenSealed: text("token_sealed").notNull(),
    deviceId: varchar("device_id", { length: 255 }),
    deviceName: varchar("device_name", { length: 255 }),
    appVersion: varchar("app_version", { length: 255 }),
    lastUsedAt: timestamptz("last_used_at").notNull(),
    createdAt: timestamptz("created_at").notNull(),
  },
  (table) => [
    uniqueIndex("push_devices_token_hash_idx").on(table.tokenHash),
    index("push_devices_user_id_idx").on(table.userId),
  ],
);

export type PushDevice = typeof pushDevices.$inferSelect;
