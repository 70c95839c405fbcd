// Redis going away under a running server: the throttled endpoints (login, OTP request,
// password reset, invite preview, join passwords, password change) keep answering as they
// would with Redis, counting in memory meanwhile (the insurance limiter), instead of failing
// with 500 or waiting for Redis; what needs Redis itself (OAuth state) fails cleanly with 503.
// The server's Redis is a redis-server of this file's own, on a free port, stopped and started
// again here (the shared REDIS_URL is never touched).
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { restClient, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, uniqueEmail, type RegisteredUser } from "./helpers/factories.ts";
import { startOAuth2Provider, type OAuth2Provider } from "./helpers/oauth.ts";
import { freePort } from "./helpers/ports.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

/** An answer that waits for Redis would take seconds (ioredis retries); a normal one does not. */
const QUICK_MS = 1_500;
/**
 * Mail requests write their job to the outbox and try to hand it to the queue for up to 2 s
 * (server/jobs/outbox.ts) before answering.
 */
const MAIL_REQUEST_MS = 3_500;

/** A private redis-server on `port`: no persistence, so a restart starts empty. */
class PrivateRedis {
  private child: ChildProcess | undefined;
  constructor(readonly port: number) {}

  async start(): Promise<void> {
    if (this.child) return;
    const child = spawn("redis-server", ["--port", String(this.port), "--save", "", "--appendonly", "no"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    // Never outlive the test process, even when a hook times out before stop().
    const killOnExit = () => child.kill("SIGKILL");
    process.once("exit", killOnExit);
    child.once("exit", () => process.removeListener("exit", killOnExit));
    let output = "";
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    await until(
      () => {
        if (child.exitCode !== null) throw new Error(`redis-server exited: ${output}`);
        return /Ready to accept connections/i.test(output) ? true : undefined;
      },
      `redis-server on port ${this.port}`,
      10_000,
    );
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGKILL");
    await exited;
    this.child = undefined;
  }
}

let redis: PrivateRedis;
let github: OAuth2Provider;
let server: TestServer;
let api: RestClient;

beforeAll(async () => {
  redis = new PrivateRedis(await freePort());
  await redis.start();
  github = await startOAuth2Provider();
  server = await startTestServer({
    REDIS_URL: `redis://127.0.0.1:${redis.port}`,
    REDIS_PREFIX: `redis-down-${redis.port}`,
    // No BullMQ workers here: nothing in this file needs a job to run, and a worker's close
    // after Redis came back empty can wait a long time (reported separately).
    WORKERS: "off",
    SOCIAL_PROVIDERS: "github",
    SOCIAL_GITHUB_CLIENT_ID: github.clientId,
    SOCIAL_GITHUB_CLIENT_SECRET: github.clientSecret,
    SOCIAL_GITHUB_AUTHORIZATION_URL: github.authorizationUrl,
    SOCIAL_GITHUB_TOKEN_URL: github.tokenUrl,
    SOCIAL_GITHUB_USERINFO_URL: github.userinfoUrl,
    SOCIAL_GITHUB_REDIRECT_URI: "http://app.example.test/auth/callback",
  });
  api = restClient(server.url);
}, 30_000);

afterAll(async () => {
  try {
    // Redis back first, so the server's clients close quickly.
    await redis?.start().catch(() => {});
    await server?.close();
    await github?.stop();
  } finally {
    await redis?.stop();
  }
}, 60_000);

/** The answer and how long it took. */
async function timed<T>(call: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = Date.now();
  const result = await call();
  return { result, ms: Date.now() - started };
}

const login = (email: string, password: string) => api.post("/api/v1/auth/app/login", { email, password });

async function publicWorkspaceWithPassword(owner: RegisteredUser, password: string) {
  const created = await api.post(
    "/api/v1/workspaces",
    { name: `Open ${Math.random().toString(36).slice(2, 8)}`, visibility: "public", password },
    { token: owner.token },
  );
  expect(created.status).toBe(201);
  return created.body.data.id as string;
}

describe("with Redis down", () => {
  let user: RegisteredUser;
  let owner: RegisteredUser;
  let joiner: RegisteredUser;
  let inviteToken: string;
  let lockedWorkspaceId: string;

  beforeAll(async () => {
    // Made while Redis is up.
    user = await registerUser(api);
    owner = await registerUser(api);
    joiner = await registerUser(api);
    const { workspaceId } = await createWorkspaceWithGeneral(api, owner);
    const invite = await api.post(`/api/v1/workspaces/${workspaceId}/invites`, {}, { token: owner.token });
    expect(invite.status).toBe(201);
    inviteToken = invite.body.data.token;
    lockedWorkspaceId = await publicWorkspaceWithPassword(owner, "workspace-secret-1");
    expect((await api.get("/readyz")).status).toBe(200);

    await redis.stop();
    // The server notices (readiness says so) before the checks below.
    await until(async () => ((await api.get("/readyz")).status === 503 ? true : undefined), "readyz to fail", 10_000);
  }, 30_000);

  it("login answers 422 for a wrong password and 200 for the right one, quickly", async () => {
    const wrong = await timed(() => login(user.email, "not-the-password"));
    expect(wrong.result.status).toBe(422);
    expect(wrong.result.body.errors.email).toEqual(["These credentials do not match our records."]);
    expect(wrong.ms).toBeLessThan(QUICK_MS);

    const right = await timed(() => login(user.email, user.password));
    expect(right.result.status).toBe(200);
    expect(right.result.body.access_token).toEqual(expect.any(String));
    expect(right.ms).toBeLessThan(QUICK_MS);
  });

  it("login is still throttled (in memory): the sixth try in a minute is 429 with Retry-After", async () => {
    const email = uniqueEmail("down");
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect((await login(email, "not-the-password")).status).toBe(422);
    }
    const sixth = await timed(() => login(email, "not-the-password"));
    expect(sixth.result.status).toBe(429);
    expect(sixth.result.body).toEqual({ message: "Too Many Attempts." });
    expect(Number(sixth.result.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(Number(sixth.result.headers.get("retry-after"))).toBeLessThanOrEqual(60);
    expect(sixth.ms).toBeLessThan(QUICK_MS);
  });

  it("invite preview answers 200 with its rate-limit headers", async () => {
    const { result, ms } = await timed(() => api.get(`/api/v1/invites/${inviteToken}`));
    expect(result.status).toBe(200);
    expect(result.body.data.workspace).toMatchObject({ member_count: 1 });
    expect(result.headers.get("x-ratelimit-limit")).toBe("30");
    expect(Number(result.headers.get("x-ratelimit-remaining"))).toBeLessThan(30);
    expect(ms).toBeLessThan(QUICK_MS);
  });

  it("a workspace join password is checked and throttled as usual", async () => {
    const path = `/api/v1/workspaces/${lockedWorkspaceId}/join`;
    for (let attempt = 1; attempt <= 5; attempt++) {
      const wrong = await timed(() => api.post(path, { password: "wrong-password-1" }, { token: joiner.token }));
      expect(wrong.result.status).toBe(422);
      expect(wrong.ms).toBeLessThan(QUICK_MS);
    }
    const throttled = await timed(() => api.post(path, { password: "workspace-secret-1" }, { token: joiner.token }));
    expect(throttled.result.status).toBe(429);
    expect(throttled.result.body).toEqual({ message: "Too Many Attempts." });
    expect(Number(throttled.result.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(throttled.ms).toBeLessThan(QUICK_MS);
  });

  it("OTP request and password reset answer 200 (their mails wait in the job outbox), without waiting for Redis", async () => {
    const otp = await timed(() => api.post("/api/v1/auth/app/otp", { email: uniqueEmail("otp") }));
    expect(otp.result.status).toBe(200);
    expect(otp.result.body).toEqual({ message: "A sign-in code has been sent to your email address." });
    expect(otp.ms).toBeLessThan(MAIL_REQUEST_MS);
    const reset = await timed(() => api.post("/api/v1/auth/app/forgot-password", { email: user.email }));
    expect(reset.result.status).toBe(200);
    expect(reset.result.body).toEqual({ message: "We have emailed your password reset link." });
    expect(reset.ms).toBeLessThan(MAIL_REQUEST_MS);
  });

  it("the OTP request throttle still counts: the fourth request in a minute is 429", async () => {
    const email = uniqueEmail("otp-throttle");
    for (let attempt = 1; attempt <= 3; attempt++) {
      expect((await api.post("/api/v1/auth/app/otp", { email })).status).toBe(200);
    }
    const fourth = await timed(() => api.post("/api/v1/auth/app/otp", { email }));
    expect(fourth.result.status).toBe(429);
    expect(fourth.result.body).toEqual({ message: "Too Many Attempts." });
    expect(Number(fourth.result.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(fourth.ms).toBeLessThan(QUICK_MS);
  });

  it("social sign-in, whose state lives in Redis, answers 503 {message} with Retry-After at once", async () => {
    for (const call of [
      () => api.post("/api/v1/auth/app/social/github/redirect"),
      () => api.post("/api/v1/auth/app/social/github/callback", { code: "some-code", state: "some-state" }),
    ]) {
      const { result, ms } = await timed(call);
      expect(result.status).toBe(503);
      expect(result.body).toEqual({ message: "Service temporarily unavailable. Try again shortly." });
      expect(result.headers.get("retry-after")).toBe("1");
      expect(ms).toBeLessThan(QUICK_MS);
    }
  });

  describe("and back", () => {
    beforeAll(async () => {
      await redis.start();
      await until(async () => ((await api.get("/readyz")).status === 200 ? true : undefined), "readyz", 15_000);
    }, 30_000);

    it("counts in Redis again", async () => {
      expect((await login(user.email, user.password)).status).toBe(200);
      const preview = await api.get(`/api/v1/invites/${inviteToken}`);
      expect(preview.status).toBe(200);
      // A fresh Redis (no persistence): the count starts again there.
      expect(preview.headers.get("x-ratelimit-remaining")).toBe("29");
    });
  });
});
