// `npm start` and `npm run worker` as an operator runs them: SIGTERM to the npm process (what
// a supervisor or `kill <pid>` sends) or Ctrl-C to the whole process group drains the service
// and leaves nothing behind: no process of the group, nothing answering on the port.
import { spawn, type ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "./helpers/ports.ts";
import { createDatabase } from "./helpers/server.ts";
import { groupAlive } from "./helpers/process-group.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

type Started = { npm: ChildProcess; output: () => string; exited: Promise<number | null> };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  ms = 20_000,
  everyMs = 100,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

async function answers(port: number): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok;
  } catch {
    return false;
  }
}

/**
 * `npm run <script>` in a process group of its own (so the test can signal or inspect the whole
 * group), on PostgreSQL and Redis when the suite has them, else on the embedded defaults.
 */
async function runNpm(script: string[], variables: Record<string, string>): Promise<Started> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "chat-signals-"));
  const database = process.env.DATABASE_URL ? await createDatabase(process.env.DATABASE_URL) : undefined;
  const npm = spawn("npm", script, {
    cwd: ROOT,
    detached: true,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? tmpdir(),
      DATA_DIR: dataDir,
      LOG_LEVEL: "info",
      ...(database && { DATABASE_URL: database.url }),
      ...(process.env.REDIS_URL && {
        REDIS_URL: process.env.REDIS_URL,
        REDIS_PREFIX: `test-${randomBytes(6).toString("hex")}`,
      }),
      ...variables,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  npm.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  npm.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => npm.on("exit", (code) => resolve(code)));
  cleanups.push(async () => {
    // Whatever a failed test left running is stopped here, the whole group.
    if (groupAlive(npm.pid!)) process.kill(-npm.pid!, "SIGKILL");
    await database?.drop();
    await rm(dataDir, { recursive: true, force: true });
  });
  return { npm, output: () => output, exited };
}

function logLines(output: string): { msg: string; pid: number }[] {
  return output.split("\n").flatMap((line) => {
    try {
      return [JSON.parse(line) as { msg: string; pid: number }];
    } catch {
      return [];
    }
  });
}
const logMessages = (output: string) => logLines(output).map((line) => line.msg);
/** The pid of the process that wrote the log lines: node, under npm. */
const logPids = (output: string) => logLines(output).map((line) => line.pid);

async function startServer(): Promise<Started & { port: number }> {
  const port = await freePort();
  const started = await runNpm(["start"], { PORT: String(port), HOST: "127.0.0.1" });
  await waitFor(
    async () => {
      if (started.npm.exitCode !== null) throw new Error(`npm start exited early:\n${started.output()}`);
      return answers(port);
    },
    "the server answering /healthz",
    120_000,
  );
  return { ...started, port };
}

describe("npm start", () => {
  it("stops on SIGTERM to the npm process: drains, exits 0, leaves no process and nothing on the port", async () => {
    const started = await startServer();
    const pgid = started.npm.pid!;

    process.kill(pgid, "SIGTERM");

    expect(await started.exited).toBe(0);
    await waitFor(() => !groupAlive(pgid), "every process of the group exiting");
    expect(await answers(started.port)).toBe(false);
    expect(logMessages(started.output())).toContain("shutting down");
  }, 180_000);

  it("on Ctrl-C drains once: the copy of SIGINT that npm forwards does not cut the drain short", async () => {
    const started = await startServer();
    const pgid = started.npm.pid!;
    // A request still arriving keeps the drain going (up to its 10 s limit), so the echo
    // below lands while the server is still draining.
    const slowRequest = connect(started.port, "127.0.0.1");
    slowRequest.on("error", () => {});
    await new Promise((resolve) => slowRequest.once("connect", resolve));
    slowRequest.write(
      "POST /api/v1/auth/app/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    );
    cleanups.push(async () => void slowRequest.destroy());
    // Time for the server to parse the request's head (nothing observable tells when it has).
    await new Promise((resolve) => setTimeout(resolve, 500));

    // Ctrl-C: the terminal signals every process of the group, npm included...
    process.kill(-pgid, "SIGINT");
    await waitFor(() => logMessages(started.output()).includes("shutting down"), "the drain starting", 5_000, 10);
    // ...and npm forwards its copy to node: the kernel may merge the two, so send it for certain.
    const nodePid = logPids(started.output())[0]!;
    expect(nodePid).not.toBe(pgid);
    process.kill(nodePid, "SIGINT");

    expect(await started.exited).toBe(0);
    await waitFor(() => !groupAlive(pgid), "every process of the group exiting");
    expect(await answers(started.port)).toBe(false);
    const messages = logMessages(started.output());
    expect(messages.filter((message) => message === "shutting down")).toHaveLength(1);
    expect(messages).not.toContain("second signal: exiting without waiting for the drain");
  }, 180_000);
});

describe.skipIf(!process.env.REDIS_URL)("npm run worker", () => {
  it("stops on SIGTERM to the npm process and leaves no process behind", async () => {
    const started = await runNpm(["run", "worker"], {});
    const pgid = started.npm.pid!;
    await waitFor(
      () => {
        if (started.npm.exitCode !== null) throw new Error(`npm run worker exited early:\n${started.output()}`);
        return logMessages(started.output()).includes("workers started");
      },
      "the workers starting",
      120_000,
    );

    process.kill(pgid, "SIGTERM");

    expect(await started.exited).toBe(0);
    await waitFor(() => !groupAlive(pgid), "every process of the group exiting");
    expect(logMessages(started.output())).toContain("shutting down");
  }, 180_000);
});
