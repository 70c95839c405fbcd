// Prepared statements for the hot paths. drizzle builds a query's SQL text anew on every call
// and postgres.js sends unnamed statements that PostgreSQL parses and plans every time; a
// statement prepared here is built once per database handle (with `sql.placeholder` for its
// values) and PostgreSQL plans it once per connection. Use it only where a query runs on
// nearly every request: everything else stays plain drizzle.
import { fillPlaceholders, sql, type Query, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { rowsOf, type Database, type Executor } from "./client.ts";

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

type PostgresJsClient = { unsafe(text: string, params: unknown[], options: { prepare: boolean }): Promise<unknown[]> };
type PGliteClient = { query(text: string, params: unknown[]): Promise<{ rows: unknown[] }> };

/**
 * Runs one hand-written statement as a prepared statement, on either driver: for a statement
 * drizzle's builder cannot prepare as one query (a data-modifying CTE on the hottest path).
 * Pass timestamps as ISO strings and cast parameters in the SQL; rows come back as the driver
 * gives them, keyed by the names in the SQL.
 */
export async function runPrepared<Row>(db: Database, text: string, params: unknown[]): Promise<Row[]> {
  const client = (db as unknown as { $client: PostgresJsClient | PGliteClient }).$client;
  if ("unsafe" in client) return (await client.unsafe(text, params, { prepare: true })) as Row[];
  return (await client.query(text, params)).rows as Row[];
}

/** Renders drizzle `sql` to text and parameters (the same text for every call of one shape). */
const dialect = new PgDialect();

/**
 * A statement built with drizzle's `sql` (data-modifying CTEs) run as one prepared statement;
 * its first row.
 */
export async function runStatement<Row>(db: Executor, statement: SQL): Promise<Row | undefined> {
  return (await runStatementRows<Row>(db, statement))[0];
}

/** `runStatement`, all its rows. */
export async function runStatementRows<Row>(db: Executor, statement: SQL): Promise<Row[]> {
  // A transaction (no client of its own here) runs it as drizzle runs any statement.
  if ((db as { $client?: unknown }).$client === undefined) return rowsOf<Row>(await db.execute(statement));
  const { sql: text, params } = renderStatement(statement);
  return runPrepared<Row>(db as Database, text, params);
}

/**
 * A statement's text and parameters. Built with `sql.placeholder(name)` for its values, the
 * rendering can be kept and run again and again (`runRendered`), so that a statement the hottest
 * path runs is built once per shape instead of on every call.
 */
export function renderStatement(statement: SQL): Query {
  return dialect.sqlToQuery(statement);
}

/** A rendered statement run as one prepared statement with its placeholders' `values`; its first row. */
export async function runRendered<Row>(
  db: Database,
  query: Query,
  values: Record<string, unknown>,
): Promise<Row | undefined> {
  const [row] = await runPrepared<Row>(db, query.sql, fillPlaceholders(query.params, values));
  return row;
}

/**
 * A list as one parameter, for `= any(${arrayParam(ids)}::text[])` or `unnest(…::bigint[])`:
 * written as PostgreSQL's array literal, so it passes the same through postgres.js (whose array
 * serializer drizzle turns off) and PGlite. Every element is quoted; null is NULL.
 */
export function arrayParam(values: readonly (string | number | null)[]): SQL {
  return sql`${arrayLiteral(values)}`;
}

/** PostgreSQL's array literal of `values` (arrayParam's text), as a placeholder's value. */
export function arrayLiteral(values: readonly (string | number | null)[]): string {
  const elements = values.map((value) =>
    value === null ? "NULL" : `"${String(value).replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`,
  );
  return `{${elements.join(",")}}`;
}
