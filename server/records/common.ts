// Response envelopes of the contract: a single record is {data}, a list is {data, meta}.
import { z } from "zod";

export const messageResponse = z.object({ message: z.string() }).meta({ id: "StatusMessage" });

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

/** What a page of a log (newest first) asks for: at most `limit` entries older than the entry `before`. */
export type LogPage = { limit?: number | undefined; before?: string | undefined };
export const LOG_PAGE_DEFAULT = 50;

/** A page read with one row more than `limit`: the rows to show, and the cursor to the next (older) page. */
export function pageOf<Row extends { id: string }>(rows: Row[], limit: number) {
  const shown = rows.length > limit ? rows.slice(0, limit) : rows;
  return { shown, nextCursor: rows.length > limit ? shown.at(-1)!.id : null };
}
