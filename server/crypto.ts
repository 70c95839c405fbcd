// The few primitives every secret-handling service shares.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export const sha256Hex = (text: string) => createHash("sha256").update(text).digest("hex");

export const hmacSha256Hex = (key: string, text: string) => createHmac("sha256", key).update(text).digest("hex");

/** Constant-time string comparison (lengths are not secret: hashes and signatures). */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** The sealing key of an APP_KEY, derived once (the push worker unseals a token per device). */
const sealKeys = new Map<string, Buffer>();
function sealKey(appKey: string): Buffer {
  let key = sealKeys.get(appKey);
  if (!key) {
    key = createHash("sha256").update(`seal:${appKey}`).digest();
    sealKeys.set(appKey, key);
  }
  return key;
}

/**
 * AES-256-GCM with a key derived from APP_KEY. A queued mail job must carry the one secret
 * it sends (a sign-in code, a reset token); sealed, it is unreadable in Redis. Push tokens are
 * stored sealed.
 */
export function seal(appKey: string, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", sealKey(appKey), iv);
  const encrypted = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return [iv, cipher.getAuthTag(), encrypted].map((part) => part.toString("base64url")).join(".");
}

export function unseal(appKey: string, sealed: string): string {
  const [iv, tag, encrypted] = sealed.split(".").map((part) => Buffer.from(part, "base64url"));
  if (!iv || !tag || !encrypted) throw new Error("malformed sealed value");
  const decipher = createDecipheriv("aes-256-gcm", sealKey(appKey), iv);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(encrypted), decipher.final()]).toString("utf8");
}
