// Small pieces the three push clients share: the request timeout, "retry" outcomes, and a
// provider's text with the push token taken out. The generic HTTP pieces (Retry-After,
// postWithTimeout, describeRequestError, mapLimit) are in server/provider-http.ts.
import type { PushOutcome, PushSend } from "../provider.ts";

/** Every request to a push service gives up after this long (then: "retry"). */
export const PUSH_REQUEST_TIMEOUT_MS = 10_000;

/** Options every client takes besides its own; `timeoutMs` exists for tests only. */
export type ClientOptions = { timeoutMs?: number };

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

/** Thrown when a request outlives its timeout (describeRequestError() reads it, like fetch's own TimeoutError). */
export class PushTimeoutError extends Error {
  override name = "TimeoutError";
  constructor() {
    super("timed out");
  }
}

/** A provider's free text with the token taken out, shortened: for reasons that mention it. */
export function scrubToken(text: string, token: string): string {
  const scrubbed = token === "" ? text : text.split(token).join("[token]");
  return scrubbed.length > 200 ? `${scrubbed.slice(0, 200)}…` : scrubbed;
}
