// Access tokens: random, shown once, stored as SHA-256. One table serves sign-in tokens,
// personal access tokens and web sessions (the cookie holds a session token).
import { randomBytes } from "node:crypto";
import { and, desc, eq, gt, isNull, ne, or, sql } from "drizzle-orm";
import type { Database, Executor } from "../../../db/client.ts";
import { prepared } from "../../../db/prepared.ts";
import { accessTokens, users, type AccessToken, type TokenKind, type User } from "../../../db/schema/index.ts";
import { sha256Hex } from "../../crypto.ts";
import { newId } from "../../ids.ts";

const TOKEN_PREFIX = "chat_";
/** Writing last_used_at on every request would make each read a write; once a minute is enough. */
const LAST_USED_RESOLUTION_MS = 60_000;

export const hashToken = sha256Hex;

export async function issueToken(
  db: Executor,
  input: { userId: number; kind: TokenKind; name: string; abilities: string[]; expiresAt?: Date | null; now: Date },
): Promise<{ token: AccessToken; plaintext: string }> {
  const plaintext = TOKEN_PREFIX + randomBytes(32).toString("base64url");
  const [token] = await db
    .insert(accessTokens)
    .values({
      id: newId("accessToken", input.now.getTime()),
      userId: input.userId,
      kind: input.kind,
      name: input.name,
      tokenHash: hashToken(plaintext),
      abilities: input.abilities,
      expiresAt: input.expiresAt ?? null,
      createdAt: input.now,
    })
    .returning();
  return { token: token!, plaintext };
}

// Runs on every authenticated request, so it is a prepared statement.
function prepareLookup(db: Database, name: string) {
  return db
    .select({ token: accessTokens, user: users })
    .from(accessTokens)
    .innerJoin(users, eq(users.id, accessTokens.userId))
    .where(
      and(
        eq(accessTokens.tokenHash, sql.placeholder("tokenHash")),
        or(isNull(accessTokens.expiresAt), gt(accessTokens.expiresAt, sql.placeholder("now"))),
        eq(users.isActive, true),
      ),
    )
    .limit(1)
    .prepare(name);
}

/** The token and its active user, or null for an unknown, expired or inactive one. */
export async function resolveToken(
  db: Database,
  plaintext: string,
  now: Date,
): Promise<{ token: AccessToken; user: User } | null> {
  if (!plaintext.startsWith(TOKEN_PREFIX)) return null;
  const lookup = prepared(db, "resolve_access_token", prepareLookup);
  const [row] = await lookup.execute({ tokenHash: hashToken(plaintext), now: now.toISOString() });
  if (!row) return null;
  const { token } = row;
  if (!token.lastUsedAt || now.getTime() - token.lastUsedAt.getTime() > LAST_USED_RESOLUTION_MS) {
    await db.update(accessTokens).set({ lastUsedAt: now }).where(eq(accessTokens.id, token.id));
    token.lastUsedAt = now;
  }
  return row;
}

export async function listTokens(db: Executor, userId: number, now: Date): Promise<AccessToken[]> {
  return db
    .select()
    .from(accessTokens)
    .where(and(eq(accessTokens.userId, userId), or(isNull(accessTokens.expiresAt), gt(accessTokens.expiresAt, now))))
    .orderBy(desc(accessTokens.createdAt), desc(accessTokens.id));
}

/** Deletes one of the user's tokens; false when the user has no such token. */
export async function revokeToken(db: Executor, userId: number, tokenId: string): Promise<boolean> {
  const deleted = await db
    .delete(accessTokens)
    .where(and(eq(accessTokens.id, tokenId), eq(accessTokens.userId, userId)))
    .returning({ id: accessTokens.id });
  return deleted.length > 0;
}

/**
 * Signs a user out everywhere: sign-in tokens and web sessions go, except `keepTokenId`.
 * Personal access tokens stay unless `includePersonal` (they are credentials the user made
 * on purpose, as with GitHub's tokens after a password change).
 */
export async function revokeUserTokens(
  db: Executor,
  userId: number,
  options: { keepTokenId?: string; includePersonal?: boolean } = {},
): Promise<void> {
  const conditions = [eq(accessTokens.userId, userId)];
  if (options.keepTokenId) conditions.push(ne(accessTokens.id, options.keepTokenId));
  if (!options.includePersonal) conditions.push(ne(accessTokens.kind, "personal"));
  await db.delete(accessTokens).where(and(...conditions));
}
