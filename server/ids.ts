// Prefixed, sortable, unguessable ids from one registry (house style, after unkey's newId).
// Layout: <prefix>_<10 chars of millisecond time><16 chars of randomness>, Crockford base32.
// The time part keeps ids roughly ordered (good B-tree locality); the 80 random bits keep
// them unguessable, as the contract requires.
import { randomBytes, randomFillSync } from "node:crypto";

const ID_PREFIXES = {
  accessToken: "tok",
  oneTimeCode: "otp",
  passwordReset: "pwr",
  workspace: "ws",
  channel: "ch",
  member: "mem",
  invite: "inv",
  conversation: "dm",
  message: "msg",
  attachment: "att",
  device: "dev",
  room: "room",
  webhook: "whk",
  webhookRequest: "whr",
  outboundWebhook: "owh",
  delivery: "dlv",
  event: "evt",
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

function encodeTime(milliseconds: number): string {
  let value = milliseconds;
  let out = "";
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[value % 32] + out;
    value = Math.floor(value / 32);
  }
  return out;
}

/**
 * Random bytes are drawn from the CSPRNG a page at a time (as node:crypto's randomUUID does):
 * an id takes 16 of them instead of a call into OpenSSL of its own. Each byte is used once.
 */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let poolOffset = POOL_BYTES;

function encodeRandom(length: number): string {
  if (poolOffset + length > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  let out = "";
  for (let i = poolOffset; i < poolOffset + length; i++) out += ALPHABET[pool[i]! % 32];
  poolOffset += length;
  return out;
}

/** What newId(kind) makes, and nothing else: `<prefix>_` and 26 characters of the alphabet. */
export function idPattern(kind: IdKind): RegExp {
  return new RegExp(`^${ID_PREFIXES[kind]}_[${ALPHABET}]{26}$`);
}

export function newId(kind: IdKind, now: number = Date.now()): string {
  return `${ID_PREFIXES[kind]}_${encodeTime(now)}${encodeRandom(16)}`;
}

/** A random secret string (tokens, codes' salts), base64url, `bytes` of entropy. */
export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}
