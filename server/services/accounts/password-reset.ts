// Password reset by an e-mailed token (contract, "Sign-in details"): random, stored as
// SHA-256, valid 60 minutes, single use. A successful reset signs the user out everywhere.
import { randomBytes } from "node:crypto";
import { and, eq } from "drizzle-orm";
import { passwordResetTokens, users } from "../../../db/schema/index.ts";
import { safeEqual, sha256Hex } from "../../crypto.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { writeWithEvents } from "../../events/streams.ts";
import { newId } from "../../ids.ts";
import { mailJobs } from "../../mail/jobs.ts";
import { enqueueJob } from "../../jobs/outbox.ts";
import { hashPassword } from "./passwords.ts";
import { normaliseEmail } from "./sign-in.ts";
import { revokeUserTokens } from "./tokens.ts";

export const RESET_TOKEN_LIFETIME_MS = 60 * 60 * 1000;
export const UNKNOWN_EMAIL = "We can't find a user with that email address.";
export const INVALID_RESET_TOKEN = "This password reset token is invalid.";

export async function requestPasswordReset(deps: Deps, input: { email: string }): Promise<void> {
  const email = normaliseEmail(input.email);
  const [user] = await deps.db.select().from(users).where(eq(users.email, email)).limit(1);
  // The document asks for 422 on an unknown e-mail (Laravel's behaviour), which does reveal
  // whether an account exists; the throttle below bounds how fast anyone can ask.
  if (!user) throw invalidField("email", UNKNOWN_EMAIL);
  await deps.throttle.hit("passwordReset", email);
  const token = randomBytes(32).toString("base64url");
  const now = deps.clock.now();
  const values = {
    email,
    id: newId("passwordReset", now.getTime()),
    tokenHash: sha256Hex(token),
    expiresAt: new Date(now.getTime() + RESET_TOKEN_LIFETIME_MS),
    createdAt: now,
  };
  await deps.db.transaction(async (tx) => {
    await tx
      .insert(passwordResetTokens)
      .values(values)
      .onConflictDoUpdate({ target: passwordResetTokens.email, set: values });
    await enqueueJob(tx, now, mailJobs.passwordReset, {
      resetId: values.id,
      userId: user.id,
      sealedToken: deps.keys.seal("mail-secret", token),
    });
  });
}

export async function resetPassword(
  deps: Deps,
  input: { email: string; token: string; password: string },
): Promise<void> {
  const email = normaliseEmail(input.email);
  const now = deps.clock.now();
  const passwordHash = await hashPassword(input.password);
  await writeWithEvents(deps, async (tx, emit) => {
    const [stored] = await tx.select().from(passwordResetTokens).where(eq(passwordResetTokens.email, email)).limit(1);
    if (!stored || stored.expiresAt <= now || !safeEqual(sha256Hex(input.token), stored.tokenHash)) {
      throw invalidField("email", INVALID_RESET_TOKEN);
    }
    // Deleting the row is what uses the token up: of two simultaneous resets, one wins.
    const consumed = await tx
      .delete(passwordResetTokens)
      .where(and(eq(passwordResetTokens.email, email), eq(passwordResetTokens.id, stored.id)))
      .returning({ id: passwordResetTokens.id });
    const [user] = await tx.select().from(users).where(eq(users.email, email)).limit(1);
    if (consumed.length === 0 || !user) throw invalidField("email", INVALID_RESET_TOKEN);
    await tx.update(users).set({ passwordHash, updatedAt: now }).where(eq(users.id, user.id));
    // Whoever had the old password may hold tokens: none survive, personal ones included.
    emit(await revokeUserTokens(tx, user.id, { includePersonal: true }));
  });
}
