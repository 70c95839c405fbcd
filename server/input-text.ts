// Text the database cannot hold is refused before it gets there: PostgreSQL's text refuses NUL
// (U+0000), and its JSON (the event outbox, jsonb) refuses lone UTF-16 surrogates. Every
// procedure's raw input passes findUnsafeText (the middleware in server/trpc.ts), whatever
// door it came through: REST bodies, path and query values (trpc-to-openapi merges them into
// the input), tRPC over HTTP, WebSocket and SSE.
import { z } from "zod";
import type { AppError } from "./errors.ts";
import { validationErrorFromZod } from "./validation.ts";

/** NUL, a high surrogate not followed by a low one, or a low surrogate not after a high one. */
const UNSAFE_TEXT = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export const UNSAFE_TEXT_MESSAGE = "The :attribute field contains characters that are not allowed.";

/** True when `text` holds no NUL and no lone surrogate. */
export function isSafeText(text: string): boolean {
  return !UNSAFE_TEXT.test(text);
}

/** At most this many fields are reported; one is enough to refuse the request. */
const MAX_REPORTED = 20;

type Node = { value: unknown; key: string | number | undefined; parent: Node | undefined };

function pathOf(node: Node | undefined): (string | number)[] {
  const path: (string | number)[] = [];
  for (let at = node; at?.key !== undefined; at = at.parent) path.push(at.key);
  return path.reverse();
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/**
 * The paths of the strings in `input` (plain objects and arrays, walked without recursion,
 * however deep) that hold NUL or a lone surrogate; an object key that does is reported at its
 * object. In document order, at most MAX_REPORTED.
 */
export function findUnsafeText(input: unknown): (string | number)[][] {
  const found: (string | number)[][] = [];
  const stack: Node[] = [{ value: input, key: undefined, parent: undefined }];
  const seen = new Set<object>();
  while (stack.length > 0 && found.length < MAX_REPORTED) {
    const node = stack.pop()!;
    const { value } = node;
    if (typeof value === "string") {
      if (!isSafeText(value)) found.push(pathOf(node));
      continue;
    }
    if (typeof value !== "object" || value === null || seen.has(value)) continue;
    seen.add(value);
    if (Array.isArray(value)) {
      for (let index = value.length - 1; index >= 0; index--)
        stack.push({ value: value[index], key: index, parent: node });
    } else if (isPlainObject(value)) {
      const keys = Object.keys(value);
      if (keys.some((key) => !isSafeText(key))) found.push(pathOf(node));
      for (let index = keys.length - 1; index >= 0; index--)
        stack.push({ value: value[keys[index]!], key: keys[index]!, parent: node });
    }
  }
  return found;
}

/** The 422 for an input with unsafe text, keyed like every other field error (`content`, `attachment_ids.0`). */
export function unsafeTextError(paths: (string | number)[][]): AppError {
  return validationErrorFromZod(
    new z.ZodError(
      paths.map((path) => ({ code: "custom" as const, path, message: UNSAFE_TEXT_MESSAGE, input: undefined })),
    ),
  );
}
