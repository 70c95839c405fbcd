// WEB_CONCURRENCY: `npm start` as several server processes on one port (server/cluster.ts).
// Above 1 it needs DATABASE_URL and REDIS_URL, through which the processes share live events,
// throttles and presence. With them: the primary runs N processes, requests reach each of them,
// a live subscriber on one hears what is posted through another, a process that dies is
// replaced, and SIGTERM to the primary drains them all and exits 0.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../server/config.ts";
import { restClient } from "./helpers/api.ts";
import { world } from "./helpers/live.ts";
import { freePort } from "./helpers/ports.ts";
import { createDatabase } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";
import { groupAlive } from "./helpers/process-group.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const sharedServices = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
// Valid URLs that loadConfig never connects to.
const SHARED = { DATABASE_URL: "postgres://chat@127.0.0.1:1/chat", REDIS_URL: "redis://127.0.0.1:1" };

type Started = { child: ChildProcess; output: () => string; exited: Promise<number | null> };

/** `node --import tsx server/main.ts` in a process group of its own, so a failed test can stop all of it. */
function startMain(env: Record<string, string>): Started {
  const child = spawn(process.execPath, ["--import", "tsx", "server/main.ts"], {
    cwd: ROOT,
    detached: true,
    env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, output: () => output, exited };
}

type LogLine = { msg: string; pid: number; reqId?: string };
const logLines = (output: string): LogLine[] =>
  output.split("\n").flatMap((line) => {
    try {
      return [JSON.parse(line) as LogLine];
    } catch {
      return [];
    }
  });
/** The server processes that have said they listen, in order. */
const listeningPids = (output: string) =>
  logLines(output)
    .filter((line) => line.msg === "chat service listening")
    .map((line) => line.pid);

/** The node processes whose parent is `pid` (Linux: /proc/<pid>/stat is "pid (comm) state ppid ..."). */
function nodeChildrenOf(pid: number): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .flatMap((name) => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, "utf8");
        const [, comm, ppid] = /^\d+ \((.*)\) \S+ (\d+)/.exec(stat) ?? [];
        return comm === "node" && Number(ppid) === pid ? [Number(name)] : [];
      } catch {
        return []; // it exited while we looked
      }
    });
}

async function answers(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/healthz`)).ok;
  } catch {
    return false;
  }
}

describe("WEB_CONCURRENCY configuration", () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "chat-concurrency-"));
  });
  afterEach(() => rm(dataDir, { recursive: true, force: true }));

  const configError = (variables: Record<string, string>): string => {
    try {
      loadConfig({ DATA_DIR: dataDir, ...variables });
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as ConfigError).message;
    }
    throw new Error(`loadConfig accepted ${JSON.stringify(variables)}`);
  };

  it("is 1 by default, and any whole number up to 64 with DATABASE_URL and REDIS_URL", () => {
    expect(loadConfig({ DATA_DIR: dataDir }).webConcurrency).toBe(1);
    expect(loadConfig({ DATA_DIR: dataDir, WEB_CONCURRENCY: "1" }).webConcurrency).toBe(1);
    expect(loadConfig({ DATA_DIR: dataDir, WEB_CONCURRENCY: "4", ...SHARED }).webConcurrency).toBe(4);
    expect(loadConfig({ DATA_DIR: dataDir, WEB_CONCURRENCY: "64", ...SHARED }).webConcurrency).toBe(64);
  });

  it.each(["0", "65", "two", "1.5", "-2"])("refuses %j, naming the variable and the range", (value) => {
    expect(configError({ WEB_CONCURRENCY: value, ...SHARED })).toBe(
      `Invalid configuration: WEB_CONCURRENCY must be a number of server processes: a whole number from 1 to 64 (got ${JSON.stringify(value)})`,
    );
  });

  it("above 1 refuses to start without DATABASE_URL or REDIS_URL, naming the one missing", () => {
    expect(configError({ WEB_CONCURRENCY: "2", REDIS_URL: SHARED.REDIS_URL })).toBe(
      "Invalid configuration: DATABASE_URL must be set when WEB_CONCURRENCY is above 1 (the embedded database serves one process only)",
    );
    expect(configError({ WEB_CONCURRENCY: "2", DATABASE_URL: SHARED.DATABASE_URL })).toBe(
      "Invalid configuration: REDIS_URL must be set when WEB_CONCURRENCY is above 1 (the processes share live events, throttles and presence through Redis)",
    );
    const both = configError({ WEB_CONCURRENCY: "3" });
    expect(both).toMatch(/^Invalid configuration: DATABASE_URL must be set .*; REDIS_URL must be set /);
  });

  it("npm start with WEB_CONCURRENCY=2 and no DATABASE_URL: exit 78 and one line naming it, no process left", async () => {
    const started = startMain({ DATA_DIR: dataDir, WEB_CONCURRENCY: "2", REDIS_URL: SHARED.REDIS_URL });
    expect(await started.exited).toBe(78);
    expect(started.output()).toMatch(/^Invalid configuration: DATABASE_URL must be set when WEB_CONCURRENCY[^\n]*\n$/);
    await until(() => (groupAlive(started.child.pid!) ? undefined : true), "the process group to be gone");
  }, 60_000);
});

describe.runIf(sharedServices)("WEB_CONCURRENCY=2 with PostgreSQL and Redis", () => {
  let started: Started;
  let url: string;
  let dataDir: string;
  let database: { url: string; drop(): Promise<void> };
  const api = () => restClient(url);
  const live = world(
    () => ({ url }),
    () => api(),
  );

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "chat-concurrency-"));
    database = await createDatabase(process.env.DATABASE_URL!);
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    started = startMain({
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: "127.0.0.1",
      APP_URL: url,
      DATABASE_URL: database.url,
      REDIS_URL: process.env.REDIS_URL!,
      REDIS_PREFIX: `test-${randomBytes(6).toString("hex")}`,
      // Push never leaves the machine (as in test/helpers/server.ts).
      PUSH_EXPO_URL: "http://127.0.0.1:9/--/api/v2/push/send",
      WEB_CONCURRENCY: "2",
    });
    await until(
      async () => {
        if (started.child.exitCode !== null) throw new Error(`npm start exited early:\n${started.output()}`);
        return listeningPids(started.output()).length === 2 && (await answers(url)) ? true : undefined;
      },
      "both server processes listening",
      120_000,
    );
  }, 150_000);

  afterAll(async () => {
    // Whatever a failed test left running is stopped here, the whole group.
    if (started && groupAlive(started.child.pid!)) process.kill(-started.child.pid!, "SIGKILL");
    await database?.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("runs two server processes under the primary, which serves nothing itself", () => {
    const primary = started.child.pid!;
    const servers = listeningPids(started.output());
    expect(new Set(servers).size).toBe(2);
    expect(servers).not.toContain(primary);
    expect(nodeChildrenOf(primary).sort()).toEqual([...servers].sort());
  });

  it("spreads connections over both, and a live subscriber on one receives every message posted through either", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id);

    // A connection of its own per post, so that the primary hands them to the processes in turn.
    const requestIds = Array.from({ length: 8 }, (_, i) => `web-concurrency-${i}-${randomBytes(4).toString("hex")}`);
    for (const [i, requestId] of requestIds.entries()) {
      const response = await fetch(`${url}/api/v1/workspaces/${workspace.id}/channels/${general.id}/messages`, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${owner.token}`,
          "Content-Type": "application/json",
          Connection: "close",
          "X-Request-Id": requestId,
        },
        body: JSON.stringify({ content: `post ${i}` }),
      });
      expect(response.status).toBe(201);
    }

    await until(
      () => (requestIds.every((_, i) => feed.messages().some((m) => m.content === `post ${i}`)) ? true : undefined),
      "every post on the live feed",
      15_000,
    );
    expect(feed.messages().map((m) => m.content)).toEqual(requestIds.map((_, i) => `post ${i}`));
    // Each process logs the requests it served, under its own pid.
    const servedBy = await until(() => {
      const lines = logLines(started.output()).filter((line) => requestIds.includes(line.reqId ?? ""));
      return lines.length === requestIds.length ? new Set(lines.map((line) => line.pid)) : undefined;
    }, "a request log line for every post");
    expect([...servedBy].sort()).toEqual([...listeningPids(started.output())].sort());
  }, 60_000);

  it("replaces a server process that dies", async () => {
    const primary = started.child.pid!;
    const [victim, survivor] = listeningPids(started.output());
    process.kill(victim!, "SIGKILL");

    const replacement = await until(
      () => listeningPids(started.output()).find((pid) => pid !== victim && pid !== survivor),
      "a replacement server process listening",
      60_000,
    );
    expect(nodeChildrenOf(primary).sort()).toEqual([survivor!, replacement].sort());
    expect(await answers(url)).toBe(true);
    expect(logLines(started.output()).map((line) => line.msg)).toContain("a server process exited: starting another");
  }, 90_000);

  it("SIGTERM to the primary drains every process and exits 0 within seconds", async () => {
    const primary = started.child.pid!;
    const servers = nodeChildrenOf(primary);
    expect(servers).toHaveLength(2);
    const signalled = Date.now();

    process.kill(primary, "SIGTERM");

    expect(await started.exited).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(10_000);
    await until(() => (groupAlive(primary) ? undefined : true), "every process of the group exiting");
    expect(await answers(url)).toBe(false);
    const lines = logLines(started.output());
    for (const pid of servers) {
      expect(lines.some((line) => line.pid === pid && line.msg === "shutting down")).toBe(true);
    }
    expect(lines.some((line) => line.pid === primary && line.msg === "server processes stopped")).toBe(true);
  }, 30_000);
});
