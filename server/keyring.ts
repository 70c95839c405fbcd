// The keys every secret is sealed, signed or HMAC-keyed with (contract.md, APP_KEY and
// APP_KEY_PREVIOUS). Each purpose has its own key, derived from APP_KEY with HKDF, and each
// sealed value names the APP_KEY that sealed it: `k1.<key id>.<iv>.<tag>.<ciphertext>`.
//
// Earlier keys (APP_KEY_PREVIOUS) still open, verify and find what they wrote, and so does the
// format of the first release (no key id: AES-256-GCM under sha256("seal:" + APP_KEY), HMACs
// keyed with the raw APP_KEY). A value opened under anything but the current key is `stale`:
// its owner re-seals it under the current one (docs/operations.md, "Rotating APP_KEY").
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from "node:crypto";
import { safeEqual } from "./crypto.ts";

/** What a sealed value holds; each has its own cipher key. */
export type SealPurpose = "push-token" | "webhook-secret" | "outbound-webhook-secret" | "mail-secret";

/** What an HMAC proves or finds; each has its own key. */
export type MacPurpose = "push-token-lookup" | "sign-in-code" | "email-link" | "admin-command";

const FORMAT = "k1";
const SALT = "chat-service";

type Key = {
  /** Names the APP_KEY in sealed values without revealing anything about it. */
  id: string;
  secret: string;
  seal: Map<SealPurpose, Buffer>;
  mac: Map<MacPurpose, Buffer>;
  /** The first release's cipher key: sha256("seal:" + APP_KEY), one for every purpose. */
  legacySeal: Buffer;
};

const derive = (secret: string, info: string, length = 32) =>
  Buffer.from(hkdfSync("sha256", secret, SALT, info, length));

function keyOf(secret: string): Key {
  return {
    id: derive(secret, "key-id", 6).toString("base64url"),
    secret,
    seal: new Map(),
    mac: new Map(),
    legacySeal: createHash("sha256").update(`seal:${secret}`).digest(),
  };
}

function sealKey(key: Key, purpose: SealPurpose): Buffer {
  let derived = key.seal.get(purpose);
  if (!derived) key.seal.set(purpose, (derived = derive(key.secret, `seal:${purpose}`)));
  return derived;
}

function macKey(key: Key, purpose: MacPurpose): Buffer {
  let derived = key.mac.get(purpose);
  if (!derived) key.mac.set(purpose, (derived = derive(key.secret, `mac:${purpose}`)));
  return derived;
}

function encrypt(cipherKey: Buffer, plaintext: string): string[] {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", cipherKey, iv);
  const encrypted = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return [iv, cipher.getAuthTag(), encrypted].map((part) => part.toString("base64url"));
}

/** The plaintext, or undefined when this key did not seal it (GCM's tag says so). */
function decrypt(cipherKey: Buffer, parts: string[]): string | undefined {
  const [iv, tag, encrypted] = parts.map((part) => Buffer.from(part, "base64url"));
  if (!iv || iv.length !== 12 || !tag || tag.length !== 16 || !encrypted) return undefined;
  try {
    const decipher = createDecipheriv("aes-256-gcm", cipherKey, iv);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(encrypted), decipher.final()]).toString("utf8");
  } catch {
    return undefined;
  }
}

export type Opened = {
  value: string;
  /** Sealed under an earlier key, or in the first release's format: seal it again. */
  stale: boolean;
};

export class Keyring {
  private readonly current: Key;
  private readonly previous: Key[];

  constructor(appKey: string, previousAppKeys: readonly string[] = []) {
    this.current = keyOf(appKey);
    this.previous = previousAppKeys.filter((key) => key !== appKey).map(keyOf);
  }

  /** The current key's id: every value sealed now starts with `${sealedPrefix}`. */
  get currentKeyId(): string {
    return this.current.id;
  }

  get sealedPrefix(): string {
    return `${FORMAT}.${this.current.id}.`;
  }

  private get all(): Key[] {
    return [this.current, ...this.previous];
  }

  seal(purpose: SealPurpose, plaintext: string): string {
    return [FORMAT, this.current.id, ...encrypt(sealKey(this.current, purpose), plaintext)].join(".");
  }

  /** The value, or undefined when no key this process holds opens it (never thrown). */
  open(purpose: SealPurpose, sealed: string): Opened | undefined {
    const parts = sealed.split(".");
    if (parts.length === 5 && parts[0] === FORMAT) {
      const key = this.all.find((candidate) => candidate.id === parts[1]);
      const value = key && decrypt(sealKey(key, purpose), parts.slice(2));
      return value === undefined ? undefined : { value, stale: key !== this.current };
    }
    if (parts.length !== 3) return undefined;
    for (const key of this.all) {
      const value = decrypt(key.legacySeal, parts);
      if (value !== undefined) return { value, stale: true };
    }
    return undefined;
  }

  /** Whether a sealed value is sealed under the current key (no need to try opening it). */
  isCurrent(sealed: string): boolean {
    return sealed.startsWith(this.sealedPrefix);
  }

  /** The HMAC-SHA256 (hex) that is written from now on. */
  mac(purpose: MacPurpose, text: string): string {
    return createHmac("sha256", macKey(this.current, purpose)).update(text).digest("hex");
  }

  /**
   * Every HMAC a value written earlier may carry, the current one first: under each earlier
   * key, and the first release's HMAC keyed with the raw APP_KEY.
   */
  macs(purpose: MacPurpose, text: string): string[] {
    return [
      ...this.all.map((key) => createHmac("sha256", macKey(key, purpose)).update(text).digest("hex")),
      ...this.all.map((key) => createHmac("sha256", key.secret).update(text).digest("hex")),
    ];
  }

  /** Whether `given` is the HMAC of `text` under any key held (constant time per candidate). */
  verifyMac(purpose: MacPurpose, text: string, given: string): boolean {
    let matched = false;
    for (const candidate of this.macs(purpose, text)) matched = safeEqual(candidate, given) || matched;
    return matched;
  }
}
