import { sql } from "drizzle-orm";
import { index, integer, jsonb, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { timestamptz } from "./columns.ts";
import { users } from "./users.ts";

/**
 * How a token came to be:
 * - sign_in: returned by register/login/OTP/social sign-in, abilities ["*"];
 * - personal: created through /api/v1/tokens with chosen abilities;
 * - session: the web variant's cookie session, abilities ["*"], with an expiry.
 */
export const TOKEN_KINDS = ["sign_in", "personal", "session"] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

export const accessTokens = pgTable(
  "access_tokens",
  {
    id: text("id").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    kind: text("kind").$type<TokenKind>().notNull(),
    name: text("name").notNull(),
    // SHA-256 of the plaintext; the plaintext is shown once and never stored.
    tokenHash: text("token_hash").notNull(),
    abilities: jsonb("abilities").$type<string[]>().notNull(),
    lastUsedAt: timestamptz("last_used_at"),
    expiresAt: timestamptz("expires_at"),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (table) => [
    uniqueIndex("access_tokens_token_hash_idx").on(table.tokenHash),
    index("access_tokens_user_id_idx").on(table.userId),
    // The hourly prune of expired tokens (web sessions): only tokens that expire.
    index("access_tokens_expires_at_idx")
      .on(table.expiresAt)
      .where(sql`${table.expiresAt} is not null`),
  ],
);

export type AccessToken = typeof accessTokens.$inferSelect;
