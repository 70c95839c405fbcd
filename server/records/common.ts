// Response envelopes of the contract: a single record is {data}, a list is {data, meta}.
import { z } from "zod";

export const messageResponse = z.object({ message: z.string() });

export const timestamp = z.string().describe("ISO 8601 timestamp with UTC offset");

export function dataOf<T extends z.ZodType>(record: T) {
  return z.object({ data: record });
}

export function listOf<T extends z.ZodType>(record: T) {
  return z.object({ data: z.array(record), meta: z.object({ total: z.number().int() }) });
}

export function listResponse<T>(data: T[]) {
  return { data, meta: { total: data.length } };
}
