// Several processes sharing PostgreSQL and Redis: a separate `npm run worker` process runs the
// queue jobs, and live events published on one server reach subscribers on another.
// Without Redis there is one process, so these need DATABASE_URL and REDIS_URL.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { createChatClient } from "@chat-service/client";
import { startApp, type App } from "../server/app.ts";
import { loadConfig } from "../server/config.ts";
import { restClient } from "./helpers/api.ts";
import { registerUser } from "./helpers/factories.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const sharedServices = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);

function runWorker(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", "workers/main.ts"], {
    cwd: path.resolve(import.meta.dirname, ".."),
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

describe("npm run worker without Redis", () => {
  it("refuses to start and says why", async () => {
    const child = runWorker({ DATA_DIR: await mkdtemp(path.join(tmpdir(), "chat-worker-")), LOG_LEVEL: "silent" });
    let stderr = "";
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).not.toBe(0);
    expect(stderr).toContain("REDIS_URL");
  });
});

describe.runIf(sharedServices)("with PostgreSQL and Redis shared between processes", () => {
  let server: TestServer;
  let worker: ChildProcess;
  let second: App;

  beforeAll(async () => {
    // This server enqueues but runs no workers: only the separate worker process can send mail.
    server = await startTestServer({ WORKERS: "off" });
    worker = runWorker({ ...server.env, PORT: "0" });
    second = await startApp(loadConfig({ ...server.env, PORT: "0" }));
  });
  afterAll(async () => {
    worker?.kill("SIGTERM");
    await new Promise((resolve) => worker?.once("exit", resolve));
    await second?.close();
    await server?.close();
  });

  it("a separate worker process delivers the mail a request enqueued", async () => {
    const user = await registerUser(restClient(server.url));
    const mailDir = path.join(server.config.dataDir, "mail");
    const file = await until(
      async () => {
        const files = await readdir(mailDir).catch(() => []);
        return files.find((name) => name.endsWith(".eml"));
      },
      "the worker's mail",
      15_000,
    );
    const message = await readFile(path.join(mailDir, file), "utf8");
    expect(message).toContain(`To: ${user.email}`);
    expect(message).toContain("/api/v1/auth/email/verify/");
  });

  it("an event published by one server reaches a WebSocket subscriber on another", async () => {
    const api = restClient(server.url);
    const user = await registerUser(api);
    const client = createChatClient({
      url: second.url,
      token: user.token,
      webSocket: { WebSocket },
    });
    const received: unknown[] = [];
    const subscription = client.events.onUser.subscribe(undefined, { onData: (event) => received.push(event) });
    try {
      // The subscription is live once the server has subscribed to the topic; retry the update until seen.
      const event = await until(
        async () => {
          await api.patch("/api/v1/me", { name: "Seen Elsewhere" }, { token: user.token });
          await new Promise((resolve) => setTimeout(resolve, 200));
          return received[0];
        },
        "the event on the other server",
        15_000,
      );
      expect(JSON.stringify(event)).toContain("Seen Elsewhere");
      expect(JSON.stringify(event)).toContain("user.updated");
    } finally {
      subscription.unsubscribe();
      client.close();
    }
  });
});
