// The keyring's rules (server/keyring.ts): which values a set of keys opens, which are stale,
// and which HMACs it accepts. The rotation itself is driven end to end in key-rotation.test.ts.
import { createCipheriv, createHash, createHmac, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Keyring } from "../server/keyring.ts";

const A = "a".repeat(40);
const B = "b".repeat(40);
const C = "c".repeat(40);

/** A value sealed by the first release: sha256("seal:" + key), `iv.tag.ciphertext`. */
function legacySeal(appKey: string, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", createHash("sha256").update(`seal:${appKey}`).digest(), iv);
  const encrypted = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return [iv, cipher.getAuthTag(), encrypted].map((part) => part.toString("base64url")).join(".");
}

describe("Keyring", () => {
  it("seals with the current key's id; a value opens under its purpose only", () => {
    const keys = new Keyring(A);
    const sealed = keys.seal("push-token", "secret-token");
    expect(sealed.startsWith(keys.sealedPrefix)).toBe(true);
    expect(sealed.split(".")).toHaveLength(5);
    expect(keys.open("push-token", sealed)).toEqual({ value: "secret-token", stale: false });
    expect(keys.open("webhook-secret", sealed)).toBeUndefined();
    expect(keys.isCurrent(sealed)).toBe(true);
    // Two seals of the same text differ (random iv).
    expect(keys.seal("push-token", "secret-token")).not.toBe(sealed);
  });

  it("opens a value of an earlier key as stale, and nothing it does not hold", () => {
    const old = new Keyring(A).seal("webhook-secret", "whs_1");
    const rotated = new Keyring(B, [A]);
    expect(rotated.open("webhook-secret", old)).toEqual({ value: "whs_1", stale: true });
    expect(rotated.isCurrent(old)).toBe(false);
    expect(new Keyring(B).open("webhook-secret", old)).toBeUndefined();
    expect(new Keyring(C, [B]).open("webhook-secret", old)).toBeUndefined();
  });

  it("opens the first release's format under the current or an earlier key, always as stale", () => {
    expect(new Keyring(A).open("mail-secret", legacySeal(A, "123456"))).toEqual({ value: "123456", stale: true });
    expect(new Keyring(B, [A]).open("push-token", legacySeal(A, "tok"))).toEqual({ value: "tok", stale: true });
    expect(new Keyring(B).open("push-token", legacySeal(A, "tok"))).toBeUndefined();
  });

  it("never throws on a damaged value: a changed byte, a wrong shape, an unknown key id", () => {
    const keys = new Keyring(A);
    const sealed = keys.seal("push-token", "secret-token");
    const parts = sealed.split(".");
    const flipped = [...parts.slice(0, 4), `${parts[4]!.slice(0, -1)}${parts[4]!.endsWith("A") ? "B" : "A"}`].join(".");
    for (const damaged of [flipped, "", "k1", "k1.x.y.z.w", "a.b.c", "k1.zzzzzzzz.a.b.c", parts.slice(1).join(".")]) {
      expect(keys.open("push-token", damaged)).toBeUndefined();
    }
  });

  it("writes HMACs under a derived key and accepts those of earlier keys and of the first release", () => {
    const rotated = new Keyring(B, [A]);
    const text = "otp:ann@example.test:123456";
    expect(rotated.mac("sign-in-code", text)).not.toBe(createHmac("sha256", B).update(text).digest("hex"));
    expect(rotated.verifyMac("sign-in-code", text, rotated.mac("sign-in-code", text))).toBe(true);
    expect(rotated.verifyMac("sign-in-code", text, new Keyring(A).mac("sign-in-code", text))).toBe(true);
    expect(rotated.verifyMac("sign-in-code", text, createHmac("sha256", A).update(text).digest("hex"))).toBe(true);
    // Another purpose's HMAC, another text, or a key not held: refused.
    expect(rotated.verifyMac("sign-in-code", text, rotated.mac("email-link", text))).toBe(false);
    expect(rotated.verifyMac("sign-in-code", `${text}7`, rotated.mac("sign-in-code", text))).toBe(false);
    expect(rotated.verifyMac("sign-in-code", text, new Keyring(C).mac("sign-in-code", text))).toBe(false);
    expect(rotated.macs("push-token-lookup", "push-token:x")[0]).toBe(rotated.mac("push-token-lookup", "push-token:x"));
  });
});
