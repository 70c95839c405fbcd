// One mapping from an error to the document's REST answer: status, `{message}` or
// `{message, errors}` body, and Retry-After on 429.
import { TRPCError } from "@trpc/server";
import { AppError, HTTP_STATUS } from "../errors.ts";
import { appErrorOf } from "../trpc-errors.ts";

export type RestError = {
  status: number;
  body: { message: string; errors?: Record<string, string[]> };
  headers: Record<string, string>;
};

export function restErrorFromAppError(error: AppError): RestError {
  const headers: Record<string, string> = {};
  if (error.retryAfterSeconds !== undefined) headers["Retry-After"] = String(error.retryAfterSeconds);
  const body = error.errors ? { message: error.message, errors: error.errors } : { message: error.message };
  return { status: HTTP_STATUS[error.kind], body, headers };
}

const FALLBACK: Partial<Record<TRPCError["code"], { status: number; message: string }>> = {
  UNAUTHORIZED: { status: 401, message: "Unauthenticated." },
  PARSE_ERROR: { status: 400, message: "Malformed JSON in the request body." },
  PAYLOAD_TOO_LARGE: { status: 413, message: "The request body is too large." },
  METHOD_NOT_SUPPORTED: { status: 405, message: "Method not allowed." },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: "Unsupported Media Type: send application/json." },
};

export function restError(error: TRPCError): RestError {
  const appError = appErrorOf(error);
  if (appError) return restErrorFromAppError(appError);
  if (error.code === "NOT_FOUND") return { status: 404, body: { message: "Not found." }, headers: {} };
  const fallback = FALLBACK[error.code];
  if (fallback) return { status: fallback.status, body: { message: fallback.message }, headers: {} };
  return { status: 500, body: { message: "Server Error" }, headers: {} };
}
