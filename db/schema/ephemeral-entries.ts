import { jsonb, pgTable, text } from "drizzle-orm/pg-core";
import { timestamptz } from "./columns.ts";

/**
 * Short-lived single-use values (OAuth state) when Redis is not configured; with Redis they
 * live there instead (server/services/single-use-store.ts).
 */
export const ephemeralEntries = pgTable("ephemeral_entries", {
  key: text("key").primaryKey(),
  value: jsonb("value").notNull(),
  expiresAt: timestamptz("expires_at").notNull(),
});
