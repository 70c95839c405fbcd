// X-Service-Signature (contract, "Inbound webhook posting"), after Stripe's scheme:
// `t=<unix seconds>,v1=<lowercase hex HMAC-SHA256 of "<t>.<raw body bytes>">`, the timestamp
// within 5 minutes of the server's clock either way, and any of several v1 values may match
// (a sender rotating its key signs with both). The HMAC runs over the exact bytes received.
import { createHmac } from "node:crypto";
import { safeEqual } from "../../crypto.ts";

/** How far the signed timestamp may be from now, either way. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;
/** More v1 values than this in one header is not a rotation: the header is refused. */
const MAX_SIGNATURES = 8;

export type SignatureCheck =
  | { ok: true }
  | {
      ok: false;
      reason: "signature_missing" | "signature_malformed" | "timestamp_out_of_window" | "signature_invalid";
    };

/** The signature a sender computes: lowercase hex HMAC-SHA256 of `<t>.<body>` keyed with the signing secret. */
export function signWebhookBody(signingSecret: string, timestamp: number, body: Buffer | string): string {
  return createHmac("sha256", signingSecret).update(`${timestamp}.`).update(body).digest("hex");
}

export function checkSignature(
  header: string | undefined,
  signingSecret: string,
  body: Buffer,
  nowMs: number,
): SignatureCheck {
  if (!header?.trim()) return { ok: false, reason: "signature_missing" };
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const at = part.indexOf("=");
    if (at === -1) return { ok: false, reason: "signature_malformed" };
    const key = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (key === "t") {
      if (timestamp !== undefined || !/^\d{1,12}$/.test(value)) return { ok: false, reason: "signature_malformed" };
      timestamp = Number(value);
    } else if (key === "v1") {
      signatures.push(value);
    }
    // Other schemes (v0, a future v2) are ignored, as Stripe's receivers do.
  }
  if (timestamp === undefined || signatures.length === 0 || signatures.length > MAX_SIGNATURES)
    return { ok: false, reason: "signature_malformed" };
  if (Math.abs(Math.floor(nowMs / 1000) - timestamp) > SIGNATURE_TOLERANCE_SECONDS)
    return { ok: false, reason: "timestamp_out_of_window" };
  const expected = signWebhookBody(signingSecret, timestamp, body);
  // Every candidate is compared, in constant time each, whether an earlier one matched or not.
  let matched = false;
  for (const signature of signatures) if (safeEqual(signature, expected)) matched = true;
  return matched ? { ok: true } : { ok: false, reason: "signature_invalid" };
}
