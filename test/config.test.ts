// Configuration from the environment (contract.md, "Running it"): defaults, a bad value
// stops start-up with a message naming the variable, APP_KEY generated into DATA_DIR.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../server/config.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

let dataDir: string;
beforeEach(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "chat-config-"));
});
afterEach(() => rm(dataDir, { recursive: true, force: true }));

/** An environment with nothing set but DATA_DIR and the given variables. */
const environment = (variables: Record<string, string> = {}) => ({ DATA_DIR: dataDir, ...variables });

function configErrorOf(variables: Record<string, string>): ConfigError {
  try {
    loadConfig(environment(variables));
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(variables)}`);
}

describe("loadConfig", () => {
  it("applies the documented defaults", () => {
    const config = loadConfig(environment());
    expect(config.port).toBe(3000);
    expect(config.host).toBe("0.0.0.0");
    expect(config.appUrl).toBe("http://localhost:3000");
    expect(config.runWorkers).toBe(true);
    expect(config.webhookQuotaPerHour).toBe(1000);
    expect(config.maxUploadBytes).toBe(26214400);
    expect(config.databaseUrl).toBeUndefined();
    expect(config.redisUrl).toBeUndefined();
    expect(config.dataDir).toBe(path.resolve(dataDir));
    expect(config.socialProviders).toEqual([]);
  });

  it.each([
    ["PORT", { PORT: "abc" }],
    ["DATABASE_URL", { DATABASE_URL: "mysql://x" }],
    ["REDIS_URL", { REDIS_URL: "http://x" }],
    ["WORKERS", { WORKERS: "maybe" }],
    ["APP_KEY", { APP_KEY: "too-short" }],
    ["SMTP_URL", { SMTP_URL: "ftp://x" }],
    ["SOCIAL_GITHUB_CLIENT_ID", { SOCIAL_PROVIDERS: "github" }],
  ])("refuses a bad %s with a ConfigError naming it", (variable, variables) => {
    expect(configErrorOf(variables).message).toContain(variable);
  });

  it("generates APP_KEY into DATA_DIR/app-key when unset and reuses it on the next load", () => {
    const first = loadConfig(environment());
    const keyFile = path.join(dataDir, "app-key");
    expect(existsSync(keyFile)).toBe(true);
    expect(readFileSync(keyFile, "utf8").trim()).toBe(first.appKey);
    expect(first.appKey.length).toBeGreaterThanOrEqual(32);
    const second = loadConfig(environment());
    expect(second.appKey).toBe(first.appKey);
  });

  it("uses APP_KEY when set and writes no key file", () => {
    const key = "k".repeat(40);
    expect(loadConfig(environment({ APP_KEY: key })).appKey).toBe(key);
    expect(existsSync(path.join(dataDir, "app-key"))).toBe(false);
  });

  it("parses a known social provider with its default issuer", () => {
    const config = loadConfig(
      environment({
        SOCIAL_PROVIDERS: "google",
        SOCIAL_GOOGLE_CLIENT_ID: "client-id",
        SOCIAL_GOOGLE_CLIENT_SECRET: "secret",
      }),
    );
    expect(config.socialProviders).toEqual([
      expect.objectContaining({
        name: "google",
        clientId: "client-id",
        clientSecret: "secret",
        issuer: "https://accounts.google.com",
      }),
    ]);
  });
});

describe("npm start with a bad value", () => {
  let running: ChildProcess | undefined;
  // A child that did not exit (the test timed out) must not outlive the test.
  afterEach(() => {
    if (running && running.exitCode === null && running.signalCode === null) running.kill("SIGKILL");
  });

  it("exits non-zero with a message naming the variable", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", "server/main.ts"], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", DATA_DIR: dataDir, PORT: "abc" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.stdout.resume();
    running = child;
    const code = await new Promise<number | null>((resolve) => child.on("exit", (exitCode) => resolve(exitCode)));
    expect(code).not.toBe(0);
    expect(code).not.toBeNull();
    expect(stderr).toContain("PORT");
  });
});
