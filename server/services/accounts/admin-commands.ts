// Operator commands (`npm run cli -- <command>`), run either by the CLI process itself or,
// when the embedded database is held by a running server, by that server on its behalf.
import { eq } from "drizzle-orm";
import { PLANS, users, type Plan } from "../../../db/schema/index.ts";
import { writeWithEvents, type EventWriteDeps } from "../../events/streams.ts";
import { normaliseEmail } from "./sign-in.ts";
import { revokeUserTokens } from "./tokens.ts";

export class AdminCommandError extends Error {
  override name = "AdminCommandError";
}

export const ADMIN_USAGE = [
  "user:plan <email> <free|personal_pro>   set a user's plan",
  "user:deactivate <email>                 block sign-in and revoke every token",
  "user:activate <email>                   allow sign-in again",
].join("\n");

/** Run by the CLI itself there is no relay: the running server's relay finds the events by polling. */
type AdminDeps = EventWriteDeps;

async function setUser(deps: AdminDeps, email: string | undefined, patch: Partial<typeof users.$inferInsert>) {
  if (!email) throw new AdminCommandError(`An e-mail is required.\n${ADMIN_USAGE}`);
  return writeWithEvents(deps, async (tx, emit) => {
    const [user] = await tx
      .update(users)
      .set({ ...patch, updatedAt: deps.clock.now() })
      .where(eq(users.email, normaliseEmail(email)))
      .returning();
    if (!user) throw new AdminCommandError(`No user has the e-mail ${email}.`);
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
    default:
      throw new AdminCommandError(`Unknown command${command ? ` "${command}"` : ""}. Commands:\n${ADMIN_USAGE}`);
  }
}
