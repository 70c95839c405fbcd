// `npm run bench -- presence` (only when named): what presence (docs/presence.md,
// server/services/presence/) costs with many live connections coming and going. The issue:
// "5,000 signed-in sockets on one server, 1,000 of them each watching 50 users, 100 connects and
// 100 disconnects per second for a minute. Report the watchers' event delay p50/p99, Redis
// commands per connect, PostgreSQL statements in the minute, and the memory per idle socket
// against the same run without presence. Targets: event p99 under 2 s plus the grace window;
// PostgreSQL at most one statement per second; idle socket memory within 1 KiB of the run
// without presence."
//
// The server (startBenchServer: its own process, with the inspector for heap readings) runs with
// PRESENCE_OFFLINE_AFTER_SECONDS = BENCH_PRESENCE_OFFLINE_AFTER (2; the default of 30 would
// show no offline event in a minute). On PostgreSQL, each server gets a FRESH database (created
// next to DATABASE_URL's, dropped afterwards; DATABASE_URL's own if it cannot be created); on
// PGlite, a DATA_DIR of its own. Before the server starts, this process opens that database with
// the checkout's own openDatabase (which migrates it) and writes, in SQL, BENCH_PRESENCE_SOCKETS
// (5000) users, one sign-in access token each (random `chat_…` plaintexts, stored as their
// SHA-256 as the service stores them, so the server accepts them as it accepts any) and one
// workspace they all belong to (workspace_members rows): registering 5,000 accounts over REST
// would hash 5,000 passwords (Argon2id). Every user shares the workspace, so every watcher may
// see everyone it watches.
//
// Sockets are bare `ws` sockets to /trpc?connectionParams=1 whose first frame is the sign-in
// (connection params {token}), in the frames of server/http/trpc-ws-protocol.ts, one user each;
// they answer the server's PINGs. Socket i belongs to user i; the first BENCH_PRESENCE_WATCHERS
// (1000) are the watchers (never closed), the others churn.
//
// 1. Memory per idle socket. After a warm-up (200 sockets, or all when fewer, signed in, a query
//    each, closed), a full GC through the inspector and RSS averaged over 2 s (as the `idle`
//    section does); then all the sockets signed in, each proven by one query (me.get), and the
//    same reading: heap and RSS per socket = (with sockets − before) / sockets. The same is measured on a server
//    WITHOUT presence: the service as of the commit before presence was added (HEAD while presence
//    is uncommitted; once it is committed, the parent of the commit that added
//    server/services/presence/presence.ts), exported with `git archive` (read-only: nothing in
//    this repository's index, stash or work tree changes) into a temporary directory with a
//    symlink to this checkout's node_modules, or the checkout named by BENCH_PRESENCE_BEFORE.
//    There is no switch to turn presence off, and signing sockets in without a token would not be
//    the same socket: an older build of the same service is the honest "without". It also lacks
//    every other uncommitted change of the work tree (the remembered sign-ins of
//    server/services/accounts/credential-watch.ts among them): the difference is that of the
//    whole uncommitted change. Target: heap per socket with presence at most 1 KiB above without.
// 2. Watchers. The watchers each subscribe to presence.onUsers with BENCH_PRESENCE_WATCHED (50)
//    users drawn at random (a fixed seed) from the churning users; the first events (one per
//    user, their state now) must all say `online`. Then BENCH_PRESENCE_IDLE_SECONDS (10) with
//    nothing changing: the background Redis commands and PostgreSQL statements of a server at rest.
// 3. Churn, for BENCH_PRESENCE_SECONDS (60): every second, BENCH_PRESENCE_RATE (100) churning
//    sockets that have been open at least a second are closed, and those due come back (a new
//    socket, signed in with the same token): half of the closed ones after 1 s ("a phone that
//    drops and comes back": inside the grace window, so nothing should change for watchers),
//    the other half after BENCH_PRESENCE_AWAY_SECONDS (4): longer than the grace window, so the
//    user turns offline, then online again, and their watchers get both events. In steady state
//    that is 100 connects and 100 disconnects a second. (The away time is kept under the 5 s for
//    which the credential watch remembers a closed connection's sign-in: a reconnect after that
//    looks its token up, a statement that is sign-in's, not presence's. Longer away times show it.)
//    After the minute, the sockets still away come back on time and the events are awaited.
//
// Event delay: what each watcher should see is worked out from what this process did, per user:
// a close not followed by a reconnect within the grace window is an `offline` due at close +
// grace; a reconnect after that is an `online` due when its sign-in frame was sent. A received
// event is matched to the first such change of its user still owed to that watcher, of the same
// status, due no later than it arrived: delay = arrival − due (for `offline`, after the close
// plus the grace window). An event matching nothing owed is "unexpected" (a reconnect inside the
// window must send none); an owed change never received is "missed" and counts as an infinite
// delay in the percentiles. A change due within 300 ms of the window's end is optional. Target:
// p99 under 2 s (i.e. offline events within grace + 2 s of the close).
//
// Redis (with REDIS_URL): MONITOR on a connection of this process, counting only commands from
// the server process's own connections (their ports read from /proc/<pid>/fd and /proc/net/tcp:
// the Redis may be shared), and the commands its Lua scripts run (MONITOR shows them as `lua`
// right after the script's own line). Per connect or disconnect: the minute's commands less the
// background rate of step 2 over the same time, divided by the connects and disconnects in it.
// PostgreSQL: the server's own statement counter (db/statement-count.ts, every statement at the
// driver), read through a probe this bench loads into the server process (`--import` of a small
// module that remembers the StatementCounter and answers its counts on a port of 127.0.0.1); in
// the minute, with the texts of the statements. Target: at most one a second.
//
//   BENCH_PRESENCE_SOCKETS        signed-in sockets, one user each (5000)
//   BENCH_PRESENCE_WATCHERS       of them watching (1000)
//   BENCH_PRESENCE_WATCHED        users each watcher watches (50)
//   BENCH_PRESENCE_RATE           disconnects (and reconnects) a second (100)
//   BENCH_PRESENCE_SECONDS        length of the churn (60)
//   BENCH_PRESENCE_OFFLINE_AFTER  the server's PRESENCE_OFFLINE_AFTER_SECONDS (2)
//   BENCH_PRESENCE_AWAY_SECONDS   how long the long drops stay away (4; more than the grace window + 1)
//   BENCH_PRESENCE_IDLE_SECONDS   the quiet window before the churn (10)
//   BENCH_PRESENCE_BEFORE         a checkout without presence (with node_modules) for the memory baseline;
//                                 "skip": no baseline
//
// Reading the numbers: the sockets, the watchers' parsing and the MONITOR parsing run in this
// process on the same two cores as the server, PostgreSQL and Redis; a delay includes waiting for
// a core. Heap readings are after a full GC; RSS also holds memory the allocator keeps.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import { connect as netConnect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { sql, type SQL } from "drizzle-orm";
import WebSocket from "ws";
import { rowsOf } from "../db/client.ts";
import { clientFrames, PING, PONG } from "../server/http/trpc-ws-protocol.ts";
import {
  envNumber,
  freePort,
  freshDatabase,
  mapLimit,
  openTrpcSocket,
  percentile,
  ROOT,
  round,
  seeded as seededRandom,
  settledMemory,
  sleep,
  startBenchServer,
  startUsageWindow,
  TrpcRequests,
  type BenchServer,
  type MemoryReading,
} from "./lib.ts";

const SOCKETS = Math.min(20_000, Math.floor(envNumber("BENCH_PRESENCE_SOCKETS", 5000)));
const WATCHERS = Math.min(SOCKETS - 1, Math.floor(envNumber("BENCH_PRESENCE_WATCHERS", 1000)));
const WATCHED = Math.min(500, SOCKETS - WATCHERS, Math.floor(envNumber("BENCH_PRESENCE_WATCHED", 50)));
const RATE = Math.min(1000, Math.floor(envNumber("BENCH_PRESENCE_RATE", 100)));
const SECONDS = Math.min(600, Math.floor(envNumber("BENCH_PRESENCE_SECONDS", 60)));
const GRACE_S = Math.min(600, Math.floor(envNumber("BENCH_PRESENCE_OFFLINE_AFTER", 2)));
const AWAY_S = Math.max(GRACE_S + 1, Math.round(envNumber("BENCH_PRESENCE_AWAY_SECONDS", 4)));
const IDLE_S = Math.min(120, envNumber("BENCH_PRESENCE_IDLE_SECONDS", 10));
const BEFORE = process.env.BENCH_PRESENCE_BEFORE || undefined;
/** A short drop comes back after this long (a phone changing networks). */
const SHORT_AWAY_MS = 1000;
const GRACE_MS = GRACE_S * 1000;
const WARM_UP_SOCKETS = 200;
/** A change due this close to the edge of the grace window may or may not be sent. */
const EDGE_MS = 300;
/** Timer slack: a grace timer fires a millisecond after its end, the server's clock ticks in ms. */
const SLACK_MS = 5;
/** After the last change is due, the longest wait for its events. */
const DRAIN_AFTER_MS = 5000;

export const TARGET_P99_MS = 2000;
export const TARGET_STATEMENTS_PER_S = 1;
export const TARGET_MEMORY_KIB = 1;

// ---------------------------------------------------------------------------------------------
// Results

export type DelayRow = {
  kind: "online" | "offline" | "all";
  expected: number;
  received: number;
  missed: number;
  p50_ms: number | null;
  p99_ms: number | null;
  max_ms: number | null;
};

export type MemoryRow = {
  server: "with presence" | "without presence";
  code: string;
  sockets: number;
  heap_before_mib: number;
  heap_with_sockets_mib: number;
  heap_kib_per_socket: number;
  rss_before_mib: number;
  rss_with_sockets_mib: number;
  rss_kib_per_socket: number;
};

export type PresenceResult = {
  settings: {
    sockets: number;
    watchers: number;
    watched_each: number;
    rate_per_s: number;
    seconds: number;
    offline_after_s: number;
    short_away_s: number;
    long_away_s: number;
    database: "postgres" | "pglite";
    fresh_database: boolean;
    redis: boolean;
  };
  churn: {
    connects: number;
    disconnects: number;
    long_drops: number;
    connect_errors: number;
    late_ticks: number;
    server_cpu_pct: number;
    bench_cpu_pct: number;
    stores_cpu_pct: number;
    other_cpu_pct: number;
  };
  snapshot: { expected: number; received: number; online: number; subscribe_errors: number };
  events: {
    rows: DelayRow[];
    unexpected: number;
    unexpected_samples: string[];
    missed_samples: string[];
    /** Offline events measured from the close itself (grace included). */
    offline_from_close_p50_ms: number | null;
    offline_from_close_p99_ms: number | null;
  };
  redis: {
    churn_commands: number;
    churn_script_runs: number;
    churn_commands_in_scripts: number;
    idle_commands_per_s: number;
    idle_commands_in_scripts_per_s: number;
    commands_per_change: number;
    commands_with_scripts_per_change: number;
    by_command: Record<string, number>;
  } | null;
  postgres: {
    statements_in_window: number;
    per_s: number;
    idle_statements: number;
    idle_seconds: number;
    by_text: { count: number; scopes: string; text: string }[];
    texts_complete: boolean;
  } | null;
  memory: {
    rows: MemoryRow[];
    heap_kib_difference: number | null;
    rss_kib_difference: number | null;
    without_presence: string;
    /** Heap after the churn against before it (same sockets and subscriptions), per connect or disconnect. */
    heap_growth_bytes_per_change: number | null;
    /** The same growth per event the watchers received, and how much of it their unsubscribing freed (MiB). */
    heap_growth_bytes_per_event: number | null;
    heap_growth_mib: number | null;
    heap_freed_on_unsubscribe_mib: number | null;
    /** The server's heap (after a full GC) along the run with presence, MiB. */
    heap_along_the_run: { stage: string; heap_mib: number; rss_mib: number }[];
  };
  targets: {
    event_p99_under_2s: boolean;
    postgres_at_most_1_per_s: boolean | null;
    memory_within_1kib: boolean | null;
    snapshot_all_online: boolean;
  };
  notes: string[];
};

// ---------------------------------------------------------------------------------------------
// Sockets

type Frame = { id?: number | null; result?: { type?: string; data?: unknown }; error?: { message?: string } };
type PresenceEventData = {
  type?: string;
  data?: { presence?: { user_id: number; status: string; last_seen_at: string | null } };
};

/** A bare `ws` socket speaking the tRPC WebSocket protocol, signed in by its first frame. */
class LiveSocket {
  private readonly requests: TrpcRequests;
  /** When the sign-in frame was sent (performance.now()). */
  signedInAt = 0;
  /** Presence events of the subscription (id 1 when subscribed). */
  onEvent: ((userId: number, status: string, lastSeenAt: string | null) => void) | undefined;
  errors = 0;
  /** When it closed (performance.now()), if it did. */
  closedAt: number | undefined;

  private constructor(readonly socket: WebSocket) {
    this.requests = new TrpcRequests(socket);
    socket.on("message", (data: Buffer, isBinary: boolean) => this.onFrame(data, isBinary));
    socket.on("close", () => {
      this.closedAt = performance.now();
      this.requests.rejectAll("socket closed");
    });
    socket.on("error", () => {});
  }

  static open(baseUrl: string, token: string): Promise<LiveSocket> {
    return openTrpcSocket(baseUrl, token, (socket) => {
      const live = new LiveSocket(socket);
      live.signedInAt = performance.now();
      return live;
    });
  }

  get open(): boolean {
    return this.socket.readyState === WebSocket.OPEN;
  }

  /** A query over the socket: proves the sign-in worked. */
  query(path: string) {
    return this.requests.send("query", path);
  }

  /** The id of the subscription `subscribe` started. */
  subscriptionId: number | undefined;
  /** Resolves once the server answered `stopped` to a `stop()`. */
  private onStopped: (() => void) | undefined;

  /** Resolves on `started`; the events go to `onEvent`. */
  subscribe(path: string, input: unknown) {
    this.subscriptionId = this.requests.nextRequestId;
    return this.requests.send("subscription", path, input);
  }

  /** Stops the subscription; resolves on `stopped` (or after 10 s). */
  stop(): Promise<void> {
    const id = this.subscriptionId;
    if (id === undefined || !this.open) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, 10_000);
      this.onStopped = () => {
        clearTimeout(timer);
        resolve();
      };
      this.socket.send(clientFrames.stop(id));
    });
  }

  close(): void {
    this.socket.close();
  }

  private onFrame(data: Buffer, isBinary: boolean) {
    if (!isBinary && data.length === PING.length && data.toString() === PING) {
      this.socket.send(PONG);
      return;
    }
    let message: Frame;
    try {
      message = JSON.parse(data.toString()) as Frame;
    } catch {
      return;
    }
    const waiter = this.requests.waiter(message.id);
    if (message.error) {
      this.errors++;
      waiter?.reject(new Error(message.error.message ?? "error"));
      return;
    }
    const type = message.result?.type;
    if (type === "stopped" && message.id === this.subscriptionId) {
      this.onStopped?.();
      return;
    }
    if (type === "data" && this.onEvent && !waiter) {
      const event = message.result?.data as PresenceEventData | undefined;
      const presence = event?.type === "presence.changed" ? event.data?.presence : undefined;
      if (presence) this.onEvent(presence.user_id, presence.status, presence.last_seen_at);
      return;
    }
    if (waiter && (type === "started" || type === "data" || type === undefined)) waiter.resolve(message.result?.data);
  }
}

// ---------------------------------------------------------------------------------------------
// The database: fresh, seeded in SQL

type Seeded = { userIds: number[]; tokens: string[]; workspaceId: string };

type DatabaseHandleLike = {
  db: { execute(query: SQL): Promise<unknown> };
  close(): Promise<void>;
};

/** An id as server/ids.ts makes them (prefix, 10 characters of time, 16 random). */
function benchId(prefix: string, index: number): string {
  const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  let time = Date.now() + index;
  let out = "";
  for (let i = 0; i < 10; i++) {
    out = alphabet[time % 32] + out;
    time = Math.floor(time / 32);
  }
  for (const byte of randomBytes(16)) out += alphabet[byte % 32];
  return `${prefix}_${out}`;
}

/**
 * Opens the database with `root`'s own openDatabase (it migrates to that checkout's schema), and
 * writes the users, their tokens and the workspace they share.
 */
async function seed(root: string, databaseUrl: string | undefined, dataDir: string): Promise<Seeded> {
  const client = (await import(pathToFileURL(path.join(root, "db/client.ts")).href)) as {
    openDatabase(options: { databaseUrl: string | undefined; dataDir: string }): Promise<DatabaseHandleLike>;
  };
  const handle = await client.openDatabase({ databaseUrl, dataDir });
  try {
    const tag = randomBytes(4).toString("hex");
    const userIds: number[] = [];
    const CHUNK = 1000;
    for (let from = 0; from < SOCKETS; from += CHUNK) {
      const count = Math.min(CHUNK, SOCKETS - from);
      const rows = rowsOf<{ id: number; email: string }>(
        await handle.db.execute(sql`
          insert into users (name, email, email_verified_at)
          select 'presence ' || i, 'presence-' || ${tag} || '-' || i || '@example.test', now()
          from generate_series(${from}::int, ${from + count - 1}::int) as i
          returning id, email`),
      );
      for (const row of rows) userIds[Number(/-(\d+)@/.exec(row.email)![1])] = Number(row.id);
    }
    const tokens = userIds.map(() => `chat_${randomBytes(32).toString("base64url")}`);
    for (let from = 0; from < SOCKETS; from += CHUNK) {
      const values = [];
      for (let i = from; i < Math.min(SOCKETS, from + CHUNK); i++) {
        const hash = createHash("sha256").update(tokens[i]!).digest("hex");
        values.push(sql`(${benchId("tok", i)}, ${userIds[i]!}::int, 'sign_in', 'bench', ${hash}, '["*"]'::jsonb)`);
      }
      await handle.db.execute(sql`
        insert into access_tokens (id, user_id, kind, name, token_hash, abilities)
        values ${sql.join(values, sql`, `)}`);
    }
    const workspaceId = benchId("ws", 0);
    await handle.db.execute(sql`
      insert into workspaces (id, name, slug, owner_id)
      values (${workspaceId}, 'Presence bench', ${`presence-bench-${tag}`}, ${userIds[0]!}::int)`);
    for (let from = 0; from < SOCKETS; from += CHUNK) {
      const values = [];
      for (let i = from; i < Math.min(SOCKETS, from + CHUNK); i++)
        values.push(sql`(${benchId("mem", i)}, ${workspaceId}, ${userIds[i]!}::int, ${i === 0 ? "owner" : "member"})`);
      await handle.db.execute(sql`
        insert into workspace_members (id, workspace_id, user_id, role)
        values ${sql.join(values, sql`, `)}`);
    }
    return { userIds, tokens, workspaceId };
  } finally {
    await handle.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The server, with a probe of its statement counter

/**
 * Loaded into the server process with `--import` (after tsx): it takes the checkout's
 * StatementCounter (the very module the service imports), remembers every instance that records a
 * statement, and answers their counts on 127.0.0.1:BENCH_PRESENCE_PROBE_PORT: `?since=<marks>`
 * adds the statements since those marks.
 */
const PROBE = `
import { createServer } from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";
const { StatementCounter } = await import(pathToFileURL(path.join(process.cwd(), "db/statement-count.ts")).href);
const counters = [];
const record = StatementCounter.prototype.record;
StatementCounter.prototype.record = function (...args) {
  if (!counters.includes(this)) counters.push(this);
  return record.apply(this, args);
};
createServer((request, response) => {
  const since = new URL(request.url, "http://probe").searchParams.get("since");
  const marks = since === null ? [] : since.split(",").map(Number);
  const answer = counters.map((counter, index) =>
    since === null ? { total: counter.total() } : { total: counter.total(), window: counter.since(marks[index] ?? 0) });
  response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
}).listen(Number(process.env.BENCH_PRESENCE_PROBE_PORT), "127.0.0.1").unref();
`;

type ProbeWindow = { count: number; complete: boolean; statements: { scope: string; text: string }[] };

class StatementProbe {
  constructor(private readonly port: number) {}

  private async ask(since?: number[]): Promise<{ total: number; window?: ProbeWindow }[]> {
    const query = since ? `?since=${since.join(",")}` : "";
    const response = await fetch(`http://127.0.0.1:${this.port}/${query}`);
    return (await response.json()) as { total: number; window?: ProbeWindow }[];
  }

  async marks(): Promise<number[]> {
    return (await this.ask()).map((counter) => counter.total);
  }

  /** The statements of every counter since `marks`. */
  async since(marks: number[]): Promise<ProbeWindow> {
    const answer = await this.ask(marks);
    return {
      count: answer.reduce((sum, counter) => sum + (counter.window?.count ?? 0), 0),
      complete: answer.every((counter) => counter.window?.complete ?? true),
      statements: answer.flatMap((counter) => counter.window?.statements ?? []),
    };
  }
}

type Started = {
  server: BenchServer;
  probe: StatementProbe;
  seeded: Seeded;
  freshDatabase: boolean;
  cleanup(): Promise<void>;
};

async function startSeeded(label: string, root: string, log: (line: string) => void): Promise<Started> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "chat-bench-presence-"));
  const database = process.env.DATABASE_URL
    ? await freshDatabase(process.env.DATABASE_URL, "presence", log)
    : undefined;
  let server: BenchServer | undefined;
  try {
    log(`presence: ${label}: writing ${SOCKETS} users, their tokens and their workspace in SQL`);
    const seeded = await seed(root, database?.url, dataDir);
    const probePort = await freePort();
    server = await startBenchServer(`presence-${label.replace(/\s+/g, "-")}`, {
      inspect: true,
      root,
      nodeArgs: ["--import", `data:text/javascript,${encodeURIComponent(PROBE)}`],
      env: {
        DATA_DIR: dataDir,
        ...(database && { DATABASE_URL: database.url }),
        PRESENCE_OFFLINE_AFTER_SECONDS: String(GRACE_S),
        BENCH_PRESENCE_PROBE_PORT: String(probePort),
      },
    });
    const started = server;
    return {
      server,
      probe: new StatementProbe(probePort),
      seeded,
      freshDatabase: database?.fresh ?? false,
      async cleanup() {
        await started.stop();
        await database?.drop();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await server?.stop();
    await database?.drop();
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// Memory

/** Warm-up, the reading without sockets, every socket signed in (a query each), the reading with them. */
async function idleMemory(
  started: Started,
  label: MemoryRow["server"],
  code: string,
  log: (line: string) => void,
): Promise<{ row: MemoryRow; sockets: LiveSocket[] }> {
  const { server, seeded } = started;
  const connect = async (i: number) => {
    const socket = await LiveSocket.open(server.url, seeded.tokens[i]!);
    await socket.query("me.get");
    return socket;
  };
  log(`presence: ${label}: warming up`);
  const warm = await mapLimit(Array.from({ length: Math.min(WARM_UP_SOCKETS, SOCKETS) }), 50, (_, i) =>
    connect(SOCKETS - 1 - i),
  );
  for (const socket of warm) socket.close();
  await sleep(2000);
  const before = await settledMemory(server);
  log(`presence: ${label}: signing in ${SOCKETS} sockets`);
  const sockets = await mapLimit(Array.from({ length: SOCKETS }), 100, (_, i) => connect(i));
  const after = await settledMemory(server);
  return {
    row: {
      server: label,
      code,
      sockets: SOCKETS,
      heap_before_mib: round(before.heap, 1),
      heap_with_sockets_mib: round(after.heap, 1),
      heap_kib_per_socket: round(((after.heap - before.heap) * 1024) / SOCKETS, 2),
      rss_before_mib: round(before.rss, 1),
      rss_with_sockets_mib: round(after.rss, 1),
      rss_kib_per_socket: round(((after.rss - before.rss) * 1024) / SOCKETS, 2),
    },
    sockets,
  };
}

/** The checkout without presence: BENCH_PRESENCE_BEFORE, or the commit before presence exported to a temporary directory. */
async function checkoutWithoutPresence(
  log: (line: string) => void,
): Promise<{ root: string; code: string; remove(): Promise<void> } | undefined> {
  if (BEFORE === "skip") return undefined;
  if (BEFORE) return { root: path.resolve(BEFORE), code: BEFORE, remove: async () => {} };
  const git = (...args: string[]) => execFileSync("git", ["-C", ROOT, ...args], { encoding: "utf8" }).trim();
  let commit: string;
  try {
    git("cat-file", "-e", "HEAD:server/services/presence/presence.ts");
    const added = git("log", "--diff-filter=A", "--format=%H", "-1", "--", "server/services/presence/presence.ts");
    commit = git("rev-parse", `${added}^`);
  } catch {
    commit = git("rev-parse", "HEAD"); // presence is not committed: HEAD has none of it
  }
  const dir = await mkdtemp(path.join(tmpdir(), "chat-bench-without-presence-"));
  log(`presence: exporting ${commit.slice(0, 12)} (without presence) to ${dir}`);
  execFileSync("sh", ["-c", 'git -C "$1" archive --format=tar "$2" | tar -x -C "$3"', "sh", ROOT, commit, dir]);
  await symlink(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
  if (existsSync(path.join(dir, "server/services/presence/presence.ts")))
    throw new Error(`${commit} has presence: cannot measure without it`);
  return {
    root: dir,
    code: `${commit.slice(0, 12)} (git archive)`,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

// ---------------------------------------------------------------------------------------------
// Redis: the server's own commands, through MONITOR

/** The local ports of `pid`'s TCP connections to `remotePort` (its Redis connections). */
function connectionPorts(pid: number, remotePort: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      const match = /^socket:\[(\d+)\]$/.exec(target);
      if (match) inodes.add(match[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const file of ["tcp", "tcp6"]) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${file}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || !inodes.has(fields[9]!)) continue;
      const local = parseInt(fields[1]!.split(":")[1]!, 16);
      const remote = parseInt(fields[2]!.split(":")[1]!, 16);
      if (remote === remotePort) ports.add(local);
    }
  }
  return ports;
}

type CommandCounts = { commands: number; scriptRuns: number; inScripts: number; byCommand: Map<string, number> };
const noCounts = (): CommandCounts => ({ commands: 0, scriptRuns: 0, inScripts: 0, byCommand: new Map() });

/** MONITOR on a connection of its own; counts into `bucket` (when set) what the server's connections send. */
class RedisMonitor {
  bucket: CommandCounts | undefined;
  private ports = new Set<number>();
  private buffer = "";
  private lastWasOurs = false;
  private readonly refresher: NodeJS.Timeout;

  private constructor(
    private readonly socket: Socket,
    private readonly pid: number,
    private readonly redisPort: number,
  ) {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => this.onData(chunk));
    socket.on("error", () => {});
    this.refreshPorts();
    this.refresher = setInterval(() => this.refreshPorts(), 1000);
  }

  static async open(redisUrl: string, pid: number): Promise<RedisMonitor> {
    const url = new URL(redisUrl);
    const port = Number(url.port || 6379);
    const socket = netConnect(port, url.hostname || "127.0.0.1");
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const password = decodeURIComponent(url.password);
    const user = decodeURIComponent(url.username);
    if (password) socket.write(user ? `AUTH ${user} ${password}\r\n` : `AUTH ${password}\r\n`);
    socket.write("MONITOR\r\n");
    return new RedisMonitor(socket, pid, port);
  }

  refreshPorts(): void {
    try {
      for (const port of connectionPorts(this.pid, this.redisPort)) this.ports.add(port);
    } catch {
      // the server is gone
    }
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf("\r\n")) !== -1) {
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      this.onLine(line);
    }
  }

  /** `+<time> [<db> <source>] "<command>" …`; a script's own commands follow it as source `lua`. */
  private onLine(line: string): void {
    const match = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]*)"/.exec(line);
    if (!match) return;
    const source = match[1]!;
    const command = match[2]!.toLowerCase();
    if (source === "lua") {
      if (this.lastWasOurs && this.bucket) {
        this.bucket.inScripts++;
        const key = `(script) ${command}`;
        this.bucket.byCommand.set(key, (this.bucket.byCommand.get(key) ?? 0) + 1);
      }
      return;
    }
    const port = Number(source.slice(source.lastIndexOf(":") + 1));
    this.lastWasOurs = this.ports.has(port);
    if (!this.lastWasOurs || !this.bucket) return;
    this.bucket.commands++;
    if (command === "evalsha" || command === "eval") this.bucket.scriptRuns++;
    this.bucket.byCommand.set(command, (this.bucket.byCommand.get(command) ?? 0) + 1);
  }

  close(): void {
    clearInterval(this.refresher);
    this.socket.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// What the watchers should see

/** One close or reconnect of a churning user's socket. */
type Action = { kind: "close" | "open"; at: number };
/** A change of a user's status that watchers should hear of, due at `at`. */
type Change = {
  status: "online" | "offline";
  at: number;
  optional: boolean;
  /** The action that caused it: for `offline` the close (the event's last_seen_at names it), else the reconnect. */
  cause: number;
};

/** The changes `actions` (in order) cause, for a user online before them. */
function changesOf(actions: Action[], endAt: number): Change[] {
  const changes: Change[] = [];
  let closedAt: number | null = null;
  for (const action of actions) {
    if (action.kind === "close") closedAt = action.at;
    else if (closedAt !== null) {
      const offlineAt = closedAt + GRACE_MS;
      const margin = action.at - offlineAt;
      if (margin > -EDGE_MS) {
        const optional = Math.abs(margin) < EDGE_MS;
        changes.push({ status: "offline", at: offlineAt, optional, cause: closedAt });
        changes.push({ status: "online", at: action.at, optional, cause: action.at });
      }
      closedAt = null;
    }
  }
  if (closedAt !== null && closedAt + GRACE_MS < endAt)
    changes.push({
      status: "offline",
      at: closedAt + GRACE_MS,
      optional: closedAt + GRACE_MS > endAt - EDGE_MS,
      cause: closedAt,
    });
  return changes;
}

const sortedNumbers = (values: number[]) => Float64Array.from(values).sort();

function delayRow(kind: DelayRow["kind"], delays: number[], expected: number, missed: number): DelayRow {
  // Missed events count as infinitely late.
  const all = sortedNumbers([...delays, ...Array.from({ length: missed }, () => Number.POSITIVE_INFINITY)]);
  const value = (p: number) => {
    if (all.length === 0) return null;
    const v = percentile(all, p);
    return Number.isFinite(v) ? round(v, 1) : null;
  };
  const finite = sortedNumbers(delays);
  return {
    kind,
    expected,
    received: delays.length,
    missed,
    p50_ms: value(50),
    p99_ms: value(99),
    max_ms: missed > 0 ? null : finite.length > 0 ? round(finite[finite.length - 1]!, 1) : null,
  };
}

// ---------------------------------------------------------------------------------------------
// The section

export async function runPresence(log: (line: string) => void): Promise<PresenceResult> {
  const notes: string[] = [];
  const redisUrl = process.env.REDIS_URL;
  const memoryRows: MemoryRow[] = [];
  let heapGrowthPerChange: number | null = null;
  let heapGrowth = { perEvent: null as number | null, mib: null as number | null, freed: null as number | null };
  const heapAlong: { stage: string; heap_mib: number; rss_mib: number }[] = [];
  const stage = (name: string, reading: MemoryReading) =>
    heapAlong.push({ stage: name, heap_mib: round(reading.heap, 1), rss_mib: round(reading.rss, 1) });

  // --- with presence: memory, then the watchers and the churn ----------------------------------
  const started = await startSeeded("with presence", ROOT, log);
  const { server, seeded, probe } = started;
  let sockets: LiveSocket[] = [];
  let monitor: RedisMonitor | undefined;
  let result: Omit<PresenceResult, "memory" | "targets" | "notes">;
  try {
    const idle = await idleMemory(started, "with presence", "this work tree", log);
    sockets = idle.sockets;
    memoryRows.push(idle.row);

    // Watchers: each follows WATCHED churning users, drawn with a fixed seed.
    const churners = Array.from({ length: SOCKETS - WATCHERS }, (_, i) => WATCHERS + i);
    const pick = seededRandom(20_250_101);
    const watchedBy = new Map<number, number[]>(); // socket index → the watchers of its user
    const watchLists: number[][] = [];
    for (let w = 0; w < WATCHERS; w++) {
      const chosen = new Set<number>();
      while (chosen.size < WATCHED) chosen.add(churners[Math.floor(pick() * churners.length)]!);
      watchLists.push([...chosen]);
      for (const index of chosen) {
        const list = watchedBy.get(index) ?? [];
        list.push(w);
        watchedBy.set(index, list);
      }
    }
    const indexOfUser = new Map(seeded.userIds.map((userId, index) => [userId, index]));
    let churnStartedAt = Number.POSITIVE_INFINITY;
    const snapshot = { received: 0, online: 0 };
    /** Per watcher, per watched socket index: the live events (status, arrival, last_seen_at on this clock). */
    type Received = { status: string; at: number; lastSeen: number | null };
    const received = Array.from({ length: WATCHERS }, () => new Map<number, Received[]>());
    let strays = 0;
    let subscribeErrors = 0;
    log(`presence: ${WATCHERS} watchers subscribing to presence.onUsers (${WATCHED} users each)`);
    await mapLimit(watchLists, 50, async (list, w) => {
      const socket = sockets[w]!;
      socket.onEvent = (userId, status, lastSeenAt) => {
        const at = performance.now();
        const index = indexOfUser.get(userId);
        if (index === undefined) {
          strays++;
          return;
        }
        if (at < churnStartedAt) {
          snapshot.received++;
          if (status === "online") snapshot.online++;
          return;
        }
        const events = received[w]!.get(index) ?? [];
        // The server's wall clock, as this process's performance.now() (same machine, same clock).
        const lastSeen = lastSeenAt === null ? null : Date.parse(lastSeenAt) - performance.timeOrigin;
        events.push({ status, at, lastSeen });
        received[w]!.set(index, events);
      };
      try {
        await socket.subscribe("presence.onUsers", { user_ids: list.map((index) => seeded.userIds[index]!) });
      } catch {
        subscribeErrors++;
      }
    });
    const snapshotExpected = WATCHERS * WATCHED;
    const snapshotDeadline = performance.now() + 60_000;
    while (snapshot.received < snapshotExpected && performance.now() < snapshotDeadline) await sleep(100);
    log(`presence: first events ${snapshot.received}/${snapshotExpected} (${snapshot.online} online)`);
    const subscribed = await settledMemory(server);
    stage(`${SOCKETS} idle sockets (before: ${idle.row.heap_before_mib} MiB)`, {
      heap: idle.row.heap_with_sockets_mib,
      rss: idle.row.rss_with_sockets_mib,
    });
    stage(`${WATCHERS} watchers subscribed, first events in`, subscribed);

    // The quiet window: what the server does at rest, in Redis and PostgreSQL.
    if (redisUrl) monitor = await RedisMonitor.open(redisUrl, server.pid);
    const idleRedis = noCounts();
    log(`presence: ${IDLE_S} s at rest`);
    const idleMarks = await probe.marks();
    if (monitor) monitor.bucket = idleRedis;
    const idleFrom = performance.now();
    await sleep(IDLE_S * 1000);
    const idleSeconds = (performance.now() - idleFrom) / 1000;
    if (monitor) monitor.bucket = undefined;
    const idleStatements = await probe.since(idleMarks);

    // The churn.
    const actions = new Map<number, Action[]>(); // socket index → its closes and reconnects
    const note = (index: number, action: Action) => {
      const list = actions.get(index) ?? [];
      list.push(action);
      actions.set(index, list);
    };
    const due = new Map<number, number[]>(); // tick → socket indexes to reconnect then
    const away = new Set<number>();
    const openedAtTick = new Map<number, number>();
    let connects = 0;
    let disconnects = 0;
    let longDrops = 0;
    let connectErrors = 0;
    let lateTicks = 0;
    let windowConnects = 0;
    let windowDisconnects = 0;
    const churnPick = seededRandom(7_654_321);
    const churnRedis = noCounts();
    log(`presence: churn: ${RATE} disconnects and reconnects a second for ${SECONDS} s (grace ${GRACE_S} s)`);
    const marks = await probe.marks();
    const usage = startUsageWindow(server.pid);
    churnStartedAt = performance.now();
    if (monitor) monitor.bucket = churnRedis;
    let windowStatements: Awaited<ReturnType<StatementProbe["since"]>> | undefined;
    const reconnecting: Promise<void>[] = [];
    for (let tick = 0; ; tick++) {
      const tickAt = churnStartedAt + tick * 1000;
      const wait = tickAt - performance.now();
      if (wait > 0) await sleep(wait);
      else if (wait < -100) lateTicks++;
      if (tick === SECONDS) {
        // The end of the minute: read what it cost before the sockets still away come back.
        if (monitor) monitor.bucket = undefined;
        windowStatements = await probe.since(marks);
        windowConnects = connects;
        windowDisconnects = disconnects;
      }
      // Reconnect those due.
      for (const index of due.get(tick) ?? []) {
        reconnecting.push(
          LiveSocket.open(server.url, seeded.tokens[index]!).then(
            (socket) => {
              sockets[index] = socket;
              away.delete(index);
              openedAtTick.set(index, tick);
              note(index, { kind: "open", at: socket.signedInAt });
              connects++;
            },
            () => {
              connectErrors++;
            },
          ),
        );
      }
      due.delete(tick);
      if (tick < SECONDS) {
        // Close RATE churning sockets open for a second at least: half come back in 1 s, half later.
        let closed = 0;
        for (let attempt = 0; closed < RATE && attempt < RATE * 50; attempt++) {
          const index = churners[Math.floor(churnPick() * churners.length)]!;
          if (away.has(index) || (openedAtTick.get(index) ?? -1) >= tick || !sockets[index]!.open) continue;
          const long = closed % 2 === 1;
          sockets[index]!.close();
          note(index, { kind: "close", at: performance.now() });
          away.add(index);
          const back = tick + (long ? AWAY_S : SHORT_AWAY_MS / 1000);
          due.set(back, [...(due.get(back) ?? []), index]);
          disconnects++;
          if (long) longDrops++;
          closed++;
        }
      } else if (due.size === 0) break;
    }
    await Promise.all(reconnecting);
    const window = usage.finish();
    const endAt = performance.now();

    // The events still owed: until the last change is due, plus the drain.
    const changes = new Map<number, Change[]>();
    let lastDue = 0;
    for (const [index, list] of actions) {
      const userChanges = changesOf(list, endAt + GRACE_MS + 1);
      changes.set(index, userChanges);
      for (const change of userChanges) lastDue = Math.max(lastDue, change.at);
    }
    const expectedTotal = () => {
      let total = 0;
      for (const [index, list] of changes)
        total += list.filter((change) => !change.optional).length * (watchedBy.get(index)?.length ?? 0);
      return total;
    };
    const receivedTotal = () =>
      received.reduce((sum, map) => sum + [...map.values()].reduce((s, l) => s + l.length, 0), 0);
    const drainUntil = Math.max(lastDue, endAt) + DRAIN_AFTER_MS;
    log(`presence: waiting for the last events (${expectedTotal()} owed, ${receivedTotal()} in)`);
    while (performance.now() < drainUntil) {
      if (performance.now() > lastDue + 500 && receivedTotal() >= expectedTotal()) {
        await sleep(1000); // late extras
        break;
      }
      await sleep(100);
    }

    // Match. An offline event's last_seen_at is the close it follows (the server's time of it):
    // it is matched to the owed offline whose close that is. An online event goes to the latest
    // owed online due before it arrived. Owed changes passed over are missed.
    const delays = { online: [] as number[], offline: [] as number[], offlineFromClose: [] as number[] };
    const missed = { online: 0, offline: 0 };
    const expected = { online: 0, offline: 0 };
    let unexpected = 0;
    const unexpectedSamples: string[] = [];
    const missedSamples: string[] = [];
    const watchersMissing = new Set<number>();
    const rel = (at: number) => Math.round(at - churnStartedAt);
    const historyOf = (index: number) =>
      (actions.get(index) ?? []).map((action) => `${action.kind}@${rel(action.at)}`).join(" ") || "no actions";
    for (let w = 0; w < WATCHERS; w++) {
      for (const index of watchLists[w]!) {
        const owed = changes.get(index) ?? [];
        const events = received[w]!.get(index) ?? [];
        for (const change of owed) if (!change.optional) expected[change.status]++;
        const miss = (change: Change) => {
          if (change.optional) return;
          missed[change.status]++;
          watchersMissing.add(w);
          if (missedSamples.length < 5)
            missedSamples.push(
              `watcher ${w} (socket ${sockets[w]!.closedAt === undefined ? "open" : `closed@${rel(sockets[w]!.closedAt!)}`}) ` +
                `user ${seeded.userIds[index]}: ${change.status} due@${rel(change.at)} not received; ` +
                `user: ${historyOf(index)}; received: ${events.map((e) => `${e.status}@${rel(e.at)}`).join(" ") || "none"}`,
            );
        };
        let next = 0;
        for (const event of events) {
          let found = -1;
          for (let j = next; j < owed.length && owed[j]!.at <= event.at + SLACK_MS; j++) {
            const change = owed[j]!;
            if (change.status !== event.status) continue;
            if (event.status === "offline" && event.lastSeen !== null) {
              if (Math.abs(change.cause - event.lastSeen) < 1000) {
                found = j;
                break;
              }
            } else found = j; // the latest so far
          }
          if (found === -1) {
            unexpected++;
            if (unexpectedSamples.length < 5)
              unexpectedSamples.push(
                `watcher ${w} user ${seeded.userIds[index]}: ${event.status}@${rel(event.at)} ms` +
                  `${event.lastSeen === null ? "" : ` (last_seen_at @${rel(event.lastSeen)})`}; user: ${historyOf(index)}`,
              );
            continue;
          }
          for (let j = next; j < found; j++) miss(owed[j]!);
          const change = owed[found]!;
          const delay = event.at - change.at;
          delays[change.status].push(delay);
          if (change.status === "offline") delays.offlineFromClose.push(event.at - change.cause);
          next = found + 1;
        }
        for (let j = next; j < owed.length; j++) miss(owed[j]!);
      }
    }
    const watcherSocketsClosed = sockets.slice(0, WATCHERS).filter((socket) => socket.closedAt !== undefined).length;
    if (watcherSocketsClosed > 0) notes.push(`${watcherSocketsClosed} watcher sockets were closed during the run`);
    if (watchersMissing.size > 0) notes.push(`${watchersMissing.size} of ${WATCHERS} watchers missed events`);
    if (strays > 0) notes.push(`${strays} events named a user no watcher asked for`);

    const after = await settledMemory(server);
    const changesCount = connects + disconnects;
    heapGrowthPerChange = changesCount > 0 ? round(((after.heap - subscribed.heap) * 2 ** 20) / changesCount, 1) : null;
    stage(`after the churn (${changesCount} connects and disconnects, ${receivedTotal()} events)`, after);
    log("presence: the watchers unsubscribe");
    await mapLimit(sockets.slice(0, WATCHERS), 100, (socket) => socket.stop());
    const unsubscribed = await settledMemory(server);
    stage("after the watchers unsubscribed (sockets still open)", unsubscribed);
    const events = receivedTotal();
    heapGrowth = {
      perEvent: events > 0 ? round(((after.heap - subscribed.heap) * 2 ** 20) / events, 1) : null,
      mib: round(after.heap - subscribed.heap, 1),
      freed: round(after.heap - unsubscribed.heap, 1),
    };

    // Redis: the minute less the background over as long.
    let redis: PresenceResult["redis"] = null;
    if (monitor) {
      const windowChanges = Math.max(1, windowConnects + windowDisconnects);
      const perSecond = (count: number) => count / Math.max(0.001, idleSeconds);
      const net = (churn: number, idle: number) => churn - perSecond(idle) * SECONDS;
      redis = {
        churn_commands: churnRedis.commands,
        churn_script_runs: churnRedis.scriptRuns,
        churn_commands_in_scripts: churnRedis.inScripts,
        idle_commands_per_s: round(perSecond(idleRedis.commands), 1),
        idle_commands_in_scripts_per_s: round(perSecond(idleRedis.inScripts), 1),
        commands_per_change: round(net(churnRedis.commands, idleRedis.commands) / windowChanges, 2),
        commands_with_scripts_per_change: round(
          net(churnRedis.commands + churnRedis.inScripts, idleRedis.commands + idleRedis.inScripts) / windowChanges,
          2,
        ),
        by_command: Object.fromEntries([...churnRedis.byCommand].sort((a, b) => b[1] - a[1])),
      };
    }

    // PostgreSQL: the statements of the minute, grouped by text.
    const statementWindow = windowStatements ?? (await probe.since(marks));
    const byText = new Map<string, { count: number; scopes: Set<string> }>();
    for (const statement of statementWindow.statements) {
      const entry = byText.get(statement.text) ?? { count: 0, scopes: new Set<string>() };
      entry.count++;
      entry.scopes.add(statement.scope.length > 24 ? `${statement.scope.slice(0, 21)}…` : statement.scope);
      byText.set(statement.text, entry);
    }

    result = {
      settings: {
        sockets: SOCKETS,
        watchers: WATCHERS,
        watched_each: WATCHED,
        rate_per_s: RATE,
        seconds: SECONDS,
        offline_after_s: GRACE_S,
        short_away_s: SHORT_AWAY_MS / 1000,
        long_away_s: AWAY_S,
        database: process.env.DATABASE_URL ? "postgres" : "pglite",
        fresh_database: started.freshDatabase,
        redis: Boolean(redisUrl),
      },
      churn: {
        connects,
        disconnects,
        long_drops: longDrops,
        connect_errors: connectErrors,
        late_ticks: lateTicks,
        server_cpu_pct: Math.round(window.serverCpuPct),
        bench_cpu_pct: Math.round(window.benchCpuPct),
        stores_cpu_pct: Math.round(window.storesCpuPct),
        other_cpu_pct: Math.round(window.otherCpuPct),
      },
      snapshot: {
        expected: snapshotExpected,
        received: snapshot.received,
        online: snapshot.online,
        subscribe_errors: subscribeErrors,
      },
      events: {
        rows: [
          delayRow("online", delays.online, expected.online, missed.online),
          delayRow("offline", delays.offline, expected.offline, missed.offline),
          delayRow(
            "all",
            [...delays.online, ...delays.offline],
            expected.online + expected.offline,
            missed.online + missed.offline,
          ),
        ],
        unexpected,
        unexpected_samples: unexpectedSamples,
        missed_samples: missedSamples,
        offline_from_close_p50_ms:
          delays.offlineFromClose.length > 0 ? round(percentile(sortedNumbers(delays.offlineFromClose), 50), 1) : null,
        offline_from_close_p99_ms:
          delays.offlineFromClose.length > 0 ? round(percentile(sortedNumbers(delays.offlineFromClose), 99), 1) : null,
      },
      redis,
      postgres: {
        statements_in_window: statementWindow.count,
        per_s: round(statementWindow.count / SECONDS, 2),
        idle_statements: idleStatements.count,
        idle_seconds: round(idleSeconds, 1),
        by_text: [...byText]
          .sort((a, b) => b[1].count - a[1].count)
          .map(([text, entry]) => ({
            count: entry.count,
            scopes:
              entry.scopes.size > 3
                ? `${[...entry.scopes].slice(0, 2).join(", ")}, … (${entry.scopes.size} scopes)`
                : [...entry.scopes].join(", "),
            text,
          })),
        texts_complete: statementWindow.complete,
      },
    };
    const watcherErrors = sockets.slice(0, WATCHERS).reduce((sum, socket) => sum + socket.errors, 0);
    if (watcherErrors > 0) notes.push(`${watcherErrors} error frames on the watchers' sockets`);
  } finally {
    monitor?.close();
    for (const socket of sockets) socket.socket.terminate();
    await sleep(500);
    await started.cleanup();
  }

  // --- without presence: the same idle sockets on the service before presence ------------------
  let withoutPresence = "skipped (BENCH_PRESENCE_BEFORE=skip)";
  const before = await checkoutWithoutPresence(log).catch((error: unknown) => {
    withoutPresence = `not measured: ${(error as Error).message}`;
    return undefined;
  });
  if (before) {
    withoutPresence = before.code;
    try {
      const baseline = await startSeeded("without presence", before.root, log);
      let baselineSockets: LiveSocket[] = [];
      try {
        const idle = await idleMemory(baseline, "without presence", before.code, log);
        baselineSockets = idle.sockets;
        memoryRows.push(idle.row);
      } finally {
        for (const socket of baselineSockets) socket.socket.terminate();
        await sleep(500);
        await baseline.cleanup();
      }
    } catch (error) {
      withoutPresence = `${before.code}: failed: ${(error as Error).message}`;
      log(`presence: the run without presence failed: ${(error as Error).message}`);
    } finally {
      await before.remove();
    }
  }

  const withRow = memoryRows.find((row) => row.server === "with presence")!;
  const withoutRow = memoryRows.find((row) => row.server === "without presence");
  const heapDifference = withoutRow ? round(withRow.heap_kib_per_socket - withoutRow.heap_kib_per_socket, 2) : null;
  const rssDifference = withoutRow ? round(withRow.rss_kib_per_socket - withoutRow.rss_kib_per_socket, 2) : null;
  const all = result.events.rows.find((row) => row.kind === "all")!;
  const rest = result;
  notes.push(
    "event delay: online from the reconnect's sign-in frame; offline from the close + the grace window " +
      `(${GRACE_S} s); missed events count as infinitely late`,
    "without presence: " + withoutPresence,
  );
  if (!rest.redis) notes.push("Redis: n/a (no REDIS_URL: presence keeps the live state in memory)");
  return {
    ...rest,
    memory: {
      rows: memoryRows,
      heap_kib_difference: heapDifference,
      rss_kib_difference: rssDifference,
      without_presence: withoutPresence,
      heap_growth_bytes_per_change: heapGrowthPerChange,
      heap_growth_bytes_per_event: heapGrowth.perEvent,
      heap_growth_mib: heapGrowth.mib,
      heap_freed_on_unsubscribe_mib: heapGrowth.freed,
      heap_along_the_run: heapAlong,
    },
    targets: {
      event_p99_under_2s: all.p99_ms !== null && all.p99_ms < TARGET_P99_MS,
      postgres_at_most_1_per_s: rest.postgres
        ? rest.postgres.statements_in_window <= TARGET_STATEMENTS_PER_S * SECONDS
        : null,
      memory_within_1kib: heapDifference === null ? null : heapDifference <= TARGET_MEMORY_KIB,
      snapshot_all_online: rest.snapshot.online === rest.snapshot.expected && rest.snapshot.subscribe_errors === 0,
    },
    notes,
  };
}
