// How long a job waits before it tries again (push, translation, outbound webhooks, the
// in-process queue's retries): the service's Retry-After when it gave one (within bounds), else
// an exponential backoff.

export type Backoff = {
  /** The delay before the second try; each later one is `factor` times the one before, up to `longestMs`. */
  firstMs: number;
  /** 2 unless given. */
  factor?: number;
  longestMs: number;
  /** A Retry-After beyond this is cut to it. */
  longestRetryAfterMs: number;
};

/** The delay before try number `nextAttempt` (2 for the first retry). */
export function retryDelayMs(backoff: Backoff, nextAttempt: number, retryAfterMs?: number): number {
  if (retryAfterMs !== undefined) return Math.min(Math.max(retryAfterMs, backoff.firstMs), backoff.longestRetryAfterMs);
  return Math.min(backoff.firstMs * (backoff.factor ?? 2) ** (nextAttempt - 2), backoff.longestMs);
}
