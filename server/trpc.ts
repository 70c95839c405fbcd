// The tRPC root: procedure meta, error mapping and the base procedures. Handlers never check
// auth by hand: they pick publicProcedure or authedProcedure.
import { initTRPC, TRPCError } from "@trpc/server";
import type { TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import type { OpenApiMeta } from "trpc-to-openapi";
import { ZodError } from "zod";
import type { Ability } from "./abilities.ts";
import { authorizeCaller } from "./authorize.ts";
import type { RequestContext } from "./context.ts";
import { AppError, unauthenticated, type ErrorKind } from "./errors.ts";
import { LiveSubscription } from "./events/live-subscription.ts";
import { validationErrorFromZod } from "./validation.ts";

export type ProcedureMeta = OpenApiMeta<{
  /**
   * The token ability the procedure needs: by default "read" for queries and "write" for
   * mutations and subscriptions; null when any valid token will do (logout, for instance).
   */
  ability?: Ability | null;
  /** The REST status on success (the contract: create 201, delete 204, others 200). */
  successStatus?: 200 | 201 | 204;
}>;

const TRPC_CODE: Record<ErrorKind, TRPC_ERROR_CODE_KEY> = {
  bad_request: "BAD_REQUEST",
  unauthenticated: "UNAUTHORIZED",
  forbidden: "FORBIDDEN",
  not_found: "NOT_FOUND",
  conflict: "CONFLICT",
  payload_too_large: "PAYLOAD_TOO_LARGE",
  unsupported_media_type: "UNSUPPORTED_MEDIA_TYPE",
  validation: "UNPROCESSABLE_CONTENT",
  throttled: "TOO_MANY_REQUESTS",
  unavailable: "SERVICE_UNAVAILABLE",
  resync_required: "PRECONDITION_FAILED",
};

export function appErrorToTRPC(error: AppError): TRPCError {
  return new TRPCError({ code: TRPC_CODE[error.kind], message: error.message, cause: error });
}

/** The AppError behind a TRPCError, with zod input failures turned into the 422 kind. */
export function appErrorOf(error: TRPCError): AppError | undefined {
  if (error.cause instanceof AppError) return error.cause;
  if (error.cause instanceof ZodError && error.code === "BAD_REQUEST") return validationErrorFromZod(error.cause);
  return undefined;
}

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
      () => subscription.fail(appErrorToTRPC(unauthenticated())),
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
