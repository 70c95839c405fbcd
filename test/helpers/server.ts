// Starts the real service on a random port against a fresh database: a new PostgreSQL
// database when DATABASE_URL is set, PGlite in a temporary DATA_DIR otherwise; with
// REDIS_URL, a key prefix of its own so files running in parallel never share queues.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, beforeAll } from "vitest";
import { startApp, type App } from "../../server/app.ts";
import { ManualClock } from "../../server/clock.ts";
import { loadConfig, type Config } from "../../server/config.ts";
import type { Logger } from "../../server/logger.ts";
import { restClient, type RestClient } from "./api.ts";
import { freePort } from "./ports.ts";
import { startFakeLibreTranslate, type FakeTranslator, type FakeTranslatorOptions } from "./translation.ts";

export type TestServer = {
  app: App;
  url: string;
  config: Config;
  clock: ManualClock;
  /** The environment the server was started with (for child processes such as the CLI). */
  env: Record<string, string>;
  /** The same database, data folder and port; `changes` are kept for later restarts too. */
  restart(changes?: Record<string, string>): Promise<TestServer>;
  close(): Promise<void>;
};

export async function createDatabase(adminUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `chat_test_${randomBytes(6).toString("hex")}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const cleanup = postgres(adminUrl, { max: 1, onnotice: () => {} });
      await cleanup.unsafe(`drop database if exists ${name} with (force)`);
      await cleanup.end();
    },
  };
}

export type SeedTarget = { databaseUrl: string } | { dataDir: string };

export async function startTestServer(
  overrides: Record<string, string> = {},
  options: {
    logger?: Logger;
    /** Fills the new, empty database before the server first starts (an earlier release's data). */
    seed?: (target: SeedTarget) => Promise<void>;
  } = {},
): Promise<TestServer> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "chat-test-"));
  const database = process.env.DATABASE_URL ? await createDatabase(process.env.DATABASE_URL) : undefined;
  await options.seed?.(database ? { databaseUrl: database.url } : { dataDir });
  // A known port, so APP_URL (links in mails, invite URLs) names the real address.
  const port = await freePort();
  const env: Record<string, string> = {
    PORT: String(port),
    APP_URL: `http://127.0.0.1:${port}`,
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    APP_KEY: randomBytes(32).toString("base64url"),
    // Push never leaves the machine: Expo (on by default) points at a closed port unless a test
    // starts a fake provider (test/helpers/push.ts) and overrides it.
    PUSH_EXPO_URL: "http://127.0.0.1:9/--/api/v2/push/send",
    // Outbound webhooks call receivers the tests start on 127.0.0.1 (the contract: tests set it);
    // the SSRF guard's own tests turn it back off.
    OUTBOUND_ALLOW_PRIVATE: "true",
    ...(database && { DATABASE_URL: database.url }),
    ...(process.env.REDIS_URL && {
      REDIS_URL: process.env.REDIS_URL,
      REDIS_PREFIX: `test-${randomBytes(6).toString("hex")}`,
    }),
    ...overrides,
  };
  const clock = new ManualClock();

  async function boot(port: string): Promise<TestServer> {
    const config = loadConfig({ ...env, PORT: port });
    const app = await startApp(config, { clock, logger: options.logger });
    const server: TestServer = {
      app,
      url: app.url,
      config,
      clock,
      env: { ...env, PORT: new URL(app.url).port },
      async restart(changes = {}) {
        const samePort = new URL(app.url).port;
        await app.close();
        Object.assign(env, changes);
        return boot(samePort);
      },
      async close() {
        await app.close();
        await database?.drop();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
    return server;
  }
  return boot(env.PORT!);
}

/**
 * One server for the whole test file: started before the first test, closed after the last.
 * A test may replace `ctx.server` (after a restart); the replacement is the one closed.
 */
export function useTestServer(overrides: Record<string, string> = {}): { server: TestServer; api: RestClient } {
  const ctx = {} as { server: TestServer; api: RestClient };
  beforeAll(async () => {
    ctx.server = await startTestServer(overrides);
    ctx.api = restClient(ctx.server.url);
  });
  afterAll(() => ctx.server?.close());
  return ctx;
}

/**
 * Two server processes sharing one PostgreSQL database and one Redis (call it inside a
 * describe that runs only when both are configured): the second is started from the first's
 * environment, as a second `npm start` behind a load balancer would be.
 */
export function useTwoServers(): { first: TestServer; second: App; api: RestClient } {
  const ctx = {} as { first: TestServer; second: App; api: RestClient };
  beforeAll(async () => {
    ctx.first = await startTestServer();
    ctx.api = restClient(ctx.first.url);
    ctx.second = await startApp(loadConfig({ ...ctx.first.env, PORT: "0" }));
  });
  afterAll(async () => {
    await ctx.second?.close();
    await ctx.first?.close();
  });
  return ctx;
}

/**
 * A server of its own that translates through a fake LibreTranslate (test/helpers/translation.ts,
 * answering `[<target>] <text>`), for the file or describe it is called in: both started before
 * its first test and stopped after its last.
 */
export function useTranslatingServer(options: FakeTranslatorOptions = {}): {
  fake: FakeTranslator;
  server: TestServer;
  api: RestClient;
} {
  const ctx = {} as { fake: FakeTranslator; server: TestServer; api: RestClient };
  beforeAll(async () => {
    ctx.fake = await startFakeLibreTranslate(options);
    ctx.server = await startTestServer({ TRANSLATION_PROVIDER: "libretranslate", TRANSLATION_URL: ctx.fake.url });
    ctx.api = restClient(ctx.server.url);
  });
  afterAll(async () => {
    await ctx.server?.close();
    await ctx.fake?.stop();
  });
  return ctx;
}
