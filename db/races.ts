// Statements that lose a race to another transaction: PostgreSQL ends them with an error and
// they wrote nothing, so running them again is safe. A deadlock between two of them is normal
// under concurrency (PostgreSQL picks one to end so that the other can go on), and the answer is
// to run the loser again, as PostgreSQL's documentation advises.

/** deadlock_detected, serialization_failure: the statement or transaction may simply run again. */
export const LOST_TO_CONCURRENCY: ReadonlySet<string> = new Set(["40P01", "40001"]);

/** Whether `error`, or an error it was caused by, carries one of these SQLSTATE codes. */
export function hasSqlState(error: unknown, codes: ReadonlySet<string>): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && codes.has(code)) return true;
    current = current.cause;
  }
  return false;
}

/**
 * Runs `run` (one statement or one transaction) again, up to `attempts` times in all, while it
 * fails with one of `codes`; after a short random pause, so that the losers do not meet again in
 * the same order. Any other failure, or the last attempt's, is thrown.
 */
export async function retryingRaces<T>(
  run: () => Promise<T>,
  { attempts, codes = LOST_TO_CONCURRENCY }: { attempts: number; codes?: ReadonlySet<string> },
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt >= attempts || !hasSqlState(error, codes)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20 * attempt));
    }
  }
}
