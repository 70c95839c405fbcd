// Configuration from the environment (contract.md, "Running it"): defaults, a bad value
// stops start-up with one plain line naming the variable and what it expects, APP_KEY
// generated into DATA_DIR; a port in use or a database out of reach is one line too.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createServer, type AddressInfo, type Server } from "node:net";
import { startApp } from "../server/app.ts";
import { CONFIG_VARIABLES, ConfigError, loadConfig } from "../server/config.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

let dataDir: string;
beforeEach(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "chat-config-"));
});
afterEach(() => rm(dataDir, { recursive: true, force: true }));

/** An environment with nothing set but DATA_DIR and the given variables. */
const environment = (variables: Record<string, string> = {}) => ({ DATA_DIR: dataDir, ...variables });

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

  it("reads TRUST_PROXY as ranges: loopback, addresses and CIDR ranges; unset trusts no one", () => {
    expect(loadConfig(environment()).trustProxy).toEqual([]);
    expect(
      loadConfig(environment({ TRUST_PROXY: " loopback , 10.0.0.5, fd00::/8 ,192.168.0.0/16" })).trustProxy,
    ).toEqual(["127.0.0.0/8", "::1/128", "10.0.0.5/32", "fd00::/8", "192.168.0.0/16"]);
  });

  it("reads APP_KEY_PREVIOUS as a list without the current key", () => {
    const current = "c".repeat(40);
    const config = loadConfig(
      environment({ APP_KEY: current, APP_KEY_PREVIOUS: `${"a".repeat(40)}, ${current},${"b".repeat(32)}` }),
    );
    expect(config.previousAppKeys).toEqual(["a".repeat(40), "b".repeat(32)]);
    expect(loadConfig(environment({ APP_KEY: current })).previousAppKeys).toEqual([]);
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

/** A message someone editing an env file can act on: no placeholders, no regex source. */
const UNREADABLE = /:attribute|\^|\$|\(\?|\\[dws]|\[[A-Za-z]-/;

// [variable, environment, a phrase saying what is expected]. Checked by loadConfig, or (for the
// rules that need several variables or a file) by startApp before it opens anything.
const BAD_VALUES: [string, Record<string, string>, string][] = [
  ["PORT", { PORT: "abc" }, "from 0 to 65535"],
  ["PORT", { PORT: "70000" }, "from 0 to 65535"],
  ["HOST", { HOST: "" }, "address to listen on"],
  ["DATA_DIR", { DATA_DIR: "" }, "folder path"],
  ["DATABASE_URL", { DATABASE_URL: "mysql://chat:hunter2@db/chat" }, "postgres://"],
  ["REDIS_URL", { REDIS_URL: "localhost:6379" }, "redis:// or rediss://"],
  ["REDIS_PREFIX", { REDIS_PREFIX: "chat prod" }, "letters, digits"],
  ["WORKERS", { WORKERS: "maybe" }, "on or off"],
  ["WEB_CONCURRENCY", { WEB_CONCURRENCY: "0" }, "whole number from 1 to 64"],
  ["DATABASE_URL", { WEB_CONCURRENCY: "2", REDIS_URL: "redis://127.0.0.1:6379" }, "WEB_CONCURRENCY is above 1"],
  ["REDIS_URL", { WEB_CONCURRENCY: "2", DATABASE_URL: "postgres://127.0.0.1/chat" }, "WEB_CONCURRENCY is above 1"],
  ["LOG_LEVEL", { LOG_LEVEL: "loud" }, "debug"],
  ["APP_URL", { APP_URL: "ftp://chat.example.com" }, "http:// or https://"],
  ["APP_KEY", { APP_KEY: "short-but-secret" }, "at least 32 characters"],
  ["APP_KEY_PREVIOUS", { APP_KEY_PREVIOUS: `${"p".repeat(40)},short-old-secret` }, "each at least 32 characters"],
  ["TRUST_PROXY", { TRUST_PROXY: "loopback,10.0.0.0/33" }, "CIDR ranges"],
  ["TRUST_PROXY", { TRUST_PROXY: "proxy.internal" }, "IP addresses"],
  ["FRONTEND_URL", { FRONTEND_URL: "chat.example.com" }, "http:// or https://"],
  ["SMTP_URL", { SMTP_URL: "mail.example.com:25" }, "smtp:// or smtps://"],
  ["MAIL_FROM", { MAIL_FROM: "x" }, "sender address"],
  ["SOCIAL_PROVIDERS", { SOCIAL_PROVIDERS: "git hub" }, "comma-separated list"],
  ["TRANSLATION_PROVIDER", { TRANSLATION_PROVIDER: "google" }, "libretranslate"],
  ["TRANSLATION_URL", { TRANSLATION_URL: "translate" }, "http:// or https://"],
  ["TRANSLATION_URL", { TRANSLATION_PROVIDER: "libretranslate" }, "must be set"],
  ["TRANSLATION_API_KEY", { TRANSLATION_PROVIDER: "deepl" }, "must be set"],
  ["PUSH_FCM_URL", { PUSH_FCM_URL: "fcm" }, "http:// or https://"],
  ["PUSH_EXPO_URL", { PUSH_EXPO_URL: "expo" }, "http:// or https://"],
  ["PUSH_APNS_URL", { PUSH_APNS_URL: "apns" }, "http:// or https://"],
  ["PUSH_FCM_CREDENTIALS", { PUSH_FCM_CREDENTIALS: "/nonexistent/service-account.json" }, "cannot read"],
  [
    "PUSH_APNS_KEY",
    { PUSH_APNS_KEY: "not-a-key", PUSH_APNS_KEY_ID: "K", PUSH_APNS_TEAM_ID: "T", PUSH_APNS_TOPIC: "com.example" },
    "cannot read",
  ],
  ["WEBHOOK_QUOTA_PER_HOUR", { WEBHOOK_QUOTA_PER_HOUR: "0" }, "whole number greater than 0"],
  ["PRESENCE_OFFLINE_AFTER_SECONDS", { PRESENCE_OFFLINE_AFTER_SECONDS: "0" }, "from 1 to 600"],
  ["PRESENCE_OFFLINE_AFTER_SECONDS", { PRESENCE_OFFLINE_AFTER_SECONDS: "601" }, "from 1 to 600"],
  ["OUTBOUND_ALLOW_PRIVATE", { OUTBOUND_ALLOW_PRIVATE: "sure" }, "on or off"],
  ["STORAGE_DRIVER", { STORAGE_DRIVER: "gcs" }, "local or s3"],
  ["S3_ENDPOINT", { S3_ENDPOINT: "s3.example.com" }, "http:// or https://"],
  ["S3_BUCKET", { STORAGE_DRIVER: "s3" }, "must be set"],
  ["MAX_UPLOAD_BYTES", { MAX_UPLOAD_BYTES: "25MB" }, "whole number greater than 0"],
  ["SOCIAL_GITHUB_CLIENT_ID", { SOCIAL_PROVIDERS: "github" }, "must be set"],
  ["SOCIAL_ACME_ISSUER", { SOCIAL_PROVIDERS: "acme", SOCIAL_ACME_CLIENT_ID: "id" }, "must be set"],
  [
    "SOCIAL_GITHUB_REDIRECT_URI",
    { SOCIAL_PROVIDERS: "github", SOCIAL_GITHUB_CLIENT_ID: "id", SOCIAL_GITHUB_REDIRECT_URI: "callback" },
    "myapp://callback",
  ],
  ...(["ISSUER", "AUTHORIZATION_URL", "TOKEN_URL", "USERINFO_URL"] as const).map(
    (key): [string, Record<string, string>, string] => [
      `SOCIAL_ACME_${key}`,
      { SOCIAL_PROVIDERS: "acme", SOCIAL_ACME_CLIENT_ID: "id", [`SOCIAL_ACME_${key}`]: "sso.example.com" },
      "http:// or https://",
    ],
  ),
];

/** Variables that take any text, or whose use is checked with another's (listed above under it). */
const FREE_TEXT = [
  "PUSH_EXPO_ACCESS_TOKEN",
  "PUSH_APNS_KEY_ID",
  "PUSH_APNS_TEAM_ID",
  "PUSH_APNS_TOPIC",
  "PUSH_APNS_CA",
  "S3_ACCESS_KEY_ID",
  "S3_SECRET_ACCESS_KEY",
  "S3_REGION",
  "METRICS_TOKEN",
  "QUEUE_DASHBOARD_PASSWORD",
];

/** The ConfigError that stops a start with these variables, from loadConfig or startApp. */
async function startErrorOf(variables: Record<string, string>): Promise<ConfigError> {
  try {
    const app = await startApp(loadConfig(environment({ LOG_LEVEL: "silent", PORT: "0", ...variables })));
    await app.close();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`the server started with ${JSON.stringify(variables)}`);
}

describe("configuration error messages", () => {
  it.each(BAD_VALUES)(
    "%s: names the variable and says what is expected (%j)",
    async (variable, variables, expected) => {
      const { message } = await startErrorOf(variables);
      expect(message).toMatch(new RegExp(`^Invalid configuration: ${variable}[ :]`));
      expect(message).toContain(expected);
      expect(message).not.toMatch(UNREADABLE);
    },
  );

  it("echoes a plain value but never a secret or a URL's credentials", async () => {
    expect((await startErrorOf({ LOG_LEVEL: "loud" })).message).toContain('(got "loud")');
    expect((await startErrorOf({ APP_KEY: "short-but-secret" })).message).not.toContain("short-but-secret");
    const previous = await startErrorOf({ APP_KEY_PREVIOUS: "short-old-secret" });
    expect(previous.message).not.toContain("short-old-secret");
    const { message } = await startErrorOf({ DATABASE_URL: "mysql://chat:hunter2@db/chat" });
    expect(message).not.toContain("hunter2");
    expect(message).toContain('(it starts with "mysql:")');
  });

  it("lists every bad variable, not just the first", async () => {
    const { message } = await startErrorOf({ PORT: "abc", WORKERS: "maybe" });
    expect(message).toContain("PORT must be");
    expect(message).toContain("WORKERS must be");
  });

  it("has a reviewed message for every variable that can be wrong", () => {
    const reviewed = new Set([...BAD_VALUES.map(([variable]) => variable), ...FREE_TEXT]);
    expect(CONFIG_VARIABLES.filter((variable) => !reviewed.has(variable))).toEqual([]);
  });
});

describe("a start that fails is one line on stderr and an exit code", () => {
  const running: ChildProcess[] = [];
  let holder: Server | undefined;
  // A child that did not exit (the test timed out) must not outlive the test.
  afterEach(async () => {
    for (const child of running.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
    await new Promise((resolve) => (holder ? holder.close(resolve) : resolve(undefined)));
    holder = undefined;
  });

  async function run(
    entry: string,
    variables: Record<string, string>,
  ): Promise<{ code: number | null; stderr: string }> {
    const child = spawn(process.execPath, ["--import", "tsx", entry], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", DATA_DIR: dataDir, LOG_LEVEL: "info", ...variables },
      stdio: ["ignore", "pipe", "pipe"],
    });
    running.push(child);
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.stdout.resume();
    const code = await new Promise<number | null>((resolve) => child.on("exit", (exitCode) => resolve(exitCode)));
    return { code, stderr };
  }

  /** A port something else listens on (what a second server on the same port meets). */
  async function takenPort(): Promise<number> {
    holder = createServer();
    await new Promise<void>((resolve) => holder!.listen(0, "127.0.0.1", resolve));
    return (holder.address() as AddressInfo).port;
  }

  it("a bad value: exit 78 and the configuration message", async () => {
    const { code, stderr } = await run("server/main.ts", { PORT: "abc" });
    expect(code).toBe(78);
    expect(stderr).toBe(
      'Invalid configuration: PORT must be a port number: a whole number from 0 to 65535 (got "abc")\n',
    );
  });

  it("a port in use: exit 98 and one line naming PORT and HOST, no stack trace", async () => {
    const port = await takenPort();
    const { code, stderr } = await run("server/main.ts", { PORT: String(port), HOST: "127.0.0.1" });
    expect(code).toBe(98);
    expect(stderr).toBe(`Port ${port} on 127.0.0.1 is already in use (PORT, HOST).\n`);
  }, 60_000);

  it("a database out of reach: exit 69 and one line naming DATABASE_URL without its password", async () => {
    // A port nothing listens on: the one just held, now closed.
    const port = await takenPort();
    await new Promise((resolve) => holder!.close(resolve));
    holder = undefined;
    const { code, stderr } = await run("server/main.ts", {
      PORT: "0",
      DATABASE_URL: `postgres://chat:hunter2@127.0.0.1:${port}/chat`,
    });
    expect(code).toBe(69);
    expect(stderr).toBe(
      `Cannot open the database at postgres://chat@127.0.0.1:${port}/chat (DATABASE_URL): connection refused (is it running, and on that port?)\n`,
    );
  }, 60_000);

  it("npm run worker without REDIS_URL: exit 78 and one line naming REDIS_URL", async () => {
    const { code, stderr } = await run("workers/main.ts", {});
    expect(code).toBe(78);
    expect(stderr).toMatch(/^Invalid configuration: REDIS_URL must be set for `npm run worker`[^\n]*\n$/);
  });
});
