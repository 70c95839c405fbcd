// Access tokens: random, shown once, stored as SHA-256. One table serves sign-in tokens,
// personal access tokens and web sessions (the cookie holds a session token).
import { randomBytes } from "node:crypto";
import { and, desc, eq, gt, inArray, isNull, ne, or, sql, type Placeholder } from "drizzle-orm";
import type { Database, Executor } from "../../../db/client.ts";
import { prepared } from "../../../db/prepared.ts";
import { accessTokens, users, type AccessToken, type TokenKind, type User } from "../../../db/schema/index.ts";
import { sha256Hex } from "../../crypto.ts";
import type { InternalEventEntry } from "../../events/catalog.ts";
import { streams, writeWithEvents, type EventWriteDeps } from "../../events/streams.ts";
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

/** A token still signs its user in: not expired (or never expiring), and the user is active. */
const signsIn = (now: Date | Placeholder) =>
  and(or(isNull(accessTokens.expiresAt), gt(accessTokens.expiresAt, now)), eq(users.isActive, true));

// Runs on every authenticated request, so it is a prepared statement.
function prepareLookup(db: Database, name: string) {
  return db
    .select({ token: accessTokens, user: users })
    .from(accessTokens)
    .innerJoin(users, eq(users.id, accessTokens.userId))
    .where(and(eq(accessTokens.tokenHash, sql.placeholder("tokenHash")), signsIn(sql.placeholder("now"))))
    .limit(1)
    .prepare(name);
}

/** Of these tokens, the ones that still sign their user in (for open connections and streams). */
export async function liveTokenIds(db: Executor, tokenIds: string[], now: Date): Promise<Set<string>> {
  if (tokenIds.length === 0) return new Set();
  const rows = await db
    .select({ id: accessTokens.id })
    .from(accessTokens)
    .innerJoin(users, eq(users.id, accessTokens.userId))
    .where(and(inArray(accessTokens.id, tokenIds), signsIn(now)));
  return new Set(rows.map((row) => row.id));
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

/**
 * What a revocation tells every server process (in its transaction): connections and live
 * streams opened with one of the user's tokens are checked again, and closed if it is gone.
 */
function sessionRevoked(userId: number): InternalEventEntry {
  return { stream: streams.sessions, type: "session.revoked", data: { user_id: userId } };
}

/** Deletes one of the user's tokens (logout, DELETE /tokens/{id}); false when the user has no such token. */
export async function revokeToken(deps: EventWriteDeps, userId: number, tokenId: string): Promise<boolean> {
  return writeWithEvents(deps, async (tx, emit) => {
    const deleted = await tx
      .delete(accessTokens)
      .where(and(eq(accessTokens.id, tokenId), eq(accessTokens.userId, userId)))
      .returning({ id: accessTokens.id });
    if (deleted.length > 0) emit(sessionRevoked(userId));
    return deleted.length > 0;
  });
}

/**
 * Signs a user out everywhere, inside the caller's transaction: sign-in tokens and web
 * sessions go, except `keepTokenId`. Personal access tokens stay unless `includePersonal`
 * (they are credentials the user made on purpose, as with GitHub's tokens after a password
 * change). Returns the event to write with the change.
 */
export async function revokeUserTokens(
  tx: Executor,
  userId: number,
  options: { keepTokenId?: string; includePersonal?: boolean } = {},
): Promise<InternalEventEntry> {
  const conditions = [eq(accessTokens.userId, userId)];
  if (options.keepTokenId) conditions.push(ne(accessTokens.id, options.keepTokenId));
  if (!options.includePersonal) conditions.push(ne(accessTokens.kind, "personal"));
  await tx.delete(accessTokens).where(and(...conditions));
  return sessionRevoked(userId);
}
