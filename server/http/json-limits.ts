// Limits on the JSON the service reads, checked before anything parses it, at every door: REST
// bodies (body.ts), tRPC over HTTP (bodies, `?input=`, `?connectionParams=`: host.ts) and tRPC
// over WebSocket (frames and connection params: trpc-websocket.ts). The size limit is the
// readers' own (MAX_JSON_BODY_BYTES, the WebSocket MAX_PAYLOAD_BYTES); this file bounds depth.
//
// Why: JSON.parse copes with any depth, but much of what runs after it recurses (the REST
// adapter re-serialises the body with JSON.stringify, zod walks the value, loggers format it):
// a body nested 5,000 levels deep overflowed the stack there and answered 500.
import { AppError } from "../errors.ts";

/** How deeply the arrays and objects of a procedure's input may nest; `{}` and `[]` are depth 1. */
export const MAX_JSON_DEPTH = 64;

export const JSON_TOO_DEEP_MESSAGE = `The JSON in the request must not nest more than ${MAX_JSON_DEPTH} levels deep.`;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * True when the arrays and objects of `text` nest more than `maxDepth` deep. One pass over the
 * text, no recursion, no allocation; brackets inside strings (escaped quotes included) do not
 * count. It stops at the first level too many. Malformed JSON is not its business: JSON.parse
 * refuses that afterwards, as before.
 */
export function jsonNestsDeeperThan(text: string, maxDepth: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const code = text.charCodeAt(i);
    if (code === QUOTE) {
      // Skip the string: a backslash escapes the next character, whatever it is.
      for (i++; i < length; i++) {
        const inner = text.charCodeAt(i);
        if (inner === BACKSLASH) i++;
        else if (inner === QUOTE) break;
      }
    } else if (code === OPEN_BRACKET || code === OPEN_BRACE) {
      if (++depth > maxDepth) return true;
    } else if (code === CLOSE_BRACKET || code === CLOSE_BRACE) {
      depth--;
    }
  }
  return false;
}

/** Whether a text holds a JSON array at its top (a batch of requests), looking past JSON whitespace only. */
export function startsWithJsonArray(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d) continue;
    return code === OPEN_BRACKET;
  }
  return false;
}

/**
 * A JSON request body or form value, parsed: 400 `{message}` when it nests too deep or is
 * malformed. (Its size was bounded by whoever read it.)
 */
export function parseJsonWithinLimits(text: string, malformedMessage = "Malformed JSON in the request body."): unknown {
  if (jsonNestsDeeperThan(text)) throw new AppError("bad_request", JSON_TOO_DEEP_MESSAGE);
  try {
    return JSON.parse(text);
  } catch {
    throw new AppError("bad_request", malformedMessage);
  }
}
