import { boolean, index, integer, pgTable, primaryKey, text, uniqueIndex, varchar } from "drizzle-orm/pg-core";
import { timestamps, timestamptz } from "./columns.ts";
import { users, type ChannelPushLevel, type Language } from "./users.ts";

export const VISIBILITIES = ["public", "private"] as const;
export type Visibility = (typeof VISIBILITIES)[number];

export const ROLES = ["owner", "admin", "member"] as const;
export type Role = (typeof ROLES)[number];

export const workspaces = pgTable(
  "workspaces",
  {
    id: text("id").primaryKey(),
    name: varchar("name", { length: 120 }).notNull(),
    slug: varchar("slug", { length: 80 }).notNull(),
    visibility: text("visibility").$type<Visibility>().notNull().default("private"),
    // Argon2id; required to join without an invite when set.
    passwordHash: text("password_hash"),
    ownerId: integer("owner_id")
      .notNull()
      .references(() => users.id),
    ...timestamps,
  },
  (table) => [uniqueIndex("workspaces_slug_idx").on(table.slug)],
);

export const workspaceMembers = pgTable(
  "workspace_members",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    role: text("role").$type<Role>().notNull().default("member"),
    // Null: the user's own preferred_language applies in this workspace.
    preferredLanguage: text("preferred_language").$type<Language>(),
    joinedAt: timestamptz("joined_at").notNull().defaultNow(),
  },
  (table) => [
    uniqueIndex("workspace_members_workspace_id_user_id_idx").on(table.workspaceId, table.userId),
    index("workspace_members_user_id_idx").on(table.userId),
  ],
);

export const channels = pgTable(
  "channels",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    name: varchar("name", { length: 120 }).notNull(),
    slug: varchar("slug", { length: 80 }).notNull(),
    visibility: text("visibility").$type<Visibility>().notNull().default("public"),
    passwordHash: text("password_hash"),
    /** The channel every workspace starts with; it cannot be deleted or made private. */
    isGeneral: boolean("is_general").notNull().default(false),
    createdBy: integer("created_by").references(() => users.id, { onDelete: "set null" }),
    ...timestamps,
  },
  (table) => [uniqueIndex("channels_workspace_id_slug_idx").on(table.workspaceId, table.slug)],
);

export const channelMembers = pgTable(
  "channel_members",
  {
    channelId: text("channel_id")
      .notNull()
      .references(() => channels.id, { onDelete: "cascade" }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    joinedAt: timestamptz("joined_at").notNull().defaultNow(),
    /**
     * The member's read position (docs/unread.md): everything up to this message id is read.
     * Set to the channel's newest message when they join; null when the channel had none.
     */
    lastReadMessageId: text("last_read_message_id"),
    /** Push level here; `default` follows the user's own `channel_push`. */
    push: text("push").$type<"default" | ChannelPushLevel>().notNull().default("default"),
    /** A muted channel pushes nothing and adds nothing to the badge. */
    muted: boolean("muted").notNull().default(false),
  },
  (table) => [
    primaryKey({ name: "channel_members_pkey", columns: [table.channelId, table.userId] }),
    index("channel_members_user_id_idx").on(table.userId),
  ],
);

export const invites = pgTable(
  "invites",
  {
    id: text("id").primaryKey(),
    workspaceId: text("workspace_id")
      .notNull()
      .references(() => workspaces.id, { onDelete: "cascade" }),
    // Shown to owners and admins in the invite list (it is a shareable link), so kept as is.
    token: text("token").notNull(),
    // Null: never expires.
    expiresAt: timestamptz("expires_at"),
    createdBy: integer("created_by").references(() => users.id, { onDelete: "set null" }),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (table) => [
    uniqueIndex("invites_token_idx").on(table.token),
    index("invites_workspace_id_idx").on(table.workspaceId),
  ],
);

export type Workspace = typeof workspaces.$inferSelect;
export type WorkspaceMember = typeof workspaceMembers.$inferSelect;
export type Channel = typeof channels.$inferSelect;
export type Invite = typeof invites.$inferSelect;
