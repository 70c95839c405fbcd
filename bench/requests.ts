// Request/response rows: throughput and latency of the main request paths, each a closed loop
// of `concurrency` workers for BENCH_SECONDS (default 5) against a server of its own.
import { api, percentile, round, startBenchServer } from "./lib.ts";

export type RequestRow = {
  scenario: string;
  concurrency: number;
  requests: number;
  errors: number;
  rps: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
};

const DURATION_MS = Number(process.env.BENCH_SECONDS ?? 5) * 1000;
const MAX_REQUESTS = 200_000;

async function scenario(
  name: string,
  concurrency: number,
  request: () => Promise<Response>,
  durationMs = DURATION_MS,
): Promise<RequestRow> {
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

export async function runRequestRows(): Promise<RequestRow[]> {
  const server = await startBenchServer("requests");
  const baseUrl = server.url;
  try {
    const json = { "Content-Type": "application/json" };
    const email = `bench-${Date.now()}@example.test`;
    const registered = await api<{ access_token: string }>(baseUrl, "POST", "/api/v1/auth/app/register", undefined, {
      name: "Bench",
      email,
      password: "bench-password",
      password_confirmation: "bench-password",
    });
    const auth = { Authorization: `Bearer ${registered.access_token}` };

    const rows: RequestRow[] = [];
    rows.push(await scenario("GET /healthz", 16, () => fetch(`${baseUrl}/healthz`)));
    rows.push(
      await scenario("GET /api/v1/me (REST, bearer)", 16, () => fetch(`${baseUrl}/api/v1/me`, { headers: auth })),
    );
    rows.push(await scenario("me.get (tRPC over HTTP)", 16, () => fetch(`${baseUrl}/trpc/me.get`, { headers: auth })));
    rows.push(
      await scenario("PATCH /api/v1/me", 8, () =>
        fetch(`${baseUrl}/api/v1/me`, {
          method: "PATCH",
          headers: { ...auth, ...json },
          body: JSON.stringify({ name: "Bench" }),
        }),
      ),
    );
    // Argon2id is meant to be slow; this row shows what one core of sign-ins costs.
    rows.push(
      await scenario(
        "POST /api/v1/auth/app/login (Argon2id)",
        4,
        () =>
          fetch(`${baseUrl}/api/v1/auth/app/login`, {
            method: "POST",
            headers: json,
            body: JSON.stringify({ email, password: "bench-password" }),
          }),
        Math.min(DURATION_MS, 3000),
      ),
    );
    return rows;
  } finally {
    await server.stop();
  }
}
