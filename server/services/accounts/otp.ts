// Sign-in by a one-time code sent by e-mail (contract, "Sign-in details"): 6 digits from a
// CSPRNG, stored as an HMAC, valid 10 minutes, at most 5 wrong tries, single use; a new
// request replaces the old code. Verifying creates the account for an unknown e-mail.
import { randomInt } from "node:crypto";
import { and, eq, lt, sql } from "drizzle-orm";
import { oneTimeCodes, users, type Language } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { newId } from "../../ids.ts";
import { mailJobs } from "../../mail/jobs.ts";
import { enqueueJob } from "../../jobs/outbox.ts";
import { writeWithEvents } from "../../events/streams.ts";
import { accountInactive, normaliseEmail, recordSignIn } from "./sign-in.ts";

export const OTP_LIFETIME_MS = 10 * 60 * 1000;
export const OTP_MAX_FAILED_ATTEMPTS = 5;
export const INVALID_OTP = "The provided code is invalid or has expired.";

const codeText = (email: string, code: string) => `otp:${email}:${code}`;

export async function requestOtp(deps: Deps, input: { email: string; language: Language | undefined }): Promise<void> {
  const email = normaliseEmail(input.email);
  await deps.throttle.hit("otp", email);
  const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
  const now = deps.clock.now();
  const id = newId("oneTimeCode", now.getTime());
  const values = {
    id,
    email,
    codeHash: deps.keys.mac("sign-in-code", codeText(email, code)),
    failedAttempts: 0,
    expiresAt: new Date(now.getTime() + OTP_LIFETIME_MS),
    createdAt: now,
  };
  await deps.db.transaction(async (tx) => {
    await tx.insert(oneTimeCodes).values(values).onConflictDoUpdate({ target: oneTimeCodes.email, set: values });
    await enqueueJob(tx, now, mailJobs.otpCode, {
      codeId: id,
      sealedCode: deps.keys.seal("mail-secret", code),
      language: input.language ?? null,
    });
  });
}

export async function verifyOtp(deps: Deps, input: { email: string; code: string; deviceName?: string | undefined }) {
  const email = normaliseEmail(input.email);
  const now = deps.clock.now();
  const [stored] = await deps.db.select().from(oneTimeCodes).where(eq(oneTimeCodes.email, email)).limit(1);
  if (!stored || stored.expiresAt <= now || stored.failedAttempts >= OTP_MAX_FAILED_ATTEMPTS) {
    throw invalidField("token", INVALID_OTP);
  }
  // A code mailed before APP_KEY changed still works (APP_KEY_PREVIOUS).
  if (!deps.keys.verifyMac("sign-in-code", codeText(email, input.code), stored.codeHash)) {
    // Counted in the database, so parallel guesses cannot exceed the limit.
    await deps.db
      .update(oneTimeCodes)
      .set({ failedAttempts: sql`${oneTimeCodes.failedAttempts} + 1` })
      .where(and(eq(oneTimeCodes.id, stored.id), lt(oneTimeCodes.failedAttempts, OTP_MAX_FAILED_ATTEMPTS)));
    throw invalidField("token", INVALID_OTP);
  }

  return writeWithEvents(deps, async (tx, emit) => {
    // Deleting the row is what uses the code up: of two simultaneous verifications, one wins.
    const consumed = await tx
      .delete(oneTimeCodes)
      .where(eq(oneTimeCodes.id, stored.id))
      .returning({ id: oneTimeCodes.id });
    if (consumed.length === 0) throw invalidField("token", INVALID_OTP);
    const [existing] = await tx.select().from(users).where(eq(users.email, email)).limit(1);
    if (existing && !existing.isActive) throw accountInactive();
    // Receiving the code proves the address: the account is verified either way.
    const [user] = existing
      ? await tx
          .update(users)
          .set({ emailVerifiedAt: existing.emailVerifiedAt ?? now, updatedAt: now })
          .where(eq(users.id, existing.id))
          .returning()
      : await tx
          .insert(users)
          .values({ name: email.split("@")[0]!, email, emailVerifiedAt: now, createdAt: now, updatedAt: now })
          .returning();
    return recordSignIn(tx, emit, user!, { kind: "sign_in", deviceName: input.deviceName, now });
  });
}
