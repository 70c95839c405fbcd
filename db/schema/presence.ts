import { integer, pgTable, text, varchar } from "drizzle-orm/pg-core";
import { timestamptz } from "./columns.ts";
import { users } from "./users.ts";

/** What a user chooses (docs/presence.md): `auto` follows their live connections. */
export const PRESENCE_SETTINGS = ["auto", "away", "dnd", "invisible"] as const;
export type PresenceSetting = (typeof PRESENCE_SETTINGS)[number];

/**
 * A user's presence setting, custom status and when they were last seen. No row: `auto`, no
 * status, never seen. Who is connected now is not here: that is live state (Redis, or memory).
 */
export const userPresence = pgTable("user_presence", {
  userId: integer("user_id")
    .primaryKey()
    .references(() => users.id, { onDelete: "cascade" }),
  setting: text("setting").$type<PresenceSetting>().notNull().default("auto"),
  /** Only with `dnd`; when it passes, the setting is `auto` again. */
  dndUntil: timestamptz("dnd_until"),
  statusText: varchar("status_text", { length: 400 }),
  statusEmoji: text("status_emoji"),
  /** When it passes, status_text and status_emoji are gone. */
  statusExpiresAt: timestamptz("status_expires_at"),
  /** Written in batches, at most once a minute per user per process; never while `invisible`. */
  lastSeenAt: timestamptz("last_seen_at"),
  /**
   * When the setting last changed from `invisible` to another (null: never invisible since this
   * column exists). A connection that closed before it closed while the user was invisible: it
   * neither moves last_seen_at nor keeps them online for the grace window.
   */
  visibleSince: timestamptz("visible_since"),
  /** Moves with every change of the setting or status, so a process keeps the newest it heard of. */
  version: integer("version").notNull().default(0),
});

export type UserPresence = typeof userPresence.$inferSelect;
