// The checks every authenticated request passes, whichever door it came through: tRPC
// procedures (server/trpc.ts `authenticated`) and the plain routes (uploads, downloads).
import { tokenCan, type Ability } from "./abilities.ts";
import type { Auth } from "./auth.ts";
import type { RequestContext } from "./context.ts";
import { forbidden, unauthenticated } from "./errors.ts";
import { trustedOrigins } from "./http/cookies.ts";

/**
 * The caller, or 401 without credentials. `write` requests need the "write" ability and
 * reads "read", unless `ability` names another one (or null: any valid token will do). A live
 * subscription (`live`) is a write for the cookie's Origin check (only a page of ours may hold
 * a stream open with the cookie) but needs only "read": it delivers what queries show.
 */
export function authorizeCaller(
  ctx: Pick<RequestContext, "auth" | "origin" | "deps">,
  request: { write: boolean; live?: boolean; ability?: Ability | null | undefined },
): Auth {
  const auth = ctx.auth;
  if (!auth) throw unauthenticated();
  // A cookie rides along with cross-site requests; a write authenticated only by the cookie
  // must come from a page of ours.
  if (auth.via === "cookie" && request.write) {
    if (!ctx.origin || !trustedOrigins(ctx.deps.config).has(ctx.origin)) {
      throw forbidden("Cross-site request refused: the Origin is not trusted.");
    }
  }
  const ability = request.ability === undefined ? (request.write && !request.live ? "write" : "read") : request.ability;
  if (ability && !tokenCan(auth.token.abilities, ability)) {
    throw forbidden(`This token does not have the "${ability}" ability.`);
  }
  return auth;
}
