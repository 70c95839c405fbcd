// One error type for domain code, with a kind. server/trpc.ts maps it to a TRPCError for RPC
// clients, server/http/rest.ts to the API document's REST bodies and statuses.
export type FieldErrors = Record<string, string[]>;

export type ErrorKind =
  | "bad_request"
  | "unauthenticated"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "unsupported_media_type"
  | "validation"
  | "throttled"
  | "unavailable"
  /** A live subscription cannot resume exactly from the position given (live events only). */
  | "resync_required";

export const VALIDATION_MESSAGE = "The given data was invalid.";

export class AppError extends Error {
  override name = "AppError";
  readonly kind: ErrorKind;
  readonly errors: FieldErrors | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(kind: ErrorKind, message: string, extra: { errors?: FieldErrors; retryAfterSeconds?: number } = {}) {
    super(message);
    this.kind = kind;
    this.errors = extra.errors;
    this.retryAfterSeconds = extra.retryAfterSeconds;
  }
}

export const HTTP_STATUS: Record<ErrorKind, number> = {
  bad_request: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation: 422,
  throttled: 429,
  unavailable: 503,
  resync_required: 412,
};

export const unauthenticated = () => new AppError("unauthenticated", "Unauthenticated.");
export const forbidden = (message = "This action is unauthorized.") => new AppError("forbidden", message);
export const notFound = (message = "Not found.") => new AppError("not_found", message);
export const throttled = (retryAfterSeconds: number) =>
  new AppError("throttled", "Too Many Attempts.", { retryAfterSeconds: Math.max(1, Math.ceil(retryAfterSeconds)) });

/** A 422 with one field's message, in the document's `{message, errors}` shape. */
export const invalidField = (field: string, text: string) =>
  new AppError("validation", VALIDATION_MESSAGE, { errors: { [field]: [text] } });

/** A 422 whose body is just `{message}` (the document's link-callback and unlink errors). */
export const unprocessable = (message: string) => new AppError("validation", message);
