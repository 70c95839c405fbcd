// Small pieces the three push clients share: the request timeout, Retry-After, bounded
// concurrency, and turning a failed request into a reason that names no push token.
import type { PushOutcome, PushSend } from "../provider.ts";

/** Every request to a push service gives up after this long (then: "retry"). */
export const PUSH_REQUEST_TIMEOUT_MS = 10_000;

/** Options every client takes besides its own; `timeoutMs` exists for tests only. */
export type ClientOptions = { timeoutMs?: number };

/** Retry-After in milliseconds, from delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null | undefined, now: Date): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now.getTime());
}

/** The outcome "retry", with retryAfterMs only when there is one. */
export function retryOutcome(deviceId: string, reason: string, retryAfterMs?: number): PushOutcome {
  return retryAfterMs === undefined
    ? { deviceId, result: "retry", reason }
    : { deviceId, result: "retry", reason, retryAfterMs };
}

/** One "retry" per send, for a whole request (or a credential) that failed. */
export function retryAll(sends: PushSend[], reason: string, retryAfterMs?: number): PushOutcome[] {
  return sends.map((send) => retryOutcome(send.target.deviceId, reason, retryAfterMs));
}

/** Thrown when a request outlives its timeout (fetch's own TimeoutError is recognised too). */
export class PushTimeoutError extends Error {
  override name = "TimeoutError";
  constructor() {
    super("timed out");
  }
}

/**
 * Why a request failed, short and safe to log or store: "timeout" or "connection error (CODE)".
 * Built from error names and codes only; messages can quote URLs, and an APNs URL holds the token.
 */
export function describeRequestError(error: unknown): string {
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) return "timeout";
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code = (current as Error & { code?: unknown }).code;
    if (typeof code === "string" && code !== "") return `connection error (${code})`;
    current = current.cause;
  }
  return "connection error";
}

/** POST with the timeout applied to the whole exchange, body included (read it with `.text()`). */
export async function postWithTimeout(
  url: string,
  init: { headers: Record<string, string>; body: string },
  timeoutMs: number,
): Promise<{ status: number; headers: Headers; text: string }> {
  const response = await fetch(url, {
    method: "POST",
    headers: init.headers,
    body: init.body,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text };
}

/** JSON.parse that answers undefined instead of throwing. */
export function parseJson(text: string): unknown {
  try {
    return text === "" ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A provider's free text with the token taken out, shortened: for reasons that mention it. */
export function scrubToken(text: string, token: string): string {
  const scrubbed = token === "" ? text : text.split(token).join("[token]");
  return scrubbed.length > 200 ? `${scrubbed.slice(0, 200)}…` : scrubbed;
}

/** Runs `task` over `items` with at most `limit` at a time; results in the items' order. */
export async function mapLimit<T, R>(items: T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index]!);
    }
  });
  await Promise.all(lanes);
  return results;
}
