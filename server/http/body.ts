// Request bodies are read here, once, for every door: the REST procedures get the parsed
// object, plain routes (webhook posting) the raw bytes they sign.
import type { IncomingMessage } from "node:http";
import { AppError } from "../errors.ts";
import { parseJsonWithinLimits } from "./json-limits.ts";

export const MAX_JSON_BODY_BYTES = 1024 * 1024;

export type ParsedBody = { raw: Buffer; value: Record<string, unknown> };

export async function readRawBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limit) throw new AppError("payload_too_large", "The request body is too large.");
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > limit) throw new AppError("payload_too_large", "The request body is too large.");
      chunks.push(chunk as Buffer);
    }
  } catch (error) {
    if (error instanceof AppError) throw error;
    // The client went away in the middle of its body: the request's fault, not a 500 of ours.
    throw new AppError("bad_request", "The request body could not be read.");
  }
  return Buffer.concat(chunks);
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
