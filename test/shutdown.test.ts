// Graceful shutdown of the real process (`npm start`): on SIGTERM or SIGINT it closes live
// WebSocket connections, logs that it is shutting down and exits 0.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { freePort } from "./helpers/ports.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

type Started = { child: ChildProcess; port: number; output: () => string; exited: Promise<number | null> };

const children: ChildProcess[] = [];
const dataDirs: string[] = [];

afterEach(async () => {
  // Whatever a failed test left running is stopped here.
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  await Promise.all(dataDirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** `npm start` on embedded defaults (PGlite, no Redis) in a fresh DATA_DIR. */
async function startServerProcess(): Promise<Started> {
  const port = await freePort();
  const dataDir = await mkdtemp(path.join(tmpdir(), "chat-shutdown-"));
  dataDirs.push(dataDir);
  const child = spawn(process.execPath, ["--import", "tsx", "server/main.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "info" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, port, output: () => output, exited };
}

async function waitUntilHealthy(started: Started): Promise<void> {
  const deadline = Date.now() + 45_000;
  while (Date.now() < deadline) {
    if (started.child.exitCode !== null) throw new Error(`server exited early:\n${started.output()}`);
    try {
      const response = await fetch(`http://127.0.0.1:${started.port}/healthz`);
      if (response.status === 200) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`server did not become healthy:\n${started.output()}`);
}

async function openSocket(port: number): Promise<{ socket: WebSocket; closed: Promise<number> }> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/trpc`);
  const closed = new Promise<number>((resolve) => socket.on("close", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  return { socket, closed };
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

describe("graceful shutdown of npm start", () => {
  it.each(["SIGTERM", "SIGINT"] as const)(
    "on %s closes live WebSockets, logs shutting down and exits 0",
    async (signal) => {
      const started = await startServerProcess();
      await waitUntilHealthy(started);
      const { socket, closed } = await openSocket(started.port);
      expect(socket.readyState).toBe(WebSocket.OPEN);

      started.child.kill(signal);

      const closeCode = await within(closed, 15_000, "WebSocket close");
      // Closed by the server with a proper close frame (1001 Going Away), not dropped.
      expect(closeCode).toBe(1001);
      const exitCode = await within(started.exited, 15_000, "process exit");
      expect(exitCode).toBe(0);
      const messages = started
        .output()
        .split("\n")
        .flatMap((line) => {
          try {
            return [(JSON.parse(line) as { msg?: string }).msg];
          } catch {
            return [];
          }
        });
      expect(messages).toContain("shutting down");
    },
    90_000,
  );
});
