// Small pieces every client of an outside HTTP service shares (push, translation): a POST with
// one timeout for the whole exchange, Retry-After, JSON that may not be JSON, bounded
// concurrency, and turning a failed request or a provider's free text into a reason that is
// safe to log or store (no token, key or user text in it).
import { request } from "undici";

/** How long a request to an outside service may take, unless its client says otherwise. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** Retry-After in milliseconds, from delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null | undefined, now: Date): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now.getTime());
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

/** A response's headers, read by name (case-insensitive). */
export type ResponseHeaders = { get(name: string): string | null };

/**
 * POST with the timeout applied to the whole exchange, body included. Sent with undici's
 * `request` (keep-alive connections per origin) rather than the global `fetch`, whose WHATWG
 * Request, Response and streams cost several times more CPU per call: a push provider is called
 * once per message. Redirects are not followed (no provider answers a POST with one).
 */
export async function postWithTimeout(
  url: string,
  init: { headers: Record<string, string>; body: string },
  timeoutMs: number,
): Promise<{ status: number; headers: ResponseHeaders; text: string }> {
  const response = await request(url, {
    method: "POST",
    headers: init.headers,
    body: init.body,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await response.body.text();
  const headers = response.headers;
  return {
    status: response.statusCode,
    headers: {
      get(name) {
        const value = headers[name.toLowerCase()];
        return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
      },
    },
    text,
  };
}

/** JSON.parse that answers undefined instead of throwing. */
export function parseJson(text: string): unknown {
  try {
    return text === "" ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * A provider's free text (an error message it sent) with every secret in it replaced by
 * "[redacted]" and shortened: a service may echo the key or the texts it was sent.
 */
export function redactSecrets(text: string, secrets: readonly string[], maxLength = 200): string {
  let redacted = text;
  // Longest first, so a secret that contains another is replaced whole.
  for (const secret of [...secrets].filter((s) => s !== "").sort((a, b) => b.length - a.length)) {
    redacted = redacted.split(secret).join("[redacted]");
  }
  return redacted.length > maxLength ? `${redacted.slice(0, maxLength)}…` : redacted;
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
