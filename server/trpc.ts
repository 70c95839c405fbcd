// The tRPC root: procedure meta, error mapping and the base procedures. Handlers never check
// auth by hand: they pick publicProcedure or authedProcedure.
import { initTRPC } from "@trpc/server";
import type { OpenApiMeta } from "trpc-to-openapi";
import type { Ability } from "./abilities.ts";
import { authorizeCaller } from "./authorize.ts";
import type { RequestContext } from "./context.ts";
import { unauthenticated } from "./errors.ts";
import { LiveSubscription } from "./events/live-subscription.ts";
import { appErrorOf, appErrorToTRPC } from "./trpc-errors.ts";

export type ProcedureMeta = OpenApiMeta<{
  /**
   * The token ability the procedure needs: by default "read" for queries and "write" for
   * mutations and subscriptions; null when any valid token will do (logout, for instance).
   */
  ability?: Ability | null;
  /** The REST status on success (the contract: create 201, delete 204, others 200). */
  successStatus?: 200 | 201 | 204;
}>;

const t = initTRPC
  .context<RequestContext>()
  .meta<ProcedureMeta>()
  .create({
    isDev: false,
    errorFormatter({ shape, error }) {
      const appError = appErrorOf(error);
      return {
        ...shape,
        data: {
          ...shape.data,
          /** Field errors of a 422, keyed like the REST body's `errors`. */
          errors: appError?.errors ?? null,
          retryAfter: appError?.retryAfterSeconds ?? null,
        },
      };
    },
  });

export const router = t.router;

/** Domain errors and zod input errors become typed tRPC errors with the right code. */
const mapErrors = t.middleware(async ({ next }) => {
  const result = await next();
  if (!result.ok) {
    const appError = appErrorOf(result.error);
    if (appError) throw appErrorToTRPC(appError);
  }
  return result;
});

const SAFE_TYPES = new Set(["query"]);

const requireAuth = t.middleware(async ({ ctx, meta, type, next }) => {
  // Subscriptions count as writes: only queries are safe from a cross-site page.
  const auth = authorizeCaller(ctx, { write: !SAFE_TYPES.has(type), ability: meta?.ability });
  const result = await next({ ctx: { ...ctx, auth } });
  // A live stream, over WebSocket or SSE, lasts only as long as the credential that opened it.
  if (result.ok && result.data instanceof LiveSubscription) {
    const subscription = result.data;
    const { token } = auth;
    const stopWatching = ctx.deps.credentials.track(
      { userId: auth.user.id, tokenId: token.id, expiresAt: token.expiresAt },
      () => subscription.fail(unauthenticated()),
    );
    subscription.onClose(stopWatching);
  }
  return result;
});

export const publicProcedure = t.procedure.use(mapErrors);
export const authedProcedure = publicProcedure.use(requireAuth);

/** Each procedure's path and meta (for the REST statuses and the OpenAPI document). */
export function procedureMetas(appRouter: { _def: { procedures: object } }): { path: string; meta: ProcedureMeta }[] {
  return Object.entries(appRouter._def.procedures).map(([path, procedure]) => ({
    path,
    meta: ((procedure as { _def?: { meta?: ProcedureMeta } })._def?.meta ?? {}) as ProcedureMeta,
  }));
}
