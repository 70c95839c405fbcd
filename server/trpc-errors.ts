// One mapping from the domain's AppError (and zod input errors) to typed tRPC errors, for
// everything that answers a tRPC client: procedures (server/trpc.ts) and live subscriptions
// that fail after they started (server/events/live-subscription.ts).
import { TRPCError } from "@trpc/server";
import type { TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import { ZodError } from "zod";
import { AppError, type ErrorKind } from "./errors.ts";
import { validationErrorFromZod } from "./validation.ts";

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

/** The body message of every failure that is not the client's: nothing internal reaches a client. */
export const SERVER_ERROR_MESSAGE = "Server Error";

const CONNECTION_ERROR_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  // PostgreSQL shutting down or starting up.
  "57P01",
  "57P02",
  "57P03",
]);

/**
 * A failure of a dependency rather than of the request (Redis or PostgreSQL unreachable, a
 * command that timed out): a 503 the client may retry, not a 500. Looks along the cause chain,
 * since drizzle wraps the driver's error.
 */
export function unavailableDependency(error: unknown): AppError | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (
      current.name === "MaxRetriesPerRequestError" ||
      current.name === "TimeoutError" ||
      /^(Connection is closed|Stream isn't writeable|Command timed out)/.test(current.message) ||
      (typeof code === "string" && CONNECTION_ERROR_CODES.has(code))
    ) {
      return new AppError("unavailable", "Service temporarily unavailable. Try again shortly.", {
        retryAfterSeconds: 1,
      });
    }
    current = current.cause;
  }
  return undefined;
}

/** Any failure as the tRPC error a client should see: domain errors keep their code. */
export function toTRPCError(error: unknown): unknown {
  return error instanceof AppError ? appErrorToTRPC(error) : error;
}
