// Input rules shared by several procedures (limits from the API document's Limits table).
import { z } from "zod";
import { LANGUAGES } from "../db/schema/index.ts";

// Like Laravel's TrimStrings middleware, names and e-mails are trimmed before the rules run
// (so "   " is a missing name); passwords are taken exactly as sent.
export const emailInput = z.string().trim().pipe(z.email().max(255));
export const nameInput = (max: number) => z.string().trim().min(1).max(max);
export const passwordInput = z.string().min(8).max(255);
export const languageInput = z.enum(LANGUAGES);
export const deviceNameInput = z.string().max(255);
export const httpUrlInput = z.url({ protocol: /^https?$/ }).max(2048);

/** Laravel's `confirmed` rule: a differing confirmation is an error on the password field. */
export function passwordConfirmed(value: { password: string; password_confirmation: string }, ctx: z.RefinementCtx) {
  if (value.password !== value.password_confirmation) {
    ctx.addIssue({ code: "custom", path: ["password"], message: "The password field confirmation does not match." });
  }
}

export { booleanInput } from "../server/validation.ts";

/**
 * Workspace and channel slugs: letters, digits, dashes, underscores; at most 80. Lower-cased,
 * so "Acme" and "acme" are the same slug. (The pattern admits "" so that an empty slug is
 * reported once, as required.)
 */
export const slugInput = z
  .string()
  .trim()
  .toLowerCase()
  .min(1)
  .max(80)
  .regex(/^[a-z0-9_-]*$/, "The :attribute field must only contain letters, numbers, dashes, and underscores.");

/** Workspace and channel passwords: 8 to 120 characters. */
export const joinPasswordInput = z.string().min(8).max(120);

/** The largest value of a PostgreSQL `integer` column: the largest id a user can have. */
export const MAX_INTEGER_ID = 2_147_483_647;

const DIGITS = /^\d+$/;

/** The id `value` names, when it can be one: a whole number 1..MAX_INTEGER_ID, or its digits. */
function integerIdOf(value: number | string): number | undefined {
  const id = typeof value === "number" ? value : DIGITS.test(value) ? Number(value) : Number.NaN;
  return Number.isInteger(id) && id >= 1 && id <= MAX_INTEGER_ID ? id : undefined;
}

const integerIdError = (issue: { input?: unknown }) =>
  issue.input === undefined || issue.input === null
    ? "The :attribute field is required."
    : "The :attribute field must be an integer.";

/**
 * An integer from `min` to `max` in a body or a query, as Laravel's `integer` takes it: a number
 * or its digits. Anything else ("1e2", "0x10", true, [1], 1.5) is a 422 on the field, where the
 * REST door's coercion of plain number inputs would have read it as JavaScript's Number() does.
 */
export const boundedIntegerInput = (min: number, max: number) =>
  z
    .union([z.number(), z.string().regex(DIGITS)], { error: integerIdError })
    .transform(Number)
    .pipe(
      z.number().min(min).max(max).refine(Number.isInteger, { message: "The :attribute field must be an integer." }),
    );

/**
 * An integer id (a user id) sent in a body or a query: a number or a numeric string, 1 to
 * 2147483647 (PostgreSQL `integer`). Anything else is a 422 on the field. Every integer id
 * input uses this, or integerPathIdInput when the id is in the REST path.
 */
export const integerIdInput = boundedIntegerInput(1, MAX_INTEGER_ID);

/** No user (no row of any integer key) has id 0: ids start at 1. */
const NO_SUCH_ID = 0;

/**
 * An integer id in a REST path (`…/members/{user_id}`, `/auth/email/verify/{id}/…`): one that
 * cannot exist (out of range, not a number) names nothing, so it is answered as an unknown id
 * is, 404, and never reaches the database as something it cannot compare. A string-like zod
 * type, so trpc-to-openapi takes it as a path parameter and does not coerce it.
 */
export const integerPathIdInput = z
  .union([z.number(), z.string()], { error: integerIdError })
  .transform((value) => integerIdOf(value) ?? NO_SUCH_ID);

/** A user id as a number or a numeric string. */
export const userIdInput = integerIdInput;
