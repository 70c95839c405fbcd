// Request bodies are read here, once, for every door: the REST procedures get the parsed
// object, plain routes (webhook posting) the raw bytes they sign.
import type { IncomingMessage, ServerResponse } from "node:http";
import { AppError } from "../errors.ts";
import { parseJsonWithinLimits } from "./json-limits.ts";

export const MAX_JSON_BODY_BYTES = 1024 * 1024;

export type ParsedBody = { raw: Buffer; value: Record<string, unknown> };

const tooLarge = () => new AppError("payload_too_large", "The request body is too large.");

/**
 * A body over the limit but not past this is read to its end and dropped before the 413 goes
 * out, so the client, still sending, reads the answer instead of a reset connection (closing a
 * socket with unread bytes resets it: EPIPE on the client). A larger one is cut off at once.
 */
const DRAINED_AT_MOST = 8 * 1024 * 1024;

/**
 * Requests sent with `Expect: 100-continue` whose declared body is over every JSON limit: the
 * server has not said "continue", so the client has not sent the body, and the 413 can go out
 * at once without reading or cutting anything (server/app.ts, `checkContinue`).
 */
const heldBack = new WeakSet<IncomingMessage>();

/**
 * For a `checkContinue` request: says "continue" unless the declared body is over
 * MAX_JSON_BODY_BYTES (and `exempt` is false: the upload route has a limit of its own and
 * refuses by the header too), in which case the body is never asked for and the connection
 * closes after the answer (the client may still send the body later, unasked).
 */
export function answerExpectContinue(req: IncomingMessage, res: ServerResponse, exempt: boolean): void {
  if (!exempt && Number(req.headers["content-length"] ?? 0) > MAX_JSON_BODY_BYTES) {
    heldBack.add(req);
    res.setHeader("Connection", "close");
  } else res.writeContinue();
}

/** Discards the rest of the body, then refuses; or destroys the request when too much is left. */
function refuseTooLarge(req: IncomingMessage, alreadyRead: number, declared: number): Promise<never> {
  if (Math.max(declared, alreadyRead) > DRAINED_AT_MOST || req.readableEnded || req.destroyed) {
    req.destroy();
    return Promise.reject(tooLarge());
  }
  return new Promise((_, reject) => {
    let read = alreadyRead;
    const refuse = () => {
      req.off("data", onData);
      req.off("end", refuse);
      req.off("error", refuse);
      req.off("close", refuse);
      reject(tooLarge());
    };
    const onData = (chunk: Buffer) => {
      read += chunk.length;
      if (read > DRAINED_AT_MOST) {
        refuse();
        req.destroy();
      }
    };
    req.on("data", onData);
    req.on("end", refuse);
    req.on("error", refuse);
    req.on("close", refuse);
  });
}

/**
 * The body's bytes, at most `limit`. Read with 'data' and 'end' listeners rather than an async
 * iterator, which cost a post about 30 µs of CPU to set up for a body that arrives in one chunk.
 * Past the limit it is refused with 413 once the rest is dropped (refuseTooLarge).
 */
export function readRawBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? 0);
  // Not sent yet, and never asked for: nothing to drain or cut.
  if (heldBack.has(req)) return Promise.reject(tooLarge());
  if (declared > limit) return refuseTooLarge(req, 0, declared);
  if (req.readableEnded) return Promise.resolve(Buffer.alloc(0));
  if (req.destroyed) return Promise.reject(new AppError("bad_request", "The request body could not be read."));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onClosed);
      req.off("close", onClosed);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        settle();
        refuseTooLarge(req, size, declared).catch(reject);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      settle();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    // The client went away in the middle of its body: the request's fault, not a 500 of ours.
    const onClosed = () => {
      settle();
      reject(new AppError("bad_request", "The request body could not be read."));
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onClosed);
    req.on("close", onClosed);
  });
}

export function mediaType(req: IncomingMessage): string | undefined {
  return req.headers["content-type"]?.split(";")[0]?.trim().toLowerCase();
}

/**
 * JSON (any charset parameter) or a URL-encoded form; an empty body is an empty object.
 * Malformed JSON, or JSON nested too deep, is a 400; a body of another type a 415.
 */
export async function readBody(req: IncomingMessage): Promise<ParsedBody> {
  const raw = await readRawBody(req, MAX_JSON_BODY_BYTES);
  return { raw, value: parseBody(raw, mediaType(req)) };
}

/** readBody's parse, for a body already read (webhook posting keeps the raw bytes it signs). */
export function parseBody(raw: Buffer, type: string | undefined): Record<string, unknown> {
  if (raw.length === 0) return {};
  if (type === "application/x-www-form-urlencoded") {
    return Object.fromEntries(new URLSearchParams(raw.toString("utf8")));
  }
  if (type !== undefined && type !== "application/json" && !type.endsWith("+json")) {
    throw new AppError("unsupported_media_type", "Unsupported Media Type: send application/json.");
  }
  // Too deep or malformed: 400, before anything parses or walks it (json-limits.ts).
  const value = parseJsonWithinLimits(raw.toString("utf8"));
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new AppError("bad_request", "The request body must be a JSON object.");
  }
  return value as Record<string, unknown>;
}
