// Access tokens: random, shown once, stored as SHA-256. One table serves sign-in tokens,
// personal access tokens and web sessions (the cookie holds a session token).
import { randomBytes } from "node:crypto";
import { and, desc, eq, gt, inArray, isNull, ne, or, sql, type Placeholder } from "drizzle-orm";
import type { Database, Executor } from "../../../db/client.ts";
import { arrayParam, prepared } from "../../../db/prepared.ts";
import { accessTokens, users, type AccessToken, type TokenKind, type User } from "../../../db/schema/index.ts";
import { sha256Hex } from "../../crypto.ts";
import type { InternalEventEntry } from "../../events/catalog.ts";
import { streams, writeWithEvents, type EventWriteDeps } from "../../events/streams.ts";
import { newId } from "../../ids.ts";

const TOKEN_PREFIX = "chat_";
/** Writing last_used_at on every request would make each read a write; once a minute is enough. */
const LAST_USED_RESOLUTION_MS = 60_000;
/** last_used_at is written outside the request, for every token used in this window, in one statement. */
const LAST_USED_GATHER_MS = 1_000;

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
    markUsed(db, token.id, now);
    token.lastUsedAt = now;
  }
  return row;
}

type LastUsedBatch = { times: Map<string, Date>; timer: NodeJS.Timeout | undefined };
const lastUsedBatches = new WeakMap<Database, LastUsedBatch>();

/** Notes a token's use; written with the others of the next LAST_USED_GATHER_MS (a request waits for nothing). */
function markUsed(db: Database, tokenId: string, now: Date): void {
  let batch = lastUsedBatches.get(db);
  if (!batch) lastUsedBatches.set(db, (batch = { times: new Map(), timer: undefined }));
  batch.times.set(tokenId, now);
  batch.timer ??= setTimeout(() => void flushLastUsed(db).catch(() => {}), LAST_USED_GATHER_MS).unref();
}

/** Writes the noted uses now (before reading last_used_at back, and by the timer). */
async function flushLastUsed(db: Database): Promise<void> {
  const batch = lastUsedBatches.get(db);
  if (!batch || batch.times.size === 0) return;
  clearTimeout(batch.timer);
  batch.timer = undefined;
  const entries = [...batch.times];
  batch.times.clear();
  await db.execute(sql`
    update ${accessTokens} t set last_used_at = v.used_at
    from (select unnest(${arrayParam(entries.map(([id]) => id))}::text[]) as id,
      unnest(${arrayParam(entries.map(([, at]) => at.toISOString()))}::timestamptz[]) as used_at) v
    where t.id = v.id and (t.last_used_at is null or t.last_used_at < v.used_at)`);
}

export async function listTokens(db: Database, userId: number, now: Date): Promise<AccessToken[]> {
  // This process's uses not yet written show in the list.
  await flushLastUsed(db);
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

/**
 * What a change to a user's row tells every server process (in its transaction): the sign-ins
 * each serves from memory for the user carry the old row, and are forgotten.
 */
export function userChanged(userId: number): InternalEventEntry {
  return { stream: streams.sessions, type: "user.changed", data: { user_id: userId } };
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
