import { integer, pgTable, text, uniqueIndex, varchar } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { users } from "./users.ts";

/** A provider account linked to a user (the document's "Linked social account"). */
export const socialAccounts = pgTable(
  "social_accounts",
  {
    // The document makes this id an integer.
    id: integer("id").primaryKey().generatedAlwaysAsIdentity(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    provider: text("provider").notNull(),
    /** The provider's stable id for the account (OIDC `sub`, GitHub's numeric id). */
    providerUserId: text("provider_user_id").notNull(),
    providerEmail: varchar("provider_email", { length: 255 }),
    name: varchar("name", { length: 255 }),
    avatar: varchar("avatar", { length: 2048 }),
    ...timestamps,
  },
  (table) => [
    uniqueIndex("social_accounts_provider_provider_user_id_idx").on(table.provider, table.providerUserId),
    // One account per provider and user; also serves "the user's accounts" lookups.
    uniqueIndex("social_accounts_user_id_provider_idx").on(table.userId, table.provider),
  ],
);

export type SocialAccount = typeof socialAccounts.$inferSelect;
