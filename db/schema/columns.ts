// Column types shared by the schema: one set of timestamp columns (house style 7: timestamptz
// everywhere), and text compared byte by byte.
import { customType, timestamp } from "drizzle-orm/pg-core";

export const timestamptz = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

export const timestamps = {
  createdAt: timestamptz("created_at").notNull().defaultNow(),
  updatedAt: timestamptz("updated_at").notNull().defaultNow(),
};

/**
 * `text[]` whose elements compare byte by byte (collation "C"), for keys only ever matched for
 * equality: an index of them skips the locale's comparison (a GIN index's inserts cost about a
 * fifth less than with the database's default collation, docs/performance.md).
 */
export const byteOrderedTextArray = customType<{ data: string[] }>({ dataType: () => 'text[] collate "C"' });
