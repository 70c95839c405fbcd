// Unit tests of the zod-to-Laravel message mapping and the boolean input rule.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { booleanInput } from "../routers/inputs.ts";
import { toFieldErrors } from "../server/validation.ts";

const errorsOf = (schema: z.ZodType, input: unknown) => {
  const result = schema.safeParse(input);
  if (result.success) throw new Error("expected a validation failure");
  return toFieldErrors(result.error);
};

describe("validation messages", () => {
  const schema = z.object({
    display_name: z.string().min(1).max(5),
    email: z.email(),
    count: z.number().int().min(1).max(365),
    tags: z.array(z.string()).max(2).optional(),
    kind: z.enum(["a", "b"]),
    nested: z.object({ inner_value: z.string() }).optional(),
  });

  it("names the field with underscores as spaces and keys nested fields with dots", () => {
    expect(
      errorsOf(schema, {
        display_name: "toolong",
        email: "x",
        count: 0,
        tags: ["a", 1],
        kind: "c",
        nested: { inner_value: 3 },
      }),
    ).toEqual({
      display_name: ["The display name field must not be greater than 5 characters."],
      email: ["The email field must be a valid email address."],
      count: ["The count field must be at least 1."],
      "tags.1": ["The tags field must be a string."],
      kind: ["The selected kind is invalid."],
      "nested.inner_value": ["The inner value field must be a string."],
    });
  });

  it("says required for missing fields, empty strings and missing enum values", () => {
    expect(errorsOf(schema, { display_name: "", count: 366, tags: ["a", "b", "c"] })).toEqual({
      display_name: ["The display name field is required."],
      email: ["The email field is required."],
      count: ["The count field must not be greater than 365."],
      tags: ["The tags field must not be greater than 2 items."],
      kind: ["The kind field is required."],
    });
  });
});

describe("booleanInput", () => {
  it("accepts Laravel's boolean values", () => {
    for (const [input, expected] of [
      [true, true],
      [false, false],
      [1, true],
      [0, false],
      ["1", true],
      ["0", false],
      ["true", true],
      ["false", false],
    ] as const) {
      expect(booleanInput.parse(input)).toBe(expected);
    }
  });

  it("rejects anything else", () => {
    for (const input of ["yes", 2, "", null, {}]) expect(booleanInput.safeParse(input).success).toBe(false);
  });
});
