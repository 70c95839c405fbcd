import { index, integer, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { timestamps, timestamptz } from "./columns.ts";
import { users } from "./users.ts";

/**
 * A temporary room (docs/rooms.md): a place to talk with people outside any workspace, gone at
 * `expires_at`. Its id is the invitation: opaque and unguessable (80 random bits).
 */
export const rooms = pgTable(
  "rooms",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    ownerId: integer("owner_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    expiresAt: timestamptz("expires_at").notNull(),
    /** created_at + 7 days: no extension goes past it. */
    maxExpiresAt: timestamptz("max_expires_at").notNull(),
    extensionCount: integer("extension_count").notNull().default(0),
    ...timestamps,
  },
  (table) => [index("rooms_expires_at_idx").on(table.expiresAt), index("rooms_owner_id_idx").on(table.ownerId)],
);

export type Room = typeof rooms.$inferSelect;

/** Who is in a room: its owner (from the start) and whoever joined with its id. */
export const roomMembers = pgTable(
  "room_members",
  {
    roomId: text("room_id")
      .notNull()
      .references(() => rooms.id, { onDelete: "cascade" }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    joinedAt: timestamptz("joined_at").notNull().defaultNow(),
  },
  (table) => [
    primaryKey({ columns: [table.roomId, table.userId] }),
    index("room_members_user_id_idx").on(table.userId),
  ],
);
