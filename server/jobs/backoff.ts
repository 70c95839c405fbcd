// How long a job waits before it tries an outside service again (push, translation): the
// service's Retry-After when it gave one (within bounds), else an exponential backoff.

export type Backoff = {
  /** The delay before the second try; each later one doubles, up to `longestMs`. */
  firstMs: number;
  longestMs: number;
  /** A Retry-After beyond this is cut to it. */
  longestRetryAfterMs: number;
};

/** The delay before try number `nextAttempt` (2 for the first retry). */
export function retryDelayMs(backoff: Backoff, nextAttempt: number, retryAfterMs: number | undefined): number {
  if (retryAfterMs !== undefined) return Math.min(Math.max(retryAfterMs, backoff.firstMs), backoff.longestRetryAfterMs);
  return Math.min(backoff.firstMs * 2 ** (nextAttempt - 2), backoff.longestMs);
}
