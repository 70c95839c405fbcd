import { eq } from "drizzle-orm";
import { users } from "../../../db/schema/index.ts";
import type { Auth } from "../../context.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { writeWithEvents } from "../../events/streams.ts";
import { hashPassword, verifyPassword } from "./passwords.ts";
import { revokeUserTokens } from "./tokens.ts";

/** Sets a new password and signs the user out of every other device and web session. */
export async function changePassword(deps: Deps, auth: Auth, input: { currentPassword: string; password: string }) {
  if (!(await verifyPassword(auth.user.passwordHash, input.currentPassword))) {
    throw invalidField("current_password", "The password is incorrect.");
  }
  const passwordHash = await hashPassword(input.password);
  await writeWithEvents(deps, async (tx, emit) => {
    await tx.update(users).set({ passwordHash, updatedAt: deps.clock.now() }).where(eq(users.id, auth.user.id));
    emit(await revokeUserTokens(tx, auth.user.id, { keepTokenId: auth.token.id }));
  });
}
