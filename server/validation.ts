// Turns zod issues into the document's 422 body: {message, errors: {field: [text]}}, keyed by
// the request's own field names (nested ones dotted: attachment_ids.0), with Laravel-style
// sentences, so REST clients written against a Laravel API read familiar messages.
import { z } from "zod";
import { VALIDATION_MESSAGE, AppError, type FieldErrors } from "./errors.ts";

type RawIssue = z.core.$ZodRawIssue;

const sizeUnit = (origin: unknown) => (origin === "string" ? " characters" : origin === "array" ? " items" : "");

/**
 * Messages carry ":attribute" where the field's name goes; toFieldErrors fills it in from
 * the issue's path, since the path is only complete once parsing has finished.
 */
function laravelMessage(issue: RawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      if (issue.input === undefined || issue.input === null) return "The :attribute field is required.";
      if (issue.expected === "string") return "The :attribute field must be a string.";
      if (issue.expected === "number" || issue.expected === "int") return "The :attribute field must be a number.";
      if (issue.expected === "boolean") return "The :attribute field must be true or false.";
      if (issue.expected === "array") return "The :attribute field must be an array.";
      if (issue.expected === "object") return "The :attribute field must be an object.";
      return `The :attribute field must be of type ${issue.expected}.`;
    case "too_small":
      if (issue.origin === "string" && Number(issue.minimum) === 1) return "The :attribute field is required.";
      return `The :attribute field must be at least ${issue.minimum}${sizeUnit(issue.origin)}.`;
    case "too_big":
      return `The :attribute field must not be greater than ${issue.maximum}${sizeUnit(issue.origin)}.`;
    case "invalid_format":
      if (issue.format === "email") return "The :attribute field must be a valid email address.";
      if (issue.format === "url") return "The :attribute field must be a valid URL.";
      if (issue.format === "regex") return "The :attribute field format is invalid.";
      return "The :attribute field format is invalid.";
    case "invalid_value":
      if (issue.input === undefined) return "The :attribute field is required.";
      return "The selected :attribute is invalid.";
    case "not_multiple_of":
      return `The :attribute field must be a multiple of ${issue.divisor}.`;
    case "unrecognized_keys":
      return undefined;
    default:
      return undefined;
  }
}

let installed = false;
/** Installs the message templates for every zod schema in the process (idempotent). */
export function installValidationMessages(): void {
  if (installed) return;
  installed = true;
  z.config({ customError: (issue) => laravelMessage(issue) });
}
installValidationMessages();

function fieldKey(path: PropertyKey[]): string {
  return path.map(String).join(".");
}

function attributeName(path: PropertyKey[]): string {
  const last = [...path].reverse().find((segment) => typeof segment === "string");
  return typeof last === "string" ? last.replace(/_/g, " ") : "input";
}

export function toFieldErrors(error: z.ZodError): FieldErrors {
  const errors: FieldErrors = {};
  for (const issue of error.issues) {
    const key = fieldKey(issue.path) || "body";
    const text = issue.message.replace(/:attribute/g, attributeName(issue.path));
    (errors[key] ??= []).push(text);
  }
  return errors;
}

export function validationErrorFromZod(error: z.ZodError): AppError {
  return new AppError("validation", VALIDATION_MESSAGE, { errors: toFieldErrors(error) });
}

/**
 * Laravel's `boolean` rule: true, false, 1, 0, "1", "0" (and "true"/"false" for query strings).
 * Use this, never a bare z.boolean(): trpc-to-openapi switches on zod's coercion for
 * top-level boolean fields, and coercion makes the string "false" true. A union is left alone.
 */
export const booleanInput = z
  .union([z.boolean(), z.literal(1), z.literal(0), z.enum(["1", "0", "true", "false"])])
  .transform((value) => value === true || value === 1 || value === "1" || value === "true");
