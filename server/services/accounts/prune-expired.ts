// Credentials that can no longer be used are deleted by the hourly `accounts.prune-expired`
// maintenance job (jobs.ts): web sessions and other access tokens past their expiry, one-time
// sign-in codes and password reset tokens past theirs, and expired single-use entries (OAuth
// state kept in the database when Redis is not configured). Used codes, reset tokens and
// revoked tokens are deleted when they are used or revoked; this removes what was never used.
import { inArray, lt, type SQL } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";
import { accessTokens, ephemeralEntries, oneTimeCodes, passwordResetTokens } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";

const BATCH_SIZE = 1000;

export type PrunedCounts = {
  accessTokens: number;
  oneTimeCodes: number;
  passwordResetTokens: number;
  ephemeralEntries: number;
};

/** Deletes, in batches, the rows of `table` that `expired` selects; returns how many went. */
async function deleteInBatches(deps: Deps, table: PgTable, key: PgColumn, expired: SQL): Promise<number> {
  let deleted = 0;
  for (;;) {
    const batch = deps.db.select({ key }).from(table).where(expired).limit(BATCH_SIZE);
    const removed = await deps.db.delete(table).where(inArray(key, batch)).returning({ key });
    deleted += removed.length;
    if (removed.length < BATCH_SIZE) return deleted;
  }
}

/** Deletes what expired before `now`; returns the counts by kind. */
export async function pruneExpiredCredentials(deps: Deps, now: Date = deps.clock.now()): Promise<PrunedCounts> {
  const counts: PrunedCounts = {
    accessTokens: await deleteInBatches(deps, accessTokens, accessTokens.id, lt(accessTokens.expiresAt, now)),
    oneTimeCodes: await deleteInBatches(deps, oneTimeCodes, oneTimeCodes.id, lt(oneTimeCodes.expiresAt, now)),
    passwordResetTokens: await deleteInBatches(
      deps,
      passwordResetTokens,
      passwordResetTokens.email,
      lt(passwordResetTokens.expiresAt, now),
    ),
    ephemeralEntries: await deleteInBatches(
      deps,
      ephemeralEntries,
      ephemeralEntries.key,
      lt(ephemeralEntries.expiresAt, now),
    ),
  };
  if (Object.values(counts).some((count) => count > 0)) deps.logger.info(counts, "pruned expired credentials");
  return counts;
}
