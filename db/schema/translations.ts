import { index, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { timestamptz } from "./columns.ts";
import { messages } from "./messages.ts";
import type { Language } from "./users.ts";

export const TRANSLATION_STATES = ["pending", "done", "failed", "not_needed"] as const;
export type TranslationState = (typeof TRANSLATION_STATES)[number];

/**
 * A message in one reader language (docs/translation.md). A row exists from the moment a
 * translation is owed ("pending", written with its job in one transaction) until the message
 * goes; the translation worker turns it into "done" (content set), "failed" (the provider kept
 * refusing), or "not_needed" (a bot post the provider found already in that language).
 */
export const messageTranslations = pgTable(
  "message_translations",
  {
    messageId: text("message_id")
      .notNull()
      .references(() => messages.id, { onDelete: "cascade" }),
    language: text("language").$type<Language>().notNull(),
    status: text("status").$type<TranslationState>().notNull(),
    content: text("content"),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    updatedAt: timestamptz("updated_at").notNull().defaultNow(),
  },
  (table) => [primaryKey({ columns: [table.messageId, table.language] })],
);

export type MessageTranslation = typeof messageTranslations.$inferSelect;

/**
 * Texts the provider has translated, by a hash of source language, target language and text:
 * identical text into the same language is sent to the provider once. Kept 30 days from its
 * last use (pruned by the translation queue's recurring job).
 */
export const translationCache = pgTable(
  "translation_cache",
  {
    key: text("key").primaryKey(),
    content: text("content").notNull(),
    usedAt: timestamptz("used_at").notNull().defaultNow(),
  },
  (table) => [index("translation_cache_used_at_idx").on(table.usedAt)],
);
