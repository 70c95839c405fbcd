// Prepared statements for the hot paths. drizzle builds a query's SQL text anew on every call
// and postgres.js sends unnamed statements that PostgreSQL parses and plans every time; a
// statement prepared here is built once per database handle (with `sql.placeholder` for its
// values) and PostgreSQL plans it once per connection. Use it only where a query runs on
// nearly every request: everything else stays plain drizzle.
import type { Database } from "./client.ts";

const statements = new WeakMap<Database, Map<string, unknown>>();

/** The statement `name` for this database, built by `build` on first use. */
export function prepared<T>(db: Database, name: string, build: (db: Database, name: string) => T): T {
  let byName = statements.get(db);
  if (!byName) {
    byName = new Map();
    statements.set(db, byName);
  }
  let statement = byName.get(name) as T | undefined;
  if (statement === undefined) {
    statement = build(db, name);
    byName.set(name, statement);
  }
  return statement;
}
