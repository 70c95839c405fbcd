// Shared machinery of the fault tests (test/faults/*.test.ts): real processes (`npm start`,
// `npm run worker`, a private redis-server) against a fresh PostgreSQL database, the load they
// run under (posters over REST, subscribers over the typed tRPC client on WebSocket, mail
// requests), and the checks afterwards: acknowledged messages in history exactly once, every
// subscriber's events exactly once in position order with no gap against the store.
//
// Every process started here is registered and killed (SIGKILL) by `stopAll()` (each file
// calls it in afterAll) and, as a last resort, when the test process exits.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, mkdtempSync, readFileSync, type WriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { expect } from "vitest";
import WebSocket from "ws";
import { createChatClient, type ChatClient } from "@chat-service/client";
import { freePort } from "../helpers/ports.ts";
import type { FakeSmtp } from "../helpers/smtp.ts";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const ADMIN_DATABASE_URL =
  process.env.FAULTS_ADMIN_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const PASSWORD = "correct-horse-battery";

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A unique tag for names, e-mails and message contents of one run. */
export const runTag = (label: string) => `${label}${randomBytes(3).toString("hex")}`;

// ---- Processes ---------------------------------------------------------------------------

export type Proc = {
  name: string;
  child: ChildProcess;
  pid: number;
  logFile: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  alive(): boolean;
  /** The last `lines` lines of its output. */
  tail(lines?: number): string;
  kill(signal?: NodeJS.Signals): void;
};

const procs = new Set<Proc>();
const cleanups: (() => Promise<void>)[] = [];
let workDir: string | undefined;

/** One temporary folder per test file: logs and DATA_DIRs. */
export function faultDir(): string {
  workDir ??= mkdtempSync(path.join(tmpdir(), "chat-faults-"));
  return workDir;
}

process.once("exit", () => {
  for (const proc of procs) if (proc.alive()) proc.child.kill("SIGKILL");
});

export function spawnProc(name: string, command: string, args: string[], env: Record<string, string>): Proc {
  const logFile = path.join(faultDir(), `${name}.log`);
  const log: WriteStream = createWriteStream(logFile, { flags: "a" });
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.pipe(log, { end: false });
  child.stderr!.pipe(log, { end: false });
  let exitState: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      exitState = { code, signal };
      resolve(exitState);
    }),
  );
  const proc: Proc = {
    name,
    child,
    pid: child.pid!,
    logFile,
    exited,
    alive: () => exitState === undefined && child.exitCode === null && child.signalCode === null,
    tail(lines = 30) {
      try {
        return readFileSync(logFile, "utf8").split("\n").slice(-lines).join("\n");
      } catch {
        return "";
      }
    },
    kill(signal = "SIGKILL") {
      if (proc.alive()) child.kill(signal);
    },
  };
  procs.add(proc);
  void exited.then(() => setTimeout(() => log.end(), 100));
  return proc;
}

/** Kills (SIGKILL) every process this file started, drops its databases, removes its folder. */
export async function stopAll(): Promise<void> {
  const waiting: Promise<unknown>[] = [];
  for (const proc of procs) {
    if (proc.alive()) {
      proc.child.kill("SIGKILL");
      waiting.push(Promise.race([proc.exited, sleep(5_000)]));
    }
  }
  await Promise.all(waiting);
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  if (workDir && !process.env.FAULTS_KEEP_LOGS) await rm(workDir, { recursive: true, force: true });
}

// ---- PostgreSQL --------------------------------------------------------------------------

export type TestDatabase = { name: string; url: string; sql: postgres.Sql };

/** A fresh database on the local PostgreSQL, dropped by stopAll(). */
export async function createDatabase(): Promise<TestDatabase> {
  const name = `chat_faults_${randomBytes(6).toString("hex")}`;
  const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  const sql = postgres(url.toString(), { max: 2, onnotice: () => {} });
  cleanups.push(async () => {
    await sql.end({ timeout: 2 });
    const cleanup = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
    await cleanup.unsafe(`drop database if exists ${name} with (force)`);
    await cleanup.end();
  });
  return { name, url: url.toString(), sql };
}

/** The application_name (PGAPPNAME of the process) whose connection holds the relay's advisory lock. */
export async function relayLockHolder(db: TestDatabase): Promise<string | undefined> {
  const rows = await db.sql<{ application_name: string }[]>`
    select a.application_name from pg_locks l join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'advisory' and l.granted and l.objid = 72410032 and l.database = (
      select oid from pg_database where datname = current_database())`;
  return rows[0]?.application_name;
}

/** Whether a process (by its PGAPPNAME) has a connection to the database. */
export async function isConnected(db: TestDatabase, applicationName: string): Promise<boolean> {
  const rows =
    await db.sql`select 1 from pg_stat_activity where datname = current_database() and application_name = ${applicationName}`;
  return rows.length > 0;
}

/** message.created events of a channel in the store: position and message id, in position order. */
export async function channelEvents(
  db: TestDatabase,
  channelId: string,
): Promise<{ position: number | null; messageId: string }[]> {
  const rows = await db.sql<{ position: string | null; message_id: string }[]>`
    select position::text as position, payload->'data'->'message'->>'id' as message_id from stream_events
    where stream = ${`channel:${channelId}`} and payload->>'type' = 'message.created'
    order by position nulls last, id`;
  return rows.map((row) => ({
    position: row.position === null ? null : Number(row.position),
    messageId: row.message_id,
  }));
}

// ---- Redis -------------------------------------------------------------------------------

export type PrivateRedis = {
  port: number;
  url: string;
  proc(): Proc;
  /** kill -9: the data (queues, counters) is gone, as with --save "" it was never on disk. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: a hung Redis, connections open, nothing answered. */
  pause(): void;
  resume(): void;
  start(): Promise<void>;
};

export async function startPrivateRedis(label = "redis"): Promise<PrivateRedis> {
  const port = await freePort();
  let current: Proc | undefined;
  let generation = 0;
  const redis: PrivateRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    proc: () => current!,
    async kill() {
      if (!current?.alive()) return;
      current.kill("SIGKILL");
      await current.exited;
    },
    pause: () => current?.kill("SIGSTOP"),
    resume: () => current?.kill("SIGCONT"),
    async start() {
      current = spawnProc(
        `${label}-${++generation}`,
        "redis-server",
        ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", faultDir()],
        {},
      );
      const deadline = Date.now() + 10_000;
      for (;;) {
        const ping = spawnSync("redis-cli", ["-p", String(port), "ping"], { encoding: "utf8" });
        if (ping.stdout.trim() === "PONG") return;
        if (!current.alive()) throw new Error(`redis-server exited:\n${current.tail()}`);
        if (Date.now() > deadline) throw new Error(`redis-server did not answer on ${port}:\n${current.tail()}`);
        await sleep(50);
      }
    },
  };
  await redis.start();
  return redis;
}

// ---- The chat service --------------------------------------------------------------------

export type ServiceEnv = Record<string, string>;

/** The environment shared by every process of one deployment (database, Redis, key, mail). */
export function deploymentEnv(options: { databaseUrl: string; redisUrl: string; smtpUrl?: string }): ServiceEnv {
  return {
    DATABASE_URL: options.databaseUrl,
    REDIS_URL: options.redisUrl,
    REDIS_PREFIX: `faults-${randomBytes(4).toString("hex")}`,
    APP_KEY: randomBytes(32).toString("base64url"),
    HOST: "127.0.0.1",
    LOG_LEVEL: process.env.FAULTS_LOG_LEVEL ?? "warn",
    ...(options.smtpUrl && { SMTP_URL: options.smtpUrl }),
  };
}

export type ServerProc = { name: string; port: number; url: string; proc(): Proc; restart(): Promise<void> };

function tsxArgs(entry: string) {
  return ["--import", "tsx", entry];
}

async function waitHealthy(url: string, proc: Proc, timeoutMs = 45_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!proc.alive()) throw new Error(`${proc.name} exited before it was healthy:\n${proc.tail()}`);
    try {
      const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1_000) });
      if (response.status === 200) return;
    } catch {
      // Not listening yet.
    }
    await sleep(100);
  }
  throw new Error(`${proc.name} was not healthy within ${timeoutMs} ms:\n${proc.tail()}`);
}

/** `npm start` (node --import tsx server/main.ts) on a port of its own; restart() reuses the port. */
export async function startServer(name: string, env: ServiceEnv, port?: number): Promise<ServerProc> {
  const chosen = port ?? (await freePort());
  const dataDir = path.join(faultDir(), `data-${name}`);
  let current: Proc | undefined;
  let generation = 0;
  const url = `http://127.0.0.1:${chosen}`;
  const server: ServerProc = {
    name,
    port: chosen,
    url,
    proc: () => current!,
    async restart() {
      current = spawnProc(`${name}-${++generation}`, process.execPath, tsxArgs("server/main.ts"), {
        ...env,
        PORT: String(chosen),
        APP_URL: url,
        DATA_DIR: dataDir,
        PGAPPNAME: name,
      });
      await waitHealthy(url, current);
    },
  };
  await server.restart();
  return server;
}

/** `npm run worker` (node --import tsx workers/main.ts): BullMQ workers only. */
export async function startWorker(name: string, env: ServiceEnv): Promise<Proc> {
  const proc = spawnProc(name, process.execPath, tsxArgs("workers/main.ts"), {
    ...env,
    PORT: "0",
    DATA_DIR: path.join(faultDir(), `data-${name}`),
    PGAPPNAME: name,
  });
  // Ready once its relay contends for the lock (its PostgreSQL connections show up).
  await sleep(500);
  if (!proc.alive()) throw new Error(`${name} exited:\n${proc.tail()}`);
  return proc;
}

// ---- REST --------------------------------------------------------------------------------

export type Reply = { status: number; body: any; ms: number; error?: string };

/** One REST call with a deadline; status 0 when no HTTP answer came (refused, reset, timeout). */
export async function call(
  baseUrl: string,
  method: string,
  pathname: string,
  options: { body?: unknown; token?: string; timeoutMs?: number } = {},
): Promise<Reply> {
  const started = performance.now();
  const headers: Record<string, string> = { Accept: "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (options.token) headers.Authorization = `Bearer ${options.token}`;
  try {
    const response = await fetch(baseUrl + pathname, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
    });
    const text = await response.text();
    let body: any = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      // Not JSON: kept as text.
    }
    return { status: response.status, body, ms: performance.now() - started };
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const reason =
      (error as Error).name === "TimeoutError" ? "timeout" : (cause?.code ?? cause?.message ?? String(error));
    return { status: 0, body: undefined, ms: performance.now() - started, error: reason };
  }
}

export type User = { id: number; email: string; token: string; name: string };

export async function register(baseUrl: string, label: string): Promise<User> {
  const email = `${label}-${randomBytes(5).toString("hex")}@example.test`;
  const name = label;
  const reply = await call(baseUrl, "POST", "/api/v1/auth/app/register", {
    body: { name, email, password: PASSWORD, password_confirmation: PASSWORD },
    timeoutMs: 20_000,
  });
  if (reply.status !== 200) throw new Error(`register ${email}: ${reply.status} ${JSON.stringify(reply.body)}`);
  return { id: reply.body.user.id, email: reply.body.user.email, token: reply.body.access_token, name };
}

async function expectStatus(reply: Reply, status: number[], what: string): Promise<any> {
  if (!status.includes(reply.status))
    throw new Error(`${what}: ${reply.status} ${reply.error ?? ""} ${JSON.stringify(reply.body)}`);
  return reply.body;
}

export type Room = { workspaceId: string; channelIds: string[] };

/**
 * A public workspace owned by `owner`, with #general and `extraChannels` public channels; every
 * member joins the workspace (and so #general) and each extra channel.
 */
export async function buildRoom(baseUrl: string, owner: User, members: User[], extraChannels = 1): Promise<Room> {
  const workspace = await expectStatus(
    await call(baseUrl, "POST", "/api/v1/workspaces", {
      body: { name: `Faults ${randomBytes(3).toString("hex")}`, visibility: "public" },
      token: owner.token,
    }),
    [201],
    "workspace",
  );
  const workspaceId: string = workspace.data.id;
  const channels = await expectStatus(
    await call(baseUrl, "GET", `/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token }),
    [200],
    "channels",
  );
  const general = (channels.data as { id: string; slug: string }[]).find((channel) => channel.slug === "general")!;
  const channelIds = [general.id];
  for (let index = 0; index < extraChannels; index++) {
    const channel = await expectStatus(
      await call(baseUrl, "POST", `/api/v1/workspaces/${workspaceId}/channels`, {
        body: { name: `load ${index} ${randomBytes(3).toString("hex")}`, visibility: "public" },
        token: owner.token,
      }),
      [201],
      "channel",
    );
    channelIds.push(channel.data.id);
  }
  for (const member of members) {
    await expectStatus(
      await call(baseUrl, "POST", `/api/v1/workspaces/${workspaceId}/join`, { body: {}, token: member.token }),
      [200],
      "join workspace",
    );
    for (const channelId of channelIds.slice(1)) {
      await expectStatus(
        await call(baseUrl, "POST", `/api/v1/workspaces/${workspaceId}/channels/${channelId}/join`, {
          body: {},
          token: member.token,
        }),
        [200, 201],
        "join channel",
      );
    }
  }
  return { workspaceId, channelIds };
}

/** The whole history of a channel, oldest first (REST, pages of 100). */
export async function channelHistory(
  baseUrl: string,
  token: string,
  workspaceId: string,
  channelId: string,
): Promise<{ id: string; content: string }[]> {
  const all: { id: string; content: string }[] = [];
  let before: string | undefined;
  for (let page = 0; page < 1000; page++) {
    const query = `?limit=100${before ? `&before=${encodeURIComponent(before)}` : ""}`;
    const reply = await call(
      baseUrl,
      "GET",
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages${query}`,
      {
        token,
        timeoutMs: 20_000,
      },
    );
    const body = await expectStatus(reply, [200], "history");
    all.push(...(body.data as { id: string; content: string }[]));
    before = body.meta?.next_cursor ?? undefined;
    if (!before) break;
  }
  return all.reverse();
}

// ---- Load: posters -----------------------------------------------------------------------

export type PostRecord = {
  content: string;
  channelId: string;
  server: string;
  status: number;
  ms: number;
  startedAt: number;
  messageId?: string;
  error?: string;
  body?: unknown;
};

export type Target = { name: string; url: string };

/**
 * Posters: each user posts to its channel in a loop (a pause between posts), to its preferred
 * server, moving to the next server in `targets()` after a request that got no HTTP answer
 * (what a load balancer's health check does). Unique contents: `${tag}-${poster}-${n}`.
 */
export function startPosters(options: {
  tag: string;
  room: Room;
  posters: { user: User; channelId: string; preferred: number }[];
  targets: () => Target[];
  pauseMs?: number;
  timeoutMs?: number;
}): { records: PostRecord[]; stop(): Promise<void> } {
  const records: PostRecord[] = [];
  let running = true;
  const loops = options.posters.map(async ({ user, channelId, preferred }, posterIndex) => {
    let serverIndex = preferred;
    for (let n = 0; running; n++) {
      const targets = options.targets();
      const target = targets[serverIndex % targets.length]!;
      const content = `${options.tag}-p${posterIndex}-${n}`;
      const startedAt = Date.now();
      const reply = await call(
        target.url,
        "POST",
        `/api/v1/workspaces/${options.room.workspaceId}/channels/${channelId}/messages`,
        { body: { content }, token: user.token, timeoutMs: options.timeoutMs ?? 10_000 },
      );
      records.push({
        content,
        channelId,
        server: target.name,
        status: reply.status,
        ms: reply.ms,
        startedAt,
        ...(reply.status === 201 ? { messageId: reply.body?.data?.id } : { body: reply.body }),
        ...(reply.error && { error: reply.error }),
      });
      if (reply.status === 0) {
        serverIndex++;
        await sleep(100);
      }
      await sleep(options.pauseMs ?? 40);
    }
  });
  return {
    records,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

// ---- Load: subscribers -------------------------------------------------------------------

export type Delivery = {
  position: number;
  type: string;
  messageId?: string;
  content?: string;
  at: number;
  via: string;
};

export type Subscriber = {
  label: string;
  user: User;
  channelId: string;
  deliveries: Delivery[];
  errors: string[];
  starts: number;
  /** Where it is connected now. */
  server: Target;
  lastPosition(): string | undefined;
  /** Subscribes on `server`, from `lastEventId` when given. */
  open(server: Target, lastEventId?: string): void;
  close(): void;
};

const openClients = new Set<ChatClient>();

export function closeAllClients(): void {
  for (const client of openClients) client.close();
  openClients.clear();
}

export function subscriber(label: string, user: User, room: Room, channelId: string): Subscriber {
  let client: ChatClient | undefined;
  let subscription: { unsubscribe(): void } | undefined;
  const sub: Subscriber = {
    label,
    user,
    channelId,
    deliveries: [],
    errors: [],
    starts: 0,
    server: { name: "-", url: "" },
    lastPosition() {
      const last = sub.deliveries.at(-1);
      return last ? String(last.position) : undefined;
    },
    open(server, lastEventId) {
      sub.close();
      sub.server = server;
      const opened = createChatClient({
        url: server.url,
        token: user.token,
        webSocket: { WebSocket },
      });
      client = opened;
      openClients.add(opened);
      subscription = opened.messages.onChannel.subscribe(
        { workspace_id: room.workspaceId, channel_id: channelId, ...(lastEventId && { lastEventId }) },
        {
          onStarted: () => {
            sub.starts++;
          },
          onData: (value) => {
            const envelope = value as { id: string; data: { type: string; data: any } };
            const event = envelope.data;
            sub.deliveries.push({
              position: Number(envelope.id),
              type: event.type,
              ...(event.type === "message.created" && {
                messageId: event.data.message.id as string,
                content: event.data.message.content as string,
              }),
              at: Date.now(),
              via: server.name,
            });
          },
          onError: (error) => {
            const data = (error as { data?: { code?: string } }).data;
            sub.errors.push(`${data?.code ?? ""} ${(error as Error).message}`.trim());
          },
        },
      );
    },
    close() {
      subscription?.unsubscribe();
      subscription = undefined;
      if (client) {
        client.close();
        openClients.delete(client);
      }
      client = undefined;
    },
  };
  return sub;
}

export async function waitStarted(subs: Subscriber[], atLeast = 1, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (subs.some((sub) => sub.starts < atLeast)) {
    if (Date.now() > deadline) {
      const late = subs.filter((sub) => sub.starts < atLeast).map((sub) => `${sub.label} (${sub.errors.join("; ")})`);
      throw new Error(`subscriptions did not start: ${late.join(", ")}`);
    }
    await sleep(25);
  }
}

// ---- Mail requests -----------------------------------------------------------------------

export type MailRequest = {
  kind: "otp" | "reset";
  email: string;
  server: string;
  status: number;
  ms: number;
  startedAt: number;
  error?: string;
  body?: unknown;
};

export async function requestMail(target: Target, kind: "otp" | "reset", email: string): Promise<MailRequest> {
  const startedAt = Date.now();
  const reply = await call(
    target.url,
    "POST",
    kind === "otp" ? "/api/v1/auth/app/otp" : "/api/v1/auth/app/forgot-password",
    { body: { email }, timeoutMs: 15_000 },
  );
  return {
    kind,
    email,
    server: target.name,
    status: reply.status,
    ms: reply.ms,
    startedAt,
    ...(reply.error && { error: reply.error }),
    ...(reply.status !== 200 && { body: reply.body }),
  };
}

export const MAIL_SUBJECTS = {
  otp: "Your sign-in code",
  reset: "Reset your password",
  verify: "Verify your e-mail address",
} as const;

export type MailCheck = {
  requested: number;
  accepted: number;
  fivexx: number;
  other: number;
  missing: string[];
  duplicated: string[];
};

/**
 * Every accepted mail request (200), and every registration's verification mail, has exactly
 * one mail of its kind at the fake SMTP server (waits up to `timeoutMs` for the last, then 2 s
 * more for a second copy to show up).
 */
export async function checkMails(
  smtp: FakeSmtp,
  requests: MailRequest[],
  registered: User[],
  timeoutMs: number,
): Promise<MailCheck> {
  const wanted = [
    ...requests
      .filter((request) => request.status === 200)
      .map((request) => ({ email: request.email, subject: MAIL_SUBJECTS[request.kind] })),
    ...registered.map((user) => ({ email: user.email, subject: MAIL_SUBJECTS.verify })),
  ];
  const count = (email: string, subject: string) =>
    smtp.mailsTo(email).filter((mail) => mail.subject === subject).length;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && wanted.some(({ email, subject }) => count(email, subject) === 0)) await sleep(250);
  await sleep(2_000);
  return {
    requested: requests.length,
    accepted: requests.filter((request) => request.status === 200).length,
    fivexx: requests.filter((request) => request.status >= 500).length,
    other: requests.filter((request) => request.status !== 200 && request.status < 500).length,
    missing: wanted
      .filter(({ email, subject }) => count(email, subject) === 0)
      .map(({ email, subject }) => `${subject} → ${email}`),
    duplicated: wanted
      .filter(({ email, subject }) => count(email, subject) > 1)
      .map(({ email, subject }) => `${subject} → ${email} x${count(email, subject)}`),
  };
}

// ---- Checks ------------------------------------------------------------------------------

export type SubscriberReport = {
  label: string;
  delivered: number;
  expected: number;
  missed: string[];
  duplicates: number;
  outOfOrder: number;
  unexpected: number;
  errors: string[];
  via: string;
};

export type RunReport = {
  tried: number;
  acked: number;
  fivexx: number;
  noAnswer: number;
  other: number;
  lost: string[];
  duplicated: string[];
  storedUnacked: number;
  unpositioned: number;
  subscribers: SubscriberReport[];
  outOfOrder: number;
  missed: number;
  subDuplicates: number;
  maxPostMs: number;
};

/**
 * What every fault run must show: each acknowledged message in history exactly once, every
 * event positioned, and every subscriber's events exactly once, in order, none missing.
 */
export function expectNothingLost(report: RunReport): void {
  expect.soft(report.lost, "acknowledged messages missing from history").toEqual([]);
  expect.soft(report.duplicated, "messages more than once in history").toEqual([]);
  expect.soft(report.unpositioned, "events the relay never positioned").toBe(0);
  for (const sub of report.subscribers) {
    expect.soft(sub.missed, `${sub.label} missed positions`).toEqual([]);
    expect.soft(sub.duplicates, `${sub.label} duplicates`).toBe(0);
    expect.soft(sub.outOfOrder, `${sub.label} out of order`).toBe(0);
    expect.soft(sub.unexpected, `${sub.label} events not in the store`).toBe(0);
    expect.soft(sub.errors, `${sub.label} subscription errors`).toEqual([]);
  }
}

/**
 * Compares what was acknowledged with history (REST, from `historyUrl`) and with the store, and
 * each subscriber's deliveries with its channel's message.created events in the store after
 * the position it started from (`fromPosition`, 0 when it subscribed before the first post).
 */
export async function checkRun(options: {
  db: TestDatabase;
  historyUrl: string;
  reader: User;
  room: Room;
  posts: PostRecord[];
  subscribers: Subscriber[];
  fromPosition?: (sub: Subscriber) => number;
}): Promise<RunReport> {
  const { posts } = options;
  const acked = posts.filter((post) => post.status === 201);
  const historyByChannel = new Map<string, { id: string; content: string }[]>();
  for (const channelId of options.room.channelIds) {
    historyByChannel.set(
      channelId,
      await channelHistory(options.historyUrl, options.reader.token, options.room.workspaceId, channelId),
    );
  }
  const counts = new Map<string, number>();
  for (const history of historyByChannel.values())
    for (const message of history) counts.set(message.content, (counts.get(message.content) ?? 0) + 1);
  const lost = acked.filter((post) => !counts.has(post.content)).map((post) => post.content);
  const duplicated = [...counts].filter(([, count]) => count > 1).map(([content, count]) => `${content} x${count}`);
  const storedUnacked = posts.filter((post) => post.status !== 201 && counts.has(post.content)).length;

  const eventsByChannel = new Map<string, { position: number | null; messageId: string }[]>();
  for (const channelId of options.room.channelIds)
    eventsByChannel.set(channelId, await channelEvents(options.db, channelId));
  const unpositioned = [...eventsByChannel.values()].flat().filter((event) => event.position === null).length;

  const subscribers = options.subscribers.map((sub): SubscriberReport => {
    const from = options.fromPosition?.(sub) ?? 0;
    const expected = eventsByChannel
      .get(sub.channelId)!
      .filter((event) => event.position !== null && event.position > from);
    const messages = sub.deliveries.filter((delivery) => delivery.type === "message.created");
    const positions = messages.map((delivery) => delivery.position);
    let outOfOrder = 0;
    for (let index = 1; index < positions.length; index++) if (positions[index]! <= positions[index - 1]!) outOfOrder++;
    const seen = new Set<number>();
    let duplicates = 0;
    for (const position of positions) {
      if (seen.has(position)) duplicates++;
      seen.add(position);
    }
    const expectedPositions = new Set(expected.map((event) => event.position!));
    const missed = expected.filter((event) => !seen.has(event.position!)).map((event) => String(event.position));
    const unexpected = [...seen].filter((position) => !expectedPositions.has(position)).length;
    return {
      label: sub.label,
      delivered: messages.length,
      expected: expected.length,
      missed,
      duplicates,
      outOfOrder,
      unexpected,
      errors: sub.errors,
      via: [...new Set(sub.deliveries.map((delivery) => delivery.via))].join(">"),
    };
  });
  return {
    tried: posts.length,
    acked: acked.length,
    fivexx: posts.filter((post) => post.status >= 500).length,
    noAnswer: posts.filter((post) => post.status === 0).length,
    other: posts.filter((post) => post.status !== 0 && post.status !== 201 && post.status < 500).length,
    lost,
    duplicated,
    storedUnacked,
    unpositioned,
    subscribers,
    outOfOrder: subscribers.reduce((sum, sub) => sum + sub.outOfOrder, 0),
    missed: subscribers.reduce((sum, sub) => sum + sub.missed.length, 0),
    subDuplicates: subscribers.reduce((sum, sub) => sum + sub.duplicates, 0),
    maxPostMs: Math.round(Math.max(0, ...acked.map((post) => post.ms))),
  };
}

/** Waits until every subscriber has every positioned event of its channel after its start (or the deadline). */
export async function waitCaughtUp(
  db: TestDatabase,
  subs: Subscriber[],
  timeoutMs: number,
  fromPosition: (sub: Subscriber) => number = () => 0,
): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    let behind = false;
    const cache = new Map<string, { position: number | null }[]>();
    for (const sub of subs) {
      let events = cache.get(sub.channelId);
      if (!events) cache.set(sub.channelId, (events = await channelEvents(db, sub.channelId)));
      if (events.some((event) => event.position === null)) behind = true;
      const seen = new Set(sub.deliveries.map((delivery) => delivery.position));
      const from = fromPosition(sub);
      if (events.some((event) => event.position !== null && event.position > from && !seen.has(event.position)))
        behind = true;
    }
    if (!behind) return Date.now() - started;
    await sleep(250);
  }
  return Date.now() - started;
}

export function summaryLine(label: string, report: RunReport, extra: Record<string, string | number> = {}): string {
  const fields: Record<string, string | number> = {
    tried: report.tried,
    acked: report.acked,
    "5xx": report.fivexx,
    no_answer: report.noAnswer,
    other_4xx: report.other,
    lost: report.lost.length,
    duplicated: report.duplicated.length,
    stored_unacked: report.storedUnacked,
    unpositioned: report.unpositioned,
    out_of_order: report.outOfOrder,
    sub_missed: report.missed,
    sub_duplicates: report.subDuplicates,
    max_post_ms: report.maxPostMs,
    ...extra,
  };
  return `FAULTS ${label}: ${Object.entries(fields)
    .map(([key, value]) => `${key}=${value}`)
    .join(" ")}`;
}

export function describeSubscribers(report: RunReport): string {
  return report.subscribers
    .map(
      (sub) =>
        `  ${sub.label} via ${sub.via}: ${sub.delivered}/${sub.expected} delivered, missed ${sub.missed.length}` +
        (sub.missed.length
          ? ` (positions ${sub.missed.slice(0, 8).join(",")}${sub.missed.length > 8 ? ",…" : ""})`
          : "") +
        `, dup ${sub.duplicates}, out of order ${sub.outOfOrder}, unexpected ${sub.unexpected}` +
        (sub.errors.length ? `, errors: ${sub.errors.slice(0, 3).join(" | ")}` : ""),
    )
    .join("\n");
}

/** Status histogram of failed requests, with one example body each. */
export function failureDigest(records: { status: number; error?: string; body?: unknown; server: string }[]): string {
  const groups = new Map<string, { count: number; example: string }>();
  for (const record of records) {
    if (record.status === 201 || record.status === 200) continue;
    const key = `${record.status}${record.error ? ` ${record.error}` : ""} @${record.server}`;
    const group = groups.get(key) ?? { count: 0, example: JSON.stringify(record.body ?? null).slice(0, 200) };
    group.count++;
    groups.set(key, group);
  }
  return [...groups].map(([key, group]) => `  ${group.count} x ${key}: ${group.example}`).join("\n") || "  (none)";
}
