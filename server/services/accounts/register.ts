import { users, type Language } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { hashPassword } from "./passwords.ts";
import { normaliseEmail, recordSignIn } from "./sign-in.ts";
import { queueVerificationEmail } from "./email-verification.ts";

export const EMAIL_TAKEN = "The email has already been taken.";

export async function registerUser(
  deps: Deps,
  input: {
    name: string;
    email: string;
    password: string;
    preferredLanguage?: Language | null;
    deviceName?: string | undefined;
  },
) {
  const passwordHash = await hashPassword(input.password);
  const now = deps.clock.now();
  const signedIn = await deps.db.transaction(async (tx) => {
    // The unique index decides between two simultaneous registrations of one e-mail.
    const [user] = await tx
      .insert(users)
      .values({
        name: input.name,
        email: normaliseEmail(input.email),
        passwordHash,
        preferredLanguage: input.preferredLanguage ?? "en",
        createdAt: now,
        updatedAt: now,
      })
      .onConflictDoNothing({ target: users.email })
      .returning();
    if (!user) throw invalidField("email", EMAIL_TAKEN);
    // In the same transaction: the mail job exists exactly when the account does.
    await queueVerificationEmail(tx, now, user);
    // A new account: no process keeps a sign-in of it, so nothing is reported.
    return recordSignIn(tx, () => {}, user, { kind: "sign_in", deviceName: input.deviceName, now });
  });
  return signedIn;
}
