// Shared pieces of `npm run bench`: the server under test as its own process, /proc readings
// of it, percentiles, a small REST helper, requests over a bare tRPC WebSocket, fresh databases
// and a seeded generator. Everything talks to 127.0.0.1 only.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { cpus, tmpdir } from "node:os";
import { createInterface } from "node:readline";
import path from "node:path";
import WebSocket from "ws";
import { clientFrames, trpcSocketUrl } from "../server/http/trpc-ws-protocol.ts";

export const ROOT = path.resolve(import.meta.dirname, "..");

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
    probe.on("error", reject);
  });
}

export async function waitUntilReady(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ready = await fetch(`${url}/readyz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) return;
    await sleep(200);
  }
  throw new Error("the server did not become ready");
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

export type BenchServer = {
  url: string;
  pid: number;
  child: ChildProcess;
  /** With `inspect`: a full garbage collection, then the JS heap in use, through the inspector. */
  heap?: { collectAndMeasure(): Promise<{ usedMiB: number; totalMiB: number }>; close(): void };
  /** With `workerProcess: "deferred"`: starts the worker process and resolves with its pid at once (not waiting for it to be ready). */
  startWorker?: () => Promise<number>;
  stop(): Promise<void>;
};

let built: Promise<void> | undefined;
/** `npm run build` once per bench run (BENCH_COMPILED=1). */
function buildOnce(): Promise<void> {
  built ??= new Promise<void>((resolve, reject) => {
    const child = spawn("npm", ["run", "build", "--silent"], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`npm run build exited with ${code}`))));
  });
  return built;
}

/**
 * Starts `server/main.ts` as its own process (as in production) with LOG_LEVEL=warn, on a
 * free port, with a temporary DATA_DIR (PGlite lives there when DATABASE_URL is unset) and
 * its own REDIS_PREFIX. BENCH_COMPILED=1 builds once (`npm run build`) and starts
 * `dist/server/main.js` instead, as the production image runs it. BENCH_PROFILE=<dir> adds `--cpu-prof` (profiles are written to
 * <dir>/<label>-<time>/ when the server exits). `env` adds (or overrides) environment variables.
 * `workerProcess` (needs REDIS_URL): the server runs with WORKERS=off and `workers/main.ts`
 * runs the queues as a process of its own, as in a scaled-out deployment; "deferred": only
 * when the caller calls `startWorker()` (jobs queue up until then).
 */
export async function startBenchServer(
  label: string,
  options: {
    inspect?: boolean;
    env?: Record<string, string>;
    workerProcess?: boolean | "deferred";
    /** Another checkout of the service to start instead of this one (its own node_modules). */
    root?: string;
    /** More Node flags, after the others and before the entry (`--import <module>`: a probe of the bench's). */
    nodeArgs?: string[];
  } = {},
): Promise<BenchServer> {
  if (options.workerProcess && !process.env.REDIS_URL) throw new Error("a worker process needs REDIS_URL");
  const dataDir = await mkdtemp(path.join(tmpdir(), "chat-bench-"));
  const port = await freePort();
  // BENCH_COMPILED=1: the compiled build (`npm run build`, dist/), as the image runs it, not tsx.
  const compiled = process.env.BENCH_COMPILED === "1" && !options.root;
  if (compiled) await buildOnce();
  const args = compiled ? [] : ["--import", "tsx"];
  const inspectPort = options.inspect ? await freePort() : undefined;
  if (inspectPort) args.push(`--inspect=127.0.0.1:${inspectPort}`);
  const profileDir = process.env.BENCH_PROFILE;
  if (profileDir) {
    // One directory per server; Node writes a profile per thread (tsx's loader thread too),
    // the largest is the main thread's.
    const dir = path.resolve(profileDir, `${label}-${Date.now()}`);
    await mkdir(dir, { recursive: true });
    args.push("--cpu-prof", "--cpu-prof-dir", dir);
  }
  if (options.nodeArgs) args.push(...options.nodeArgs);
  args.push(compiled ? "dist/server/main.js" : "server/main.ts");
  const redisPrefix = `bench-${randomBytes(4).toString("hex")}`;
  const child = spawn(process.execPath, args, {
    cwd: options.root ?? ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      REDIS_PREFIX: redisPrefix,
      ...options.env,
      ...(options.workerProcess && { WORKERS: "off" }),
    },
    stdio: ["ignore", "inherit", "pipe"],
  });
  passWarnings(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntilReady(url);
  } catch (error) {
    child.kill("SIGKILL");
    await exited;
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  // The worker process shares the server's DATA_DIR (so its generated APP_KEY), database and Redis prefix.
  let worker: ChildProcess | undefined;
  let workerExited: Promise<void> | undefined;
  const spawnWorker = () => {
    const started = spawn(process.execPath, ["--import", "tsx", "workers/main.ts"], {
      cwd: ROOT,
      env: { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: "warn", REDIS_PREFIX: redisPrefix, ...options.env },
      stdio: ["ignore", "inherit", "inherit"],
    });
    worker = started;
    workerExited = new Promise<void>((resolve) => started.once("exit", () => resolve()));
    return started.pid!;
  };
  if (options.workerProcess === true) {
    spawnWorker();
    await sleep(3_000); // tsx start-up and the BullMQ connections
  }
  const heap = inspectPort ? await connectInspector(inspectPort) : undefined;
  return {
    url,
    pid: child.pid!,
    child,
    heap,
    ...(options.workerProcess === "deferred" && { startWorker: async () => spawnWorker() }),
    async stop() {
      heap?.close();
      worker?.kill("SIGTERM");
      await workerExited;
      child.kill("SIGTERM");
      const forced = setTimeout(() => child.kill("SIGKILL"), 20_000);
      await exited;
      clearTimeout(forced);
      await rm(dataDir, { recursive: true, force: true });
      if (process.env.REDIS_URL) await dropRedisPrefix(process.env.REDIS_URL, redisPrefix);
    },
  };
}

/**
 * Starts bench/baseline-relay.ts (a bare `ws` + `node:http` relay that INSERTs each posted message
 * into a table of its own in the PostgreSQL of DATABASE_URL and broadcasts it) as its own process
 * on a free port, with the inspector for heap readings, as startBenchServer does for the service.
 * Needs DATABASE_URL. `stop()` ends it with SIGTERM, on which it drops its table.
 */
/** A child's warnings pass through to ours; the inspector's own banner does not. */
function passWarnings(child: ChildProcess): void {
  createInterface({ input: child.stderr! }).on("line", (line) => {
    if (!/^(Debugger (listening on|ending on|attached)|For help, see:)/.test(line)) process.stderr.write(`${line}\n`);
  });
}

export async function startBaselineRelay(): Promise<BenchServer> {
  if (!process.env.DATABASE_URL) throw new Error("the baseline relay needs DATABASE_URL");
  const port = await freePort();
  const inspectPort = await freePort();
  const child = spawn(
    process.execPath,
    ["--import", "tsx", `--inspect=127.0.0.1:${inspectPort}`, "bench/baseline-relay.ts"],
    {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), BASELINE_TABLE: "bench_baseline_messages" },
      stdio: ["ignore", "inherit", "pipe"],
    },
  );
  passWarnings(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntilReady(url, 30_000);
  } catch (error) {
    child.kill("SIGKILL");
    await exited;
    throw error;
  }
  const heap = await connectInspector(inspectPort);
  return {
    url,
    pid: child.pid!,
    child,
    heap,
    async stop() {
      heap.close();
      child.kill("SIGTERM");
      const forced = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(forced);
    },
  };
}

/** Talks to the server's inspector (only ever on 127.0.0.1) to force a GC and read the heap. */
async function connectInspector(port: number): Promise<NonNullable<BenchServer["heap"]>> {
  const { default: WebSocket } = await import("ws");
  const targets = (await fetch(`http://127.0.0.1:${port}/json/list`).then((response) => response.json())) as {
    webSocketDebuggerUrl: string;
  }[];
  const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
  let nextId = 1;
  const waiting = new Map<number, (result: unknown) => void>();
  socket.on("message", (data: Buffer) => {
    const message = JSON.parse(data.toString()) as { id?: number; result?: unknown };
    if (message.id !== undefined) waiting.get(message.id)?.(message.result);
  });
  const call = (method: string) =>
    new Promise<unknown>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => reject(new Error(`inspector: ${method} timed out`)), 60_000);
      waiting.set(id, (result) => {
        clearTimeout(timer);
        waiting.delete(id);
        resolve(result);
      });
      socket.send(JSON.stringify({ id, method }));
    });
  return {
    async collectAndMeasure() {
      await call("HeapProfiler.collectGarbage");
      const usage = (await call("Runtime.getHeapUsage")) as { usedSize: number; totalSize: number };
      return { usedMiB: usage.usedSize / 2 ** 20, totalMiB: usage.totalSize / 2 ** 20 };
    },
    close: () => socket.close(),
  };
}

/** Removes the keys (queues, throttles) one bench server left under its own prefix. */
async function dropRedisPrefix(redisUrl: string, prefix: string): Promise<void> {
  const { Redis } = await import("ioredis");
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 500);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== "0");
  } catch {
    // Leftover keys under a random prefix are harmless.
  } finally {
    redis.disconnect();
  }
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / ticksPerSecond();
}

/** Resident set size in MiB, from /proc/<pid>/status. */
export function processRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

export type MemoryReading = { rss: number; heap: number };

/**
 * The server's memory at rest (needs `inspect`): a full GC (through the inspector), a few seconds
 * to settle, then RSS averaged over two seconds and the JS heap in use (MiB).
 */
export async function settledMemory(server: BenchServer): Promise<MemoryReading> {
  const heap = await server.heap!.collectAndMeasure();
  await sleep(2000);
  const samples: number[] = [];
  for (let i = 0; i < 8; i++) {
    samples.push(processRssMiB(server.pid));
    await sleep(250);
  }
  return { rss: samples.reduce((sum, value) => sum + value, 0) / samples.length, heap: heap.usedMiB };
}

/** Busy and total jiffies of the whole machine (all cores), from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0]!;
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const total = values.reduce((sum, value) => sum + value, 0);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  return { busy: total - idle, total };
}

/** CPU seconds so far of every process whose command name is in `names` (PostgreSQL, Redis), by pid. */
function cpuByName(names: Set<string>): Map<number, number> {
  const result = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      if (!names.has(name)) continue;
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      result.set(Number(entry), (Number(fields[11]) + Number(fields[12])) / ticksPerSecond());
    } catch {
      // The process ended while we looked.
    }
  }
  return result;
}

const STORE_PROCESSES = new Set(["postgres", "redis-server"]);

/**
 * CPU of the PostgreSQL backends serving the database of `databaseUrl` only (those connected to
 * it at the start or at the end of the window, less the one asking), read from /proc: the
 * PostgreSQL on a shared machine may be serving other work at the same time. Auxiliary processes
 * (WAL writer, checkpointer) are not counted. `finish()` resolves with CPU seconds.
 */
export async function startDatabaseCpuWindow(databaseUrl: string): Promise<{ finish(): Promise<number> }> {
  const { default: postgres } = await import("postgres");
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  const backends = async () =>
    (
      await sql<{ pid: number }[]>`
        select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`
    ).map((row) => row.pid);
  const cpuOf = (pids: number[]) => {
    const result = new Map<number, number>();
    for (const pid of pids) {
      try {
        result.set(pid, processCpuSeconds(pid));
      } catch {
        // The backend ended.
      }
    }
    return result;
  };
  let before: Map<number, number>;
  try {
    before = cpuOf(await backends());
  } catch (error) {
    await sql.end({ timeout: 1 });
    throw error;
  }
  return {
    async finish() {
      try {
        const after = cpuOf([...new Set([...before.keys(), ...(await backends())])]);
        let total = 0;
        for (const [pid, seconds] of after) total += seconds - (before.get(pid) ?? 0);
        return total;
      } finally {
        await sql.end({ timeout: 1 });
      }
    },
  };
}

/**
 * Waits (at most `maxSeconds`) until the machine is nearly idle (under 15% busy over a second),
 * so that a measurement does not start while other work holds the cores. Returns the last
 * busy share seen (100 = every core busy).
 */
export async function waitForQuietMachine(maxSeconds: number): Promise<number> {
  const deadline = performance.now() + maxSeconds * 1000;
  for (;;) {
    const before = machineCpu();
    await sleep(1000);
    const after = machineCpu();
    const busy = ((after.busy - before.busy) / Math.max(1, after.total - before.total)) * 100;
    if (busy < 15 || performance.now() >= deadline) return busy;
  }
}

/**
 * Samples a process's CPU and RSS over a window: CPU% of one core (100 = one full core),
 * RSS at the start, at the end and at its highest (sampled every 250 ms), the CPU of the
 * PostgreSQL and Redis processes and of this process, and the whole machine's busy share
 * (100 = every core busy), so that other work on the machine shows.
 */
export function startUsageWindow(pid: number) {
  const cpu0 = processCpuSeconds(pid);
  const machine0 = machineCpu();
  const self0 = process.cpuUsage();
  const stores0 = cpuByName(STORE_PROCESSES);
  const t0 = performance.now();
  const rssStart = processRssMiB(pid);
  let rssPeak = rssStart;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, processRssMiB(pid));
  }, 250);
  return {
    finish() {
      clearInterval(sampler);
      const seconds = (performance.now() - t0) / 1000;
      const machine1 = machineCpu();
      const self = process.cpuUsage(self0);
      const rssEnd = processRssMiB(pid);
      let storesCpu = 0;
      for (const [storePid, seconds] of cpuByName(STORE_PROCESSES)) storesCpu += seconds - (stores0.get(storePid) ?? 0);
      const serverCpuSeconds = processCpuSeconds(pid) - cpu0;
      const serverCpuPct = (serverCpuSeconds / seconds) * 100;
      const benchCpuPct = ((self.user + self.system) / 1e6 / seconds) * 100;
      const storesCpuPct = (storesCpu / seconds) * 100;
      const machineBusyPct = ((machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total)) * 100;
      return {
        seconds,
        /** CPU seconds (user + system) of the server process. */
        serverCpuSeconds,
        serverCpuPct,
        benchCpuPct,
        /** PostgreSQL and Redis processes together (100 = one core). */
        storesCpuPct,
        machineBusyPct,
        /** Everything else on the machine: other work sharing the cores (100 = one core). */
        otherCpuPct: Math.max(
          0,
          (machineBusyPct / 100) * cpus().length * 100 - serverCpuPct - benchCpuPct - storesCpuPct,
        ),
        rssStart,
        rssEnd,
        rssPeak: Math.max(rssPeak, rssEnd),
      };
    },
  };
}

/** JSON over REST with a bearer token; throws on a non-2xx answer. */
export async function api<T>(
  baseUrl: string,
  method: string,
  route: string,
  token?: string,
  body?: unknown,
): Promise<T> {
  const response = await fetch(`${baseUrl}${route}`, {
    method,
    headers: {
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      ...(token ? { Authorization: `Bearer ${token}` } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${text.slice(0, 300)}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Runs `task` over `items` with at most `limit` at a time. */
export async function mapLimit<T, R>(
  items: T[],
  limit: number,
  task: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/**
 * Open loop: a post falls due every 1/rate seconds whether or not earlier ones have answered,
 * for `seconds` or `maxMessages`; a due post is skipped (and counted) while `maxInFlight` wait.
 * Resolves when the last one answered, with the seconds it all took.
 */
export async function postAtRate(
  post: (seq: number) => Promise<unknown>,
  options: { rate: number; seconds: number; maxMessages: number; maxInFlight: number; onSkip: () => void },
): Promise<number> {
  const { rate, maxMessages } = options;
  const inFlight = new Set<Promise<unknown>>();
  const started = performance.now();
  const end = started + options.seconds * 1000;
  let due = 0;
  while (performance.now() < end && due < maxMessages) {
    const shouldHaveSent = Math.min(maxMessages, Math.floor(((performance.now() - started) / 1000) * rate) + 1);
    while (due < shouldHaveSent) {
      const seq = due++;
      if (inFlight.size >= options.maxInFlight) {
        options.onSkip();
        continue;
      }
      const request = post(seq).finally(() => inFlight.delete(request));
      inFlight.add(request);
    }
    await sleep(Math.max(1, Math.min(20, 1000 / rate / 2)));
  }
  await Promise.all(inFlight);
  return (performance.now() - started) / 1000;
}

/**
 * Posts JSON through node:http with keep-alive connections rather than fetch: the load
 * generator shares the machine with the server, and fetch costs it several times more CPU per
 * request. The answer's body is read only when asked for (else it is drained unread). Without a
 * token no Authorization header is sent; `headers` adds others (a webhook's signature).
 */
const postAgent = new HttpAgent({ keepAlive: true, maxSockets: 128 });
const POST_TIMEOUT_MS = 30_000;
export function postJson(
  url: URL,
  token: string | undefined,
  body: string,
  options: { readBody?: boolean; headers?: Record<string, string> } = {},
): Promise<{ status: number; body?: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      url,
      {
        method: "POST",
        agent: postAgent,
        timeout: POST_TIMEOUT_MS,
        headers: {
          "Content-Type": "application/json",
          "Content-Length": Buffer.byteLength(body),
          ...(token !== undefined && { Authorization: `Bearer ${token}` }),
          ...options.headers,
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        if (options.readBody) response.on("data", (chunk: Buffer) => chunks.push(chunk));
        else response.resume();
        response.once("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            ...(options.readBody && { body: Buffer.concat(chunks).toString("utf8") }),
          }),
        );
        response.once("error", reject);
      },
    );
    request.once("timeout", () => request.destroy(Object.assign(new Error("timed out"), { name: "TimeoutError" })));
    request.once("error", reject);
    request.end(body);
  });
}

/** A positive number from the environment (BENCH_* settings), else the fallback. */
export function envNumber(name: string, fallback: number): number {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

/** A request's answer: its status and body text. */
export type Answer = { status: number; body: string };

/**
 * `call(method, url, token, body?)`: one JSON request with a bearer token over `agent`
 * (keep-alive node:http, so a closed loop measures the server rather than connection set-up).
 */
export function keepAliveCaller(agent: HttpAgent, timeoutMs: number) {
  return function call(method: string, url: string, token: string, body?: unknown): Promise<Answer> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const request = httpRequest(
        url,
        {
          method,
          agent,
          timeout: timeoutMs,
          headers: {
            Authorization: `Bearer ${token}`,
            ...(payload !== undefined && {
              "Content-Type": "application/json",
              "Content-Length": Buffer.byteLength(payload),
            }),
          },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.once("end", () =>
            resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
          );
          response.once("error", reject);
        },
      );
      request.once("timeout", () => request.destroy(Object.assign(new Error("timed out"), { name: "TimeoutError" })));
      request.once("error", reject);
      request.end(payload);
    });
  };
}

/**
 * A database of its own for one run, next to the one of `baseUrl` (created through it), dropped
 * by `drop()`. When it cannot be created (no CREATEDB right), the database of `baseUrl` itself.
 * It is named `bench_<label>_<random hex>`; log lines start with `<label>:`.
 */
export async function freshDatabase(
  baseUrl: string,
  label: string,
  log: (line: string) => void,
): Promise<{ url: string; fresh: boolean; drop(): Promise<void> }> {
  const { default: postgres } = await import("postgres");
  const name = `bench_${label}_${randomBytes(4).toString("hex")}`;
  const admin = () => postgres(baseUrl, { max: 1, onnotice: () => {} });
  const sql = admin();
  try {
    await sql.unsafe(`create database "${name}"`);
  } catch (error) {
    log(`${label}: could not create a fresh database (${(error as Error).message}); using DATABASE_URL's`);
    return { url: baseUrl, fresh: false, drop: async () => {} };
  } finally {
    await sql.end({ timeout: 1 });
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    fresh: true,
    async drop() {
      const sql = admin();
      try {
        await sql.unsafe(`drop database if exists "${name}" with (force)`);
      } catch (error) {
        log(`${label}: could not drop database ${name}: ${(error as Error).message}`);
      } finally {
        await sql.end({ timeout: 1 });
      }
    },
  };
}

/** A small seeded generator (mulberry32): the same seed, the same numbers, so every run picks alike. */
export function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/**
 * Opens a bare `ws` socket to the server's tRPC WebSocket endpoint and sends the sign-in
 * (connection params {token}) as its first frame, as the tRPC client does; `wrap` takes the socket
 * over right after that frame is sent (before any frame of the server's can arrive), and the
 * promise resolves with what it returns. Fails if the socket is not open within 30 s.
 */
export function openTrpcSocket<T>(baseUrl: string, token: string, wrap: (socket: WebSocket) => T): Promise<T> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(trpcSocketUrl(baseUrl), {
      perMessageDeflate: false,
      // The load generator shares the machine: it trusts the server's UTF-8 rather than checking it.
      skipUTF8Validation: true,
    });
    const timer = setTimeout(() => {
      socket.terminate();
      reject(new Error("WebSocket open timed out"));
    }, 30_000);
    socket.once("open", () => {
      clearTimeout(timer);
      socket.send(clientFrames.connectionParams({ token }));
      resolve(wrap(socket));
    });
    socket.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

type Waiter = { resolve: (value: unknown) => void; reject: (error: Error) => void };

/**
 * The requests a bare socket (openTrpcSocket) sends in the tRPC WebSocket protocol, each waiting
 * for the frame with its id: at most 60 s, or until the socket's frame handler settles it through
 * `waiter(id)`, or its close handler through `rejectAll`.
 */
export class TrpcRequests {
  private readonly waiters = new Map<number, Waiter>();
  private nextId = 1;

  constructor(private readonly socket: WebSocket) {}

  /** The id the next request will have. */
  get nextRequestId(): number {
    return this.nextId;
  }

  /** Resolves with the answer's data: a query's `data`, a subscription's `started`. */
  send(method: "query" | "subscription", path: string, input?: unknown): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(id);
        reject(new Error(`${path}: no answer`));
      }, 60_000);
      this.waiters.set(id, {
        resolve: (value) => {
          this.waiters.delete(id);
          clearTimeout(timer);
          resolve(value);
        },
        reject: (error) => {
          this.waiters.delete(id);
          clearTimeout(timer);
          reject(error);
        },
      });
      this.socket.send(clientFrames.request(id, method, path, { input }));
    });
  }

  /** The request still waiting that a frame with this id answers, if any; settling it ends the wait. */
  waiter(id: unknown): Waiter | undefined {
    return typeof id === "number" ? this.waiters.get(id) : undefined;
  }

  /** Fails every request still waiting (the socket closed). */
  rejectAll(message: string): void {
    for (const waiter of this.waiters.values()) waiter.reject(new Error(message));
  }
}
