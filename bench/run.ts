// `npm run bench`: load scenarios against a real server started in this process (PGlite,
// or PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set). Every loop is bounded in time
// and count, and only talks to 127.0.0.1. Prints a table, then the same rows as JSON.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { createServer } from "node:net";

type Row = { scenario: string; concurrency: number; requests: number; errors: number; rps: number; p50_ms: number; p95_ms: number; p99_ms: number };

const DURATION_MS = Number(process.env.BENCH_SECONDS ?? 5) * 1000;
const MAX_REQUESTS = 200_000;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
    probe.on("error", reject);
  });
}

async function waitUntilReady(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ready = await fetch(`${url}/readyz`).then((response) => response.ok, () => false);
    if (ready) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error("the server did not become ready");
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function scenario(name: string, concurrency: number, request: () => Promise<Response>, durationMs = DURATION_MS): Promise<Row> {
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  const worker = async () => {
    while (performance.now() < deadline && latencies.length + errors < MAX_REQUESTS) {
      const t0 = performance.now();
      const response = await request();
      await response.arrayBuffer();
      if (response.ok) latencies.push(performance.now() - t0);
      else errors++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    scenario: name,
    concurrency,
    requests: latencies.length,
    errors,
    rps: Math.round(latencies.length / elapsed),
    p50_ms: round(percentile(latencies, 50)),
    p95_ms: round(percentile(latencies, 95)),
    p99_ms: round(percentile(latencies, 99)),
  };
}

// The server runs as its own process (as in production), so the load generator in this
// process does not share its event loop.
const dataDir = await mkdtemp(path.join(tmpdir(), "chat-bench-"));
const port = await freePort();
const server = spawn(process.execPath, ["--import", "tsx", "server/main.ts"], {
  cwd: path.resolve(import.meta.dirname, ".."),
  env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "warn" },
  stdio: ["ignore", "inherit", "inherit"],
});
const baseUrl = `http://127.0.0.1:${port}`;
await waitUntilReady(baseUrl);
try {
  const json = { "Content-Type": "application/json" };
  const email = `bench-${Date.now()}@example.test`;
  const registered = await fetch(`${baseUrl}/api/v1/auth/app/register`, {
    method: "POST",
    headers: json,
    body: JSON.stringify({ name: "Bench", email, password: "bench-password", password_confirmation: "bench-password" }),
  }).then((response) => response.json() as Promise<{ access_token: string }>);
  const auth = { Authorization: `Bearer ${registered.access_token}` };

  const rows: Row[] = [];
  rows.push(await scenario("GET /healthz", 16, () => fetch(`${baseUrl}/healthz`)));
  rows.push(await scenario("GET /api/v1/me (REST, bearer)", 16, () => fetch(`${baseUrl}/api/v1/me`, { headers: auth })));
  rows.push(await scenario("me.get (tRPC over HTTP)", 16, () => fetch(`${baseUrl}/trpc/me.get`, { headers: auth })));
  rows.push(
    await scenario("PATCH /api/v1/me", 8, () =>
      fetch(`${baseUrl}/api/v1/me`, { method: "PATCH", headers: { ...auth, ...json }, body: JSON.stringify({ name: "Bench" }) }),
    ),
  );
  // Argon2id is meant to be slow; this row shows what one core of sign-ins costs.
  rows.push(
    await scenario("POST /api/v1/auth/app/login (Argon2id)", 4, () =>
      fetch(`${baseUrl}/api/v1/auth/app/login`, {
        method: "POST",
        headers: json,
        body: JSON.stringify({ email, password: "bench-password" }),
      }),
      Math.min(DURATION_MS, 3000),
    ),
  );
  console.table(rows);
  console.log(JSON.stringify({ database: process.env.DATABASE_URL ? "postgres" : "pglite", redis: Boolean(process.env.REDIS_URL), rows }));
} finally {
  server.kill("SIGTERM");
  await new Promise((resolve) => server.once("exit", resolve));
  await rm(dataDir, { recursive: true, force: true });
}
