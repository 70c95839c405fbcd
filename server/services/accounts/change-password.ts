import { eq } from "drizzle-orm";
import { users } from "../../../db/schema/index.ts";
import type { Auth } from "../../auth.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { writeWithEvents } from "../../events/streams.ts";
import { hashPassword, verifyPassword } from "./passwords.ts";
import { revokeUserTokens } from "./tokens.ts";

/**
 * Sets a new password and signs the user out of every other device and web session. Tries of
 * the current password are throttled per user as sign-in is (every try counts, a right one
 * clears the count), so a stolen token cannot be used to guess the password.
 */
export async function changePassword(deps: Deps, auth: Auth, input: { currentPassword: string; password: string }) {
  const throttleKey = String(auth.user.id);
  await deps.throttle.hit("changePassword", throttleKey);
  if (!(await verifyPassword(auth.user.passwordHash, input.currentPassword))) {
    throw invalidField("current_password", "The password is incorrect.");
  }
  await deps.throttle.reset("changePassword", throttleKey);
  const passwordHash = await hashPassword(input.password);
  await writeWithEvents(deps, async (tx, emit) => {
    await tx.update(users).set({ passwordHash, updatedAt: deps.clock.now() }).where(eq(users.id, auth.user.id));
    emit(await revokeUserTokens(tx, auth.user.id, { keepTokenId: auth.token.id }));
  });
}
