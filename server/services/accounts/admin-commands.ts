// Operator commands (`npm run cli -- <command>`), run either by the CLI process itself or,
// when the embedded database is held by a running server, by that server on its behalf.
import { eq } from "drizzle-orm";
import { PLANS, users, type Plan } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { writeWithEvents, type EventWriteDeps } from "../../events/streams.ts";
import { sweepSealedValues } from "../keys/sealed-values.ts";
import { normaliseEmail } from "./sign-in.ts";
import { revokeUserTokens, userChanged } from "./tokens.ts";

export class AdminCommandError extends Error {
  override name = "AdminCommandError";
}

export const ADMIN_USAGE = [
  "user:plan <email> <free|personal_pro>   set a user's plan",
  "user:deactivate <email>                 block sign-in and revoke every token",
  "user:activate <email>                   allow sign-in again",
  "keys:rotate                             seal every stored secret under the current APP_KEY",
].join("\n");

/** Run by the CLI itself there is no relay: the running server's relay finds the events by polling. */
type AdminDeps = EventWriteDeps & Pick<Deps, "keys" | "logger">;

async function setUser(deps: AdminDeps, email: string | undefined, patch: Partial<typeof users.$inferInsert>) {
  if (!email) throw new AdminCommandError(`An e-mail is required.\n${ADMIN_USAGE}`);
  return writeWithEvents(deps, async (tx, emit) => {
    const [user] = await tx
      .update(users)
      .set({ ...patch, updatedAt: deps.clock.now() })
      .where(eq(users.email, normaliseEmail(email)))
      .returning();
    if (!user) throw new AdminCommandError(`No user has the e-mail ${email}.`);
    emit(userChanged(user.id));
    if (patch.isActive === false) emit(await revokeUserTokens(tx, user.id, { includePersonal: true }));
    return user;
  });
}

export async function runAdminCommand(deps: AdminDeps, args: string[]): Promise<string> {
  const [command, email, value] = args;
  switch (command) {
    case "user:plan": {
      if (!PLANS.includes(value as Plan)) throw new AdminCommandError(`The plan must be one of: ${PLANS.join(", ")}.`);
      const user = await setUser(deps, email, { plan: value as Plan });
      return `User ${user.email} is now on the ${user.plan} plan.`;
    }
    case "user:deactivate": {
      const user = await setUser(deps, email, { isActive: false });
      return `User ${user.email} is deactivated; their tokens are revoked.`;
    }
    case "user:activate": {
      const user = await setUser(deps, email, { isActive: true });
      return `User ${user.email} is active.`;
    }
    case "keys:rotate":
      return rotateKeys(deps);
    default:
      throw new AdminCommandError(`Unknown command${command ? ` "${command}"` : ""}. Commands:\n${ADMIN_USAGE}`);
  }
}

/**
 * Seals every stored secret still under an earlier APP_KEY (or the first release's format)
 * under the current one, and says what no key opens. After it, APP_KEY_PREVIOUS may go, unless
 * mailed links and sign-in codes from before should keep working until they expire.
 */
async function rotateKeys(deps: AdminDeps): Promise<string> {
  const counts = await sweepSealedValues(deps, { reseal: true });
  const lines = counts.map(
    ({ kind, stale, resealed, unopenable }) =>
      `${kind}: ${resealed} sealed again under the current APP_KEY` +
      (stale > resealed ? `, ${stale - resealed} changed meanwhile (run again)` : "") +
      (unopenable > 0 ? `, ${unopenable} that no key opens (kept)` : ""),
  );
  const unopenable = counts.reduce((sum, count) => sum + count.unopenable, 0);
  const stale = counts.reduce((sum, count) => sum + count.stale - count.resealed, 0);
  const verdict =
    unopenable > 0
      ? "Some values no key opens: set APP_KEY_PREVIOUS to the APP_KEY that sealed them and run keys:rotate again."
      : stale > 0
        ? "Some values changed while they were sealed again: run keys:rotate again."
        : "Every stored secret is sealed under the current APP_KEY.";
  return [...lines, verdict].join("\n");
}
