import { z } from "zod";
import { LANGUAGES, type User } from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { timestamp } from "./common.ts";

export const userRecord = z
  .object({
    id: z.number().int(),
    name: z.string(),
    email: z.string(),
    email_verified_at: timestamp.nullable(),
    is_active: z.boolean(),
    last_login_at: timestamp.nullable(),
    created_at: timestamp,
    updated_at: timestamp,
    preferred_language: z.enum(LANGUAGES),
    avatar_url: z.string().nullable(),
  })
  .meta({ id: "User" });
export type UserRecord = z.infer<typeof userRecord>;

export function toUserRecord(user: User): UserRecord {
  return {
    id: user.id,
    name: user.name,
    email: user.email,
    email_verified_at: isoTimestamp(user.emailVerifiedAt),
    is_active: user.isActive,
    last_login_at: isoTimestamp(user.lastLoginAt),
    created_at: isoTimestamp(user.createdAt),
    updated_at: isoTimestamp(user.updatedAt),
    preferred_language: user.preferredLanguage,
    avatar_url: user.avatarUrl,
  };
}

/** The document's token response (register, login, OTP verify, social callback). */
export const tokenResponse = z
  .object({
    access_token: z.string(),
    token_type: z.literal("Bearer"),
    user: z.object({ id: z.number().int(), name: z.string(), email: z.string() }),
  })
  .meta({ id: "TokenResponse" });
export type TokenResponse = z.infer<typeof tokenResponse>;

export function toTokenResponse(user: User, plaintext: string): TokenResponse {
  return { access_token: plaintext, token_type: "Bearer", user: { id: user.id, name: user.name, email: user.email } };
}
