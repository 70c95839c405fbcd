// The process's logger (pino). What reaches the log is redacted here, once, whatever logged it:
// credentials, e-mail addresses and message text by key (pino redaction), and errors by the
// `err` serializer below, which keeps a failed query's SQL but never its parameters (they carry
// password hashes, e-mail addresses and message text), nor the row a constraint reports.
import { AsyncLocalStorage } from "node:async_hooks";
import { pino, symbols, type Logger } from "pino";

export type { Logger };

/** How often a line that repeats while a dependency is away (Redis, the queue) is logged at most. */
export const REPEATED_WARNING_MS = 10_000;

/**
 * A gate that opens at most once per `ms`: for a log line that would otherwise repeat on every
 * retry while a dependency is away.
 */
export function oncePer(ms: number = REPEATED_WARNING_MS): () => boolean {
  let last = Number.NEGATIVE_INFINITY;
  return () => {
    const now = Date.now();
    if (now - last < ms) return false;
    last = now;
    return true;
  };
}

const REDACTED = "[redacted]";

/** Keys whose values never reach the log, at the top level and one level down. */
const SECRET_KEYS = [
  "password",
  "password_confirmation",
  "current_password",
  "passwordHash",
  "password_hash",
  "token",
  "access_token",
  "push_token",
  "pushToken",
  "tokenSealed",
  "token_sealed",
  "secret",
  "email",
  "to",
  "content",
  "params",
  "parameters",
];

export const LOG_REDACT_PATHS = [
  ...SECRET_KEYS,
  ...SECRET_KEYS.map((key) => `*.${key}`),
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-service-webhook-secret"]',
  'req.headers["x-service-signature"]',
  'res.headers["set-cookie"]',
];

/**
 * The request being served, if any (server/http/request-log.ts enters it): every line logged
 * while serving it, through whichever logger, carries its `reqId`.
 */
export const requestScope = new AsyncLocalStorage<{ reqId: string }>();

/** `reqId` from the request scope, unless the logger has it bound already (a WebSocket connection's child logger). */
function requestIdMixin(_object: object, _level: number, logger: Logger): object {
  const scope = requestScope.getStore();
  if (!scope) return {};
  const bindings = (logger as unknown as Record<symbol, string | undefined>)[symbols.chindingsSym];
  return bindings?.includes('"reqId":') ? {} : { reqId: scope.reqId };
}

type SerializedError = {
  type: string;
  message: string;
  code?: string;
  query?: string;
  stack?: string;
  cause?: SerializedError;
};

/** A driver's message can quote the input ("invalid input syntax for type integer: \"...\""). */
function scrubMessage(message: string): string {
  return message
    .replace(/(invalid input (?:syntax|value)[^:]*: ).*$/s, `$1${REDACTED}`)
    .replace(/(Failing row contains|Key \().*$/s, `$1${REDACTED}`);
}

/** Only the frames: a stack's first lines repeat the message, parameters included. */
function framesOf(stack: unknown): string | undefined {
  if (typeof stack !== "string") return undefined;
  const frames = stack.split("\n").filter((line) => line.startsWith("    at "));
  return frames.length > 0 ? frames.join("\n") : undefined;
}

/**
 * An error as it may be logged: its type, code, frames and (for a failed query) the SQL text;
 * a drizzle "Failed query" message is rebuilt from the query alone, so its params never appear.
 */
export function serializeError(error: unknown, depth = 0): SerializedError {
  if (!(error instanceof Error)) return { type: typeof error, message: REDACTED };
  const fields = error as Error & { query?: unknown; params?: unknown; code?: unknown };
  const query = typeof fields.query === "string" ? fields.query : undefined;
  const message = query !== undefined && "params" in fields ? `Failed query: ${query}` : scrubMessage(error.message);
  const serialized: SerializedError = { type: error.name, message };
  if (typeof fields.code === "string" || typeof fields.code === "number") serialized.code = String(fields.code);
  if (query !== undefined) serialized.query = query;
  const stack = framesOf(error.stack);
  if (stack) serialized.stack = stack;
  if (error.cause !== undefined && depth < 5) serialized.cause = serializeError(error.cause, depth + 1);
  return serialized;
}

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    redact: { paths: LOG_REDACT_PATHS, censor: REDACTED },
    serializers: { err: serializeError, error: serializeError },
    mixin: requestIdMixin,
  };
  return destination ? pino(options, destination) : pino(options);
}
