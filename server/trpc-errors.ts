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

/** Any failure as the tRPC error a client should see: domain errors keep their code. */
export function toTRPCError(error: unknown): unknown {
  return error instanceof AppError ? appErrorToTRPC(error) : error;
}
