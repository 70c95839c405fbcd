// The tRPC root: procedure meta, error mapping and the base procedures. Handlers never check
// auth by hand: they pick publicProcedure or authedProcedure.
import { initTRPC, TRPCError } from "@trpc/server";
import type { OpenApiMeta } from "trpc-to-openapi";
import type { Ability } from "./abilities.ts";
import type { Auth } from "./auth.ts";
import { authorizeCaller } from "./authorize.ts";
import type { RequestContext } from "./context.ts";
import { AppError, throttled, unauthenticated } from "./errors.ts";
import { findUnsafeText, unsafeTextError } from "./input-text.ts";
import type { ThrottleBucket } from "./services/throttle.ts";
import { appErrorOf, appErrorToTRPC, SERVER_ERROR_MESSAGE, unavailableDependency } from "./trpc-errors.ts";
import { liveStreamOf } from "./trpc-live.ts";

export type ProcedureMeta = OpenApiMeta<{
  /**
   * The token ability the procedure needs: by default "read" for queries and subscriptions and
   * "write" for mutations; null when any valid token will do (logout, for instance).
   */
  ability?: Ability | null;
  /** The REST status on success (the contract: create 201, delete 204, others 200). */
  successStatus?: 200 | 201 | 204;
  /**
   * Public procedures only: each call counts against this throttle bucket per client address; every answer (errors
   * included) carries x-ratelimit-limit and x-ratelimit-remaining, and past the limit it is a 429.
   */
  rateLimitPerIp?: ThrottleBucket;
}>;

const t = initTRPC
  .context<RequestContext>()
  .meta<ProcedureMeta>()
  .create({
    isDev: false,
    // Every door (HTTP, WebSocket, SSE) formats errors here: a failure that is not the client's
    // keeps its SQL, parameters and stack to the log (server/logger.ts) and says only "Server Error".
    errorFormatter({ shape, error }) {
      const appError = appErrorOf(error);
      const internal = !appError && error.code === "INTERNAL_SERVER_ERROR";
      const { stack: _stack, ...data } = shape.data as typeof shape.data & { stack?: string };
      return {
        ...shape,
        message: internal ? SERVER_ERROR_MESSAGE : shape.message,
        data: {
          ...data,
          /** Field errors of a 422, keyed like the REST body's `errors`. */
          errors: appError?.errors ?? null,
          retryAfter: appError?.retryAfterSeconds ?? null,
        },
      };
    },
  });

export const router = t.router;

/**
 * Domain errors and zod input errors become typed tRPC errors with the right code; an
 * unreachable Redis or database a 503. Any other error is left as it is (no throw).
 */
function throwMapped(error: TRPCError): void {
  const appError = appErrorOf(error) ?? unavailableDependency(error.cause);
  if (appError) throw appErrorToTRPC(appError);
}

const mapErrors = t.middleware(async ({ next }) => {
  const result = await next();
  if (!result.ok) throwMapped(result.error);
  return result;
});

/**
 * Every string of the raw input (values and object keys, however deep) must be text the
 * database can hold: no NUL, no lone surrogate (server/input-text.ts). Checked once for every
 * procedure and every door, before the procedure's own input parser runs; a refusal is a 422 on
 * the field, like any other validation error.
 */
async function refuseUnsafeInput(getRawInput: () => Promise<unknown>): Promise<void> {
  const unsafe = findUnsafeText(await getRawInput());
  if (unsafe.length > 0) throw appErrorToTRPC(unsafeTextError(unsafe));
}

const SAFE_TYPES = new Set(["query"]);

/**
 * Every authenticated procedure's checks, as one middleware (each level of tRPC's middleware
 * chain copies the call's options and context, so they cost one level, not three): the caller
 * (authorizeCaller), then the raw input's text (refuseUnsafeInput: after authentication, as
 * input validation is, so a caller without a valid token learns 401 first), then the error
 * mapping of everything below (throwMapped, as mapErrors does).
 */
const authenticated = t.middleware(async ({ ctx, meta, type, getRawInput, next }) => {
  let auth: Auth;
  try {
    // Subscriptions count as writes: only queries are safe from a cross-site page.
    auth = authorizeCaller(ctx, {
      write: !SAFE_TYPES.has(type),
      live: type === "subscription",
      ability: meta?.ability,
    });
    await refuseUnsafeInput(getRawInput);
  } catch (error) {
    if (error instanceof AppError) throw appErrorToTRPC(error);
    if (error instanceof TRPCError) throwMapped(error);
    throw error;
  }
  const result = await next({ ctx: { auth } });
  if (!result.ok) {
    throwMapped(result.error);
    return result;
  }
  // A live stream lasts only as long as the credential that opened it. An SSE stream's is watched
  // here, and it is its user's live connection while it is open; over WebSocket the connection's
  // credential is the one every request of it uses, and the host watches it once per connection
  // (a revocation ends the connection's subscriptions, then the connection: server/app.ts).
  const live = ctx.door === "http" ? liveStreamOf(result.data) : undefined;
  if (live) {
    const { token } = auth;
    const stopWatching = ctx.deps.credentials.track(
      { userId: auth.user.id, tokenId: token.id, expiresAt: token.expiresAt },
      () => live.fail(unauthenticated()),
    );
    live.onClose(stopWatching);
    live.onClose(ctx.deps.presence.connect(auth.user.id));
  }
  return result;
});

/** The input-text rule (refuseUnsafeInput) for public procedures. */
const refuseUnsafeText = t.middleware(async ({ getRawInput, next }) => {
  await refuseUnsafeInput(getRawInput);
  return next();
});

/**
 * The throttle says where the caller stands (server/services/throttle.ts); this door turns that
 * into the x-ratelimit-* headers and, past the limit, the 429 (with Retry-After) of the one
 * error mapping. The headers are set first, so a refusal further on (a 404) carries them too.
 */
const rateLimit = t.middleware(async ({ ctx, meta, next }) => {
  const bucket = meta?.rateLimitPerIp;
  if (!bucket) return next();
  const rate = await ctx.deps.throttle.take(bucket, ctx.ip);
  ctx.response.headers["x-ratelimit-limit"] = String(rate.limit);
  ctx.response.headers["x-ratelimit-remaining"] = String(rate.remaining);
  if (rate.exceeded) throw throttled(rate.resetSeconds);
  return next();
});

// Per-address limits are for public procedures (the invite preview): an authed procedure,
// the post among them, pays for no middleware it never uses.
export const publicProcedure = t.procedure.use(mapErrors).use(refuseUnsafeText).use(rateLimit);
export const authedProcedure = t.procedure.use(authenticated);

/** The middleware functions `authenticated` adds to a procedure (tRPC keeps them in `_def.middlewares`). */
const authenticatedSteps = new Set<unknown>((authenticated as unknown as { _middlewares: unknown[] })._middlewares);

type ProcedureLike = { _def: { type: string; meta?: unknown; middlewares?: unknown[] } };

/**
 * For a door that reads a request's body before tRPC runs the procedure (REST): the caller check
 * of an authenticated procedure, as its middleware makes it (401 without a valid credential, 403
 * for a missing ability), so that a request refused for its body (malformed, too large, of
 * another type) by a caller who may not call it at all answers for the caller first, as the
 * document's "401 on every bearer endpoint" says. Throws that refusal (an AppError); nothing for
 * a public procedure or an allowed caller.
 */
export function checkCallerFirst(procedure: ProcedureLike, ctx: RequestContext): void {
  const def = procedure._def;
  if (!def.middlewares?.some((step) => authenticatedSteps.has(step))) return;
  authorizeCaller(ctx, { write: !SAFE_TYPES.has(def.type), ability: (def.meta as ProcedureMeta | undefined)?.ability });
}

/** Each procedure's path and meta (for the REST statuses and the OpenAPI document). */
export function procedureMetas(appRouter: { _def: { procedures: object } }): { path: string; meta: ProcedureMeta }[] {
  return Object.entries(appRouter._def.procedures).map(([path, procedure]) => ({
    path,
    meta: ((procedure as { _def?: { meta?: ProcedureMeta } })._def?.meta ?? {}) as ProcedureMeta,
  }));
}
