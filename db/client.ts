// The database: PostgreSQL through postgres.js when DATABASE_URL is set, otherwise PGlite
// (real Postgres compiled to WASM) under DATA_DIR, so a bare `npm start` needs nothing else.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import * as schema from "./schema/index.ts";
import {
  attributePostgresQueries,
  countPGliteStatements,
  postgresStatementHook,
  StatementCounter,
} from "./statement-count.ts";

/**
 * postgres.js runs a statement as a prepared statement only with parameters: without any it
 * sends the simple protocol, which PostgreSQL parses and plans on every run. `simple: false`
 * (an option its source reads, not in its types) keeps a parameterless statement prepared.
 */
const PREPARED = { prepare: true, simple: false } as { prepare: true };

export type Schema = typeof schema;
export type Database = PgDatabase<PgQueryResultHKT, Schema>;
/** A transaction handle; services accept `Database | Transaction` where they may run inside one. */
export type Transaction = Parameters<Parameters<Database["transaction"]>[0]>[0];
export type Executor = Database | Transaction;

/** One connection of one's own, for session state such as an advisory lock (the event relay's). */
export type DbSession = {
  query<Row>(text: string, params: unknown[]): Promise<Row[]>;
  release(): void;
};

export type DatabaseHandle = {
  db: Database;
  driver: "postgres" | "pglite";
  /** A dedicated connection (PGlite has only one: it is shared, and nothing else can hold a lock). */
  session(): Promise<DbSession>;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  /** LISTEN on a channel (NOTIFY from any connection, any process); resolves with a function that stops. */
  listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
  /** Every statement sent on any connection, by scope (db/statement-count.ts). */
  statements: StatementCounter;
  close(): Promise<void>;
};

/** The rows of a raw `execute()`: postgres.js answers them as an array, PGlite as `{rows}`. */
export function rowsOf<Row>(result: unknown): Row[] {
  return Array.isArray(result) ? (result as Row[]) : (result as { rows: Row[] }).rows;
}

/** A json column of a raw `execute()` row: parsed by the driver, or still its text. */
export function jsonOf<T>(value: unknown): T {
  return (typeof value === "string" ? JSON.parse(value) : value) as T;
}

export const MIGRATIONS_FOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");

// Any fixed number: every server process takes the same lock so only one migrates at a time.
const MIGRATION_LOCK_ID = 72_410_031;

export async function openDatabase(options: {
  databaseUrl: string | undefined;
  dataDir: string;
}): Promise<DatabaseHandle> {
  if (options.databaseUrl) {
    const { default: postgres } = await import("postgres");
    const { drizzle } = await import("drizzle-orm/postgres-js");
    const { migrate } = await import("drizzle-orm/postgres-js/migrator");
    const statements = new StatementCounter();
    const client = postgres(options.databaseUrl, {
      max: 10,
      onnotice: () => {},
      // Short OLTP statements: JIT compiling a statement the planner prices high (the channel
      // list's capped counts, a push audience) costs more than running it (docs/performance.md).
      connection: { jit: "off" },
      debug: postgresStatementHook(statements),
    });
    attributePostgresQueries(client);
    const db = drizzle(client, { schema, casing: "snake_case" });
    // Several processes may start together against one database: serialize migrations.
    const lockConnection = await client.reserve();
    try {
      await lockConnection`select pg_advisory_lock(${MIGRATION_LOCK_ID})`;
      await migrate(db, { migrationsFolder: MIGRATIONS_FOLDER });
    } finally {
      await lockConnection`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`;
      lockConnection.release();
    }
    return {
      db: db as unknown as Database,
      driver: "postgres",
      session: async () => {
        const reserved = await client.reserve();
        return {
          query: async <Row>(text: string, params: unknown[]) =>
            (await reserved.unsafe(text, params as never[], PREPARED)) as unknown as Row[],
          release: () => reserved.release(),
        };
      },
      ping: async () => {
        await client`select 1`;
      },
      statements,
      listen: async (channel, onNotify) => {
        const { unlisten } = await client.listen(channel, () => onNotify());
        return unlisten;
      },
      close: () => client.end({ timeout: 5 }),
    };
  }

  const { PGlite } = await import("@electric-sql/pglite");
  const { drizzle } = await import("drizzle-orm/pglite");
  const { migrate } = await import("drizzle-orm/pglite/migrator");
  const directory = path.join(options.dataDir, "pglite");
  mkdirSync(directory, { recursive: true });
  const client = await PGlite.create(directory);
  const statements = new StatementCounter();
  countPGliteStatements(client, statements);
  const db = drizzle(client, { schema, casing: "snake_case" });
  await migrate(db, { migrationsFolder: MIGRATIONS_FOLDER });
  return {
    db: db as unknown as Database,
    driver: "pglite",
    session: async () => ({
      query: async <Row>(text: string, params: unknown[]) => (await client.query<Row>(text, params)).rows,
      release: () => {},
    }),
    ping: async () => {
      await db.execute(sql`select 1`);
    },
    statements,
    listen: async (channel, onNotify) => {
      const unlisten = await client.listen(channel, () => onNotify());
      return unlisten;
    },
    close: () => client.close(),
  };
}
