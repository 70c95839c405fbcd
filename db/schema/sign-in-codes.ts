import { integer, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { timestamptz } from "./columns.ts";

/**
 * One-time sign-in codes (OTP). One live code per e-mail: a new request replaces the old
 * one. The e-mail may have no account yet (verifying the code creates it).
 */
export const oneTimeCodes = pgTable(
  "one_time_codes",
  {
    id: text("id").primaryKey(),
    email: text("email").notNull(),
    // HMAC-SHA256 of the code keyed with APP_KEY; the code itself is never stored.
    codeHash: text("code_hash").notNull(),
    failedAttempts: integer("failed_attempts").notNull().default(0),
    expiresAt: timestamptz("expires_at").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (table) => [uniqueIndex("one_time_codes_email_idx").on(table.email)],
);

/** Password reset tokens: one per e-mail, replaced by a new request, single use. */
export const passwordResetTokens = pgTable("password_reset_tokens", {
  email: text("email").primaryKey(),
  id: text("id").notNull(),
  // SHA-256 of the token; the token itself is never stored.
  tokenHash: text("token_hash").notNull(),
  expiresAt: timestamptz("expires_at").notNull(),
  createdAt: timestamptz("created_at").notNull().defaultNow(),
});
