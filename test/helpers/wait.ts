/**
 * Polls `check` until it returns something other than undefined, or fails after `timeoutMs`
 * naming what it waited for. For effects that arrive asynchronously (events, mails, jobs).
 */
export async function until<T>(
  check: () => T | undefined | Promise<T | undefined>,
  what = "a condition",
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
