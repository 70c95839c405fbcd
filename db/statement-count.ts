// Counts every statement sent to the database, at the drivers, and attributes each to the async
// scope that sent it: `statementScope(label, fn)` (the HTTP host opens one per request, labelled
// by its request id, and one per WebSocket frame); outside any scope a statement is
// "background". Always on, so it must cost next to nothing: per statement an increment, a
// lookup of the scope and two writes into a ring buffer that keeps the last few thousand
// statements (their text as the driver had it: decoded and cut only when read).
//
// Where the statements are seen:
// - postgres.js: its `debug` option, which every connection calls as it builds each query it
//   sends (node_modules/postgres/src/connection.js `build`): pool queries, sql.begin's BEGIN,
//   statements and COMMIT/ROLLBACK, reserved connections, LISTEN's own connection (it copies the
//   options), and the array-type lookup each new connection runs. It is called synchronously in
//   the caller's async context when a connection is free; a query that had to wait for one is
//   built later from the socket's callback, in the context of whoever opened that connection. So
//   each query also carries the scope it was asked in (taken when it is first awaited), and that
//   scope wins (see attributePostgresQueries).
// - PGlite: its lowest entry point, execProtocolRawSync, through which query, exec, transaction
//   (BEGIN/COMMIT/ROLLBACK are simple queries) and the protocol methods all pass; each Execute
//   and each simple Query message in what it is handed counts as one statement.
import { AsyncLocalStorage } from "node:async_hooks";

/** The scope of statements run outside any `statementScope`. */
export const BACKGROUND_SCOPE = "background";

/** How much of a statement's text is kept for reading. */
export const STATEMENT_TEXT_LENGTH = 200;

const DEFAULT_CAPACITY = 2048;

const scopes = new AsyncLocalStorage<string>();

/** Runs `fn` (and all the async work it starts) with its statements recorded under `label`. */
export function statementScope<T>(label: string, fn: () => T): T {
  return scopes.run(label, fn);
}

/**
 * Runs `fn` outside any statement scope: for work that a request only wakes (a batch loop, a
 * timer, a flush) and that must not be counted as the request's. Timers, immediates and promise
 * callbacks set up inside `fn` stay outside too. Queries are lazy (drizzle's and postgres.js's
 * run when first awaited): await them inside `fn` (`detached(async () => { await q })`), not
 * outside it (`await detached(() => q)` would run `q` in the caller's scope).
 */
export function detached<T>(fn: () => T): T {
  return scopes.exit(fn);
}

/** The label of the scope running now, or BACKGROUND_SCOPE. */
export function currentStatementScope(): string {
  return scopes.getStore() ?? BACKGROUND_SCOPE;
}

export type StatementRecord = {
  /** Its number since the database was opened (0 for the first). */
  seq: number;
  scope: string;
  /** The first STATEMENT_TEXT_LENGTH characters, whitespace collapsed. */
  text: string;
};

export type StatementWindow = {
  /** How many statements were sent since the mark (whatever their scope: exact). */
  count: number;
  /** Those of them still held by the ring buffer, oldest first. */
  statements: StatementRecord[];
  /** The ring buffer still holds every statement sent since the mark. */
  complete: boolean;
};

/** The statements of one scope; `count` is exact only when `complete`. */
export type ScopeStatements = { count: number; statements: StatementRecord[]; complete: boolean };

/** A PGlite statement's text, kept undecoded: the protocol message and where its SQL starts. */
type MessageText = { message: Uint8Array; offset: number };

export class StatementCounter {
  private sent = 0;
  private readonly scopeRing: string[];
  private readonly textRing: (string | MessageText)[];

  constructor(private readonly capacity = DEFAULT_CAPACITY) {
    this.scopeRing = new Array<string>(capacity);
    this.textRing = new Array<string | MessageText>(capacity);
  }

  /** Records one statement sent (called by the driver hooks below). */
  record(text: string | MessageText, scope: string = currentStatementScope()): void {
    const slot = this.sent % this.capacity;
    this.scopeRing[slot] = scope;
    this.textRing[slot] = text;
    this.sent += 1;
  }

  /** Every statement sent since the database was opened. Also a mark for `since`. */
  total(): number {
    return this.sent;
  }

  /** What the ring buffer holds, oldest first. */
  log(): StatementRecord[] {
    return this.since(0).statements;
  }

  /** The statements sent since `mark` (an earlier `total()`). */
  since(mark: number): StatementWindow {
    const end = this.sent;
    const oldestHeld = Math.max(0, end - this.capacity);
    const statements: StatementRecord[] = [];
    for (let seq = Math.max(mark, oldestHeld); seq < end; seq++) statements.push(this.read(seq));
    return { count: end - mark, statements, complete: mark >= oldestHeld };
  }

  /** The statements recorded under `scope` since `mark` (0: since the start). */
  inScope(scope: string, mark = 0): ScopeStatements {
    const window = this.since(mark);
    const statements = window.statements.filter((statement) => statement.scope === scope);
    return { count: statements.length, statements, complete: window.complete };
  }

  private read(seq: number): StatementRecord {
    const slot = seq % this.capacity;
    return { seq, scope: this.scopeRing[slot]!, text: textOf(this.textRing[slot]!) };
  }
}

const decoder = new TextDecoder();

function textOf(kept: string | MessageText): string {
  let text: string;
  if (typeof kept === "string") {
    text = kept.slice(0, STATEMENT_TEXT_LENGTH * 4);
  } else {
    const { message, offset } = kept;
    const nul = message.indexOf(0, offset);
    const end = Math.min(nul === -1 ? message.length : nul, offset + STATEMENT_TEXT_LENGTH * 4);
    text = decoder.decode(message.subarray(offset, end));
  }
  return text.replace(/\s+/g, " ").trim().slice(0, STATEMENT_TEXT_LENGTH);
}

// --- postgres.js ---------------------------------------------------------------------------

/** The scope a postgres.js query was asked in, on the query. */
const QUERY_SCOPE = Symbol("statementScope");
const QUERY_STATEMENT = Symbol("statement");
const PATCHED = Symbol("statementScopePatched");

type PostgresQuery = {
  string?: string;
  executed?: boolean;
  handler?: { debug?: unknown };
  [QUERY_SCOPE]?: string;
};

/** The query whose statement postgres.js assigned last: `build` does so just before calling `debug`. */
let lastBuilt: PostgresQuery | undefined;

/**
 * The `debug` option for postgres.js: records each query a connection sends, under the scope it
 * was asked in (attributePostgresQueries), else under the scope running now.
 */
export function postgresStatementHook(counter: StatementCounter): (connection: number, text: string) => void {
  return (_connection, text) => {
    const query = lastBuilt;
    lastBuilt = undefined;
    const asked = query !== undefined && query.string === text ? query[QUERY_SCOPE] : undefined;
    counter.record(text, asked ?? currentStatementScope());
  };
}

/**
 * Makes every postgres.js query remember the statement scope it was asked in, so that one that
 * waited for a connection is still counted under it. postgres.js does not export its Query class:
 * its prototype is taken from an unsent query of `client`. Patched once per process; if a version
 * of postgres.js no longer has the members used here, nothing is patched and queries are
 * attributed by the async context `debug` is called in (right whenever a connection is free).
 *
 * It also takes back a cost of the `debug` option: with it, postgres.js captures a stack trace
 * (`new Error()`) for every query it makes, to append to a failed query's stack. Once a query of
 * a client (or of a transaction or a reserved connection: each has its own handler) is asked,
 * that handler's `debug` flag is cleared, so later queries are made as without the option
 * (counting needs only the connection's `options.debug`, which stays).
 */
export function attributePostgresQueries(client: { unsafe(text: string): unknown }): void {
  const prototype = Object.getPrototypeOf(client.unsafe("select 1")) as Record<PropertyKey, unknown>;
  if (prototype[PATCHED] || typeof prototype.handle !== "function" || "statement" in prototype) return;
  const handle = prototype.handle as (this: PostgresQuery) => unknown;
  Object.defineProperty(prototype, PATCHED, { value: true });
  Object.defineProperty(prototype, "handle", {
    configurable: true,
    writable: true,
    // Called by then/catch/finally/execute: the first call, in the caller's context, sends it.
    value: function (this: PostgresQuery) {
      if (!this.executed) {
        this[QUERY_SCOPE] = scopes.getStore() ?? BACKGROUND_SCOPE;
        if (this.handler?.debug) this.handler.debug = false;
      }
      return handle.call(this);
    },
  });
  Object.defineProperty(prototype, "statement", {
    configurable: true,
    get(this: { [QUERY_STATEMENT]?: unknown }) {
      return this[QUERY_STATEMENT];
    },
    set(this: PostgresQuery & { [QUERY_STATEMENT]?: unknown }, value: unknown) {
      this[QUERY_STATEMENT] = value;
      if (value !== null) lastBuilt = this;
    },
  });
}

// --- PGlite --------------------------------------------------------------------------------

const PARSE = 0x50; // 'P'
const EXECUTE = 0x45; // 'E'
const SIMPLE_QUERY = 0x51; // 'Q'

/**
 * Counts what PGlite executes: wraps `client.execProtocolRawSync` (everything PGlite runs passes
 * there, one or more frontend messages at a time). An Execute's text is that of the Parse before it.
 */
export function countPGliteStatements(
  client: { execProtocolRawSync(message: Uint8Array): Uint8Array },
  counter: StatementCounter,
): void {
  const run = client.execProtocolRawSync;
  let lastParse: MessageText | undefined;
  client.execProtocolRawSync = function (this: unknown, message: Uint8Array): Uint8Array {
    // Frontend messages: a type byte, then a 32-bit length that counts itself but not the type.
    // (A startup packet begins with 0 and has no type byte: it is not a statement.)
    let at = message[0] === 0 ? message.length : 0;
    while (at + 5 <= message.length) {
      const type = message[at]!;
      const length =
        ((message[at + 1]! << 24) | (message[at + 2]! << 16) | (message[at + 3]! << 8) | message[at + 4]!) >>> 0;
      if (type === SIMPLE_QUERY) counter.record({ message, offset: at + 5 });
      else if (type === PARSE) lastParse = { message, offset: message.indexOf(0, at + 5) + 1 };
      else if (type === EXECUTE) counter.record(lastParse ?? "(execute of an unknown statement)");
      at += 1 + Math.max(length, 4);
    }
    return run.call(this, message);
  };
}
