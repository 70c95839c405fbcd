import { boolean, integer, pgTable, text, varchar, uniqueIndex } from "drizzle-orm/pg-core";
import { timestamps, timestamptz } from "./columns.ts";

export const LANGUAGES = ["en", "zh-CN", "ja", "th", "id"] as const;
export type Language = (typeof LANGUAGES)[number];

/** A user's default push level for channel messages (`mentions` unless set), and a channel's own setting. */
export const CHANNEL_PUSH_LEVELS = ["all", "mentions", "none"] as const;
export type ChannelPushLevel = (typeof CHANNEL_PUSH_LEVELS)[number];

export const PLANS = ["free", "personal_pro"] as const;
export type Plan = (typeof PLANS)[number];

export const users = pgTable(
  "users",
  {
    // The API document makes user ids integers; every other id is an opaque string.
    id: integer("id").primaryKey().generatedAlwaysAsIdentity(),
    name: varchar("name", { length: 255 }).notNull(),
    // Stored lower-cased: e-mail addresses are unique regardless of case.
    email: varchar("email", { length: 255 }).notNull(),
    // Null for accounts created by OTP or social sign-in until a password is set.
    passwordHash: text("password_hash"),
    emailVerifiedAt: timestamptz("email_verified_at"),
    isActive: boolean("is_active").notNull().default(true),
    lastLoginAt: timestamptz("last_login_at"),
    preferredLanguage: text("preferred_language").$type<Language>().notNull().default("en"),
    avatarUrl: varchar("avatar_url", { length: 2048 }),
    plan: text("plan").$type<Plan>().notNull().default("free"),
    /** Push for channel messages by default (docs/push.md): every message, mentions only, or none. */
    channelPush: text("channel_push").$type<ChannelPushLevel>().notNull().default("mentions"),
    ...timestamps,
  },
  (table) => [uniqueIndex("users_email_idx").on(table.email)],
);

export type User = typeof users.$inferSelect;
