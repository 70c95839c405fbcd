// Bounded waits on dependencies (Redis, the queue): a request or a shutdown never waits on one
// for longer than it chose.
export class TimeoutError extends Error {
  override name = "TimeoutError";
}

/**
 * Settles like `promise`, or rejects with a TimeoutError after `ms`. The promise itself goes on;
 * its late outcome is ignored.
 */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what}: no answer within ${ms} ms`)), ms);
  });
  promise.catch(() => {});
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
