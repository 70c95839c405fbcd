// Database statements counted at the driver (db/statement-count.ts), for budget tests: what one
// request's scope ran (its X-Request-Id labels it), and what the whole process ran in a window.
import { randomBytes } from "node:crypto";
import type { StatementCounter, StatementRecord } from "../../db/statement-count.ts";
import type { TestServer } from "./server.ts";

export type CountedStatements = {
  count: number;
  statements: StatementRecord[];
  /** False when the ring buffer dropped some of the window's statements: `count` is then a floor. */
  complete: boolean;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function statementsOf(server: TestServer): StatementCounter {
  return server.app.database.statements;
}

/** A request id of our own (sent as X-Request-Id, it labels the request's statement scope). */
export function newRequestId(label = "req"): string {
  // Only an id of the characters the server keeps labels the scope (it replaces any other).
  return `${label.replace(/[^A-Za-z0-9._:@=+/-]/g, "-").slice(0, 100)}-${randomBytes(6).toString("hex")}`;
}

/**
 * The statements the scope of request `requestId` ran since `mark` (a `statementsOf(server).total()`
 * taken before sending it). Call it once the response is in: it waits until the scope has been
 * quiet for `settleMs`, so that work the request left running (not detached) is counted too.
 */
export async function countRequestStatements(
  server: TestServer,
  requestId: string,
  options: { mark?: number; settleMs?: number; maxWaitMs?: number } = {},
): Promise<CountedStatements> {
  const counter = statementsOf(server);
  const { mark = 0, settleMs = 50, maxWaitMs = 2_000 } = options;
  const deadline = Date.now() + maxWaitMs;
  let seen = counter.inScope(requestId, mark).count;
  for (;;) {
    await sleep(settleMs);
    const now = counter.inScope(requestId, mark).count;
    if (now === seen || Date.now() >= deadline) break;
    seen = now;
  }
  return counter.inScope(requestId, mark);
}

/**
 * Sends one request through `send` with a fresh X-Request-Id (pass `headers` on) and counts the
 * statements its scope ran. The response is returned as well, to check it succeeded.
 */
export async function measureRequest<Response>(
  server: TestServer,
  send: (headers: Record<string, string>) => Promise<Response>,
  label = "req",
): Promise<CountedStatements & { requestId: string; response: Response }> {
  const requestId = newRequestId(label);
  const mark = statementsOf(server).total();
  const response = await send({ "X-Request-Id": requestId });
  return { requestId, response, ...(await countRequestStatements(server, requestId, { mark })) };
}

/**
 * How many of the statements are not the token lookup: a request's own work, whether its token
 * was looked up or served from the process's memory (server/services/accounts/credential-watch.ts).
 */
export function besidesTokenLookup(counted: CountedStatements): number {
  return counted.statements.filter((statement) => !/^select "access_tokens"\./.test(statement.text)).length;
}

/** Every statement the server's database handle ran (all scopes, background included) during `windowMs`. */
export async function countIdleStatements(server: TestServer, windowMs: number): Promise<CountedStatements> {
  const counter = statementsOf(server);
  const mark = counter.total();
  await sleep(windowMs);
  return counter.since(mark);
}

/**
 * The statements for a failure message: each distinct text once, in order of first use, with how
 * many times and under which scopes it ran.
 */
export function describeStatements(counted: CountedStatements): string {
  const byText = new Map<string, { times: number; scopes: Set<string> }>();
  for (const { text, scope } of counted.statements) {
    const entry = byText.get(text) ?? { times: 0, scopes: new Set<string>() };
    entry.times += 1;
    entry.scopes.add(scope);
    byText.set(text, entry);
  }
  const lines = [...byText].map(
    ([text, { times, scopes }], index) => `  ${index + 1}. ${times}× [${[...scopes].join(", ")}] ${text}`,
  );
  if (!counted.complete) lines.push(`  (only the last ${counted.statements.length} are still in the ring buffer)`);
  return lines.join("\n");
}
