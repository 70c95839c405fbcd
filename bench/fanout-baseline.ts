// `npm run bench -- fanout-baseline`: how far the service's live fan-out is from a bare relay.
// Needs DATABASE_URL (REDIS_URL as the service is meant to run: with it).
//
// Two sides, both started as their own processes and kept up for the whole section:
//   service   server/main.ts (startBenchServer), receivers subscribed to #general over tRPC
//             WebSocket frames (one of them the typed client), posts over REST as in `fanout`
//   baseline  bench/baseline-relay.ts (startBaselineRelay): node:http + `ws`; for every POSTed
//             message one INSERT into a table of its own in the same PostgreSQL, answered after the
//             insert, and the message broadcast to every socket; receivers are bare `ws` sockets
// Both get the same posts (the same JSON body, same marker, same node:http keep-alive sender and
// open-loop generator, postAtRate with at most 64 in flight), and their receivers record into the
// same Collector (the send time read straight out of the frame).
//
// For each receiver count, for BENCH_RUNS runs, ALTERNATING (service, baseline, service, ...), a
// rate search finds each side's highest passing open-loop rate: a probe sends at one rate for
// BENCH_SEARCH_SECONDS and passes when ≥ 99.9% of due posts were accepted, ≥ 99.9% of accepted × N
// were delivered (within BENCH_SEARCH_DRAIN s after the window) and the delivery p99 < 200 ms.
// The search doubles (halves) the rate from its start until a probe fails (passes), then bisects
// (geometric mean) until the highest passing and lowest failing rates are within
// BENCH_SEARCH_STEP %. A side's later runs start from its previous result, bracketing by ×1.25.
// The table reports medians over the runs: each side's rate, the ratio of those medians, the
// median of the runs' own ratios (each service run against the baseline run beside it), and,
// at each run's highest passing probe: the server process's CPU per delivery, the CPU per message
// of the PostgreSQL backends connected to the bench database (startDatabaseCpuWindow in
// bench/lib.ts), and the CPU other work on the machine took meanwhile (`other cpu %`, 100 = one
// core). Every search's probes are in the JSON line.
//
//   BENCH_FANOUT          receiver counts (here default 100,1000)
//   BENCH_RUNS            runs per side and receiver count (3)
//   BENCH_SEARCH_SECONDS  sending window of each probe (4)
//   BENCH_SEARCH_DRAIN    longest wait after a probe's window for deliveries (2)
//   BENCH_SEARCH_STEP     precision of the search, % (5)
//   BENCH_QUIET_WAIT      before each probe, wait up to this many seconds for the machine to go idle (0)
//
// Reading the numbers: with 2 cores the load generator shares the machine with both servers and
// PostgreSQL; at the baseline's rates its own CPU (`baseline bench cpu %`) may be what limits. When
// other work holds the cores (`other cpu %`), p99 measures the run queue more than either server's
// work, which pulls the ratio towards 1. Both make the service look closer to the baseline than it is.
import {
  baselineSide,
  fanoutRun,
  openBaselineReceivers,
  openReceivers,
  serviceSide,
  setupTeam,
  type FanoutRow,
  type FanoutSide,
} from "./fanout.ts";
import { envNumber, round, sleep, startBaselineRelay, startBenchServer, waitForQuietMachine } from "./lib.ts";

const RUNS = Math.max(1, Math.round(envNumber("BENCH_RUNS", 3)));
const PROBE_SECONDS = envNumber("BENCH_SEARCH_SECONDS", 4);
const PROBE_DRAIN_SECONDS = envNumber("BENCH_SEARCH_DRAIN", 2);
const STEP_PCT = Math.min(envNumber("BENCH_SEARCH_STEP", 5), 50);
const QUIET_WAIT_SECONDS = Number(process.env.BENCH_QUIET_WAIT ?? 0) || 0;
/** Bounds of a search: probes per search, and the rate range. */
const MAX_PROBES = 16;
const MIN_RATE = 1;
const MAX_RATE = 20_000;
const RECEIVER_ACCOUNTS = 20;
const SENDER_ACCOUNTS = 4;

function receiverCounts(): number[] {
  return (process.env.BENCH_FANOUT ?? "100,1000")
    .split(",")
    .map((value) => Number(value.trim()))
    .filter((value) => Number.isInteger(value) && value > 0 && value <= 10_000);
}

const roundRate = (rate: number) => (rate >= 100 ? Math.round(rate) : round(rate, 1));

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

type Probe = { rate: number; pass: boolean; accepted_per_s: number; delivered_pct: number; p99_ms: number };

export type SearchResult = {
  side: FanoutSide["name"];
  receivers: number;
  run: number;
  /** Highest passing rate found (0: not even MIN_RATE passed). */
  rate: number;
  /** Lowest failing rate found (null: none failed up to MAX_RATE or the probe limit). */
  failed_at: number | null;
  probes: Probe[];
  seconds: number;
  /** The probe at `rate`, in full. */
  best?: FanoutRow;
};

async function search(
  side: FanoutSide,
  run: number,
  start: number,
  factor: number,
  log: (line: string) => void,
): Promise<SearchResult> {
  const began = performance.now();
  const probes: Probe[] = [];
  let lo = 0;
  let hi = Infinity;
  let best: FanoutRow | undefined;
  const probe = async (rate: number) => {
    if (QUIET_WAIT_SECONDS > 0) await waitForQuietMachine(QUIET_WAIT_SECONDS);
    const row = await fanoutRun(side, rate, `${rate}/s`, {
      seconds: PROBE_SECONDS,
      drainSeconds: PROBE_DRAIN_SECONDS,
      measureHeap: false,
    });
    const pass = row.pass === true;
    probes.push({
      rate,
      pass,
      accepted_per_s: row.accepted_per_s,
      delivered_pct: row.delivered_pct,
      p99_ms: row.p99_ms,
    });
    log(
      `fanout-baseline: ${side.name} ${side.receivers.length} receivers run ${run}: ${rate}/s → ` +
        `${pass ? "pass" : "fail"} (accepted ${row.accepted_per_s}/s, delivered ${row.delivered_pct}%, p99 ${row.p99_ms} ms, ` +
        `server cpu ${row.server_cpu_pct}%, bench cpu ${row.bench_cpu_pct}%)`,
    );
    if (pass) {
      lo = rate;
      best = row;
    } else hi = rate;
    await sleep(300);
    return pass;
  };

  // Bracket: up while passing, down while failing.
  let rate = roundRate(Math.min(MAX_RATE, Math.max(MIN_RATE, start)));
  while (probes.length < MAX_PROBES) {
    const pass = await probe(rate);
    if (lo > 0 && hi !== Infinity) break;
    const next = roundRate(pass ? rate * factor : rate / factor);
    if ((pass && rate >= MAX_RATE) || (!pass && rate <= MIN_RATE)) break;
    rate = Math.min(MAX_RATE, Math.max(MIN_RATE, next));
  }
  // Bisect between the highest pass and the lowest failure.
  while (lo > 0 && hi !== Infinity && hi / lo > 1 + STEP_PCT / 100 && probes.length < MAX_PROBES) {
    const middle = roundRate(Math.sqrt(lo * hi));
    if (middle <= lo || middle >= hi) break;
    await probe(middle);
  }
  return {
    side: side.name,
    receivers: side.receivers.length,
    run,
    rate: lo,
    failed_at: hi === Infinity ? null : hi,
    probes,
    seconds: Math.round((performance.now() - began) / 1000),
    ...(best && { best }),
  };
}

export type ComparisonRow = {
  receivers: number;
  runs: number;
  service_rate: number | null;
  baseline_rate: number | null;
  /** Median service rate / median baseline rate. */
  ratio: number | null;
  service_rates: number[];
  baseline_rates: number[];
  /** Service / baseline of each run (pairs in the order measured). */
  ratios: (number | null)[];
  /** The median of `ratios`: each run's service against the baseline run beside it. */
  median_run_ratio: number | null;
  service_cpu_us_per_delivery: number | null;
  baseline_cpu_us_per_delivery: number | null;
  service_pg_cpu_us_per_message: number | null;
  baseline_pg_cpu_us_per_message: number | null;
  service_p99_ms: number | null;
  baseline_p99_ms: number | null;
  /** The load generator's CPU (100 = one core) at the baseline's best probe: near 100, it limits. */
  baseline_bench_cpu_pct: number | null;
  service_server_cpu_pct: number | null;
  baseline_server_cpu_pct: number | null;
  /** Other work on the machine during the best probes of both sides (100 = one core): when high, the numbers are noisy. */
  other_cpu_pct: number | null;
};

function summarize(receivers: number, results: SearchResult[]): ComparisonRow {
  const of = (name: FanoutSide["name"]) => results.filter((result) => result.side === name);
  const service = of("service");
  const baseline = of("baseline");
  const maybe = (value: number | null, digits = 1) => (value === null ? null : round(value, digits));
  /** The median over `list`'s best probes of one of their columns, rounded. */
  const med = (list: SearchResult[], pick: (row: FanoutRow) => number | null, digits = 1) =>
    maybe(
      median(list.flatMap((result) => (result.best && pick(result.best) !== null ? [pick(result.best)!] : []))),
      digits,
    );
  const serviceRate = median(service.map((result) => result.rate));
  const baselineRate = median(baseline.map((result) => result.rate));
  const ratios = service.map((result, i) => {
    const other = baseline[i]?.rate;
    return other ? round(result.rate / other, 3) : null;
  });
  const runRatios = ratios.filter((ratio): ratio is number => ratio !== null);
  return {
    receivers,
    runs: Math.min(service.length, baseline.length),
    service_rate: maybe(serviceRate),
    baseline_rate: maybe(baselineRate),
    ratio: serviceRate !== null && baselineRate ? round(serviceRate / baselineRate, 3) : null,
    service_rates: service.map((result) => result.rate),
    baseline_rates: baseline.map((result) => result.rate),
    ratios,
    median_run_ratio: maybe(median(runRatios), 3),
    service_cpu_us_per_delivery: med(service, (row) => row.server_cpu_us_per_delivery),
    baseline_cpu_us_per_delivery: med(baseline, (row) => row.server_cpu_us_per_delivery),
    service_pg_cpu_us_per_message: med(service, (row) => row.pg_cpu_us_per_message, 0),
    baseline_pg_cpu_us_per_message: med(baseline, (row) => row.pg_cpu_us_per_message, 0),
    service_p99_ms: med(service, (row) => row.p99_ms),
    baseline_p99_ms: med(baseline, (row) => row.p99_ms),
    baseline_bench_cpu_pct: med(baseline, (row) => row.bench_cpu_pct, 0),
    service_server_cpu_pct: med(service, (row) => row.server_cpu_pct, 0),
    baseline_server_cpu_pct: med(baseline, (row) => row.server_cpu_pct, 0),
    other_cpu_pct: med(results, (row) => row.other_cpu_pct, 0),
  };
}

export type FanoutBaseline = {
  settings: { runs: number; probe_seconds: number; drain_seconds: number; step_pct: number };
  rows: ComparisonRow[];
  searches: SearchResult[];
};

export async function runFanoutBaseline(log: (line: string) => void): Promise<FanoutBaseline> {
  const settings = { runs: RUNS, probe_seconds: PROBE_SECONDS, drain_seconds: PROBE_DRAIN_SECONDS, step_pct: STEP_PCT };
  const counts = receiverCounts();
  if (!process.env.DATABASE_URL) {
    log("fanout-baseline: skipped, the baseline relay needs DATABASE_URL (PostgreSQL)");
    return { settings, rows: [], searches: [] };
  }
  if (counts.length === 0) return { settings, rows: [], searches: [] };
  const rows: ComparisonRow[] = [];
  const searches: SearchResult[] = [];
  const server = await startBenchServer("fanout-baseline", { inspect: true });
  const relay = await startBaselineRelay().catch(async (error: unknown) => {
    await server.stop();
    throw error;
  });
  try {
    log(`fanout-baseline: setting up ${RECEIVER_ACCOUNTS} receiver and ${SENDER_ACCOUNTS} sender accounts`);
    const team = await setupTeam(server.url, RECEIVER_ACCOUNTS, SENDER_ACCOUNTS);
    for (const count of counts) {
      let service: FanoutSide | undefined;
      let baseline: FanoutSide | undefined;
      try {
        log(`fanout-baseline: opening ${count} receivers on each side`);
        service = serviceSide(server, team, await openReceivers(server, team, count));
        baseline = baselineSide(relay, await openBaselineReceivers(relay, count));
        await sleep(500);
        // An unrecorded warm-up of both (JIT, pools, prepared statements).
        const start = Math.max(MIN_RATE, Math.round(20_000 / count));
        for (const side of [service, baseline]) {
          log(`fanout-baseline: warming up ${side.name}, ${count} receivers at ${start}/s`);
          await fanoutRun(side, start, "warm-up", {
            seconds: 2,
            drainSeconds: PROBE_DRAIN_SECONDS,
            measureHeap: false,
          });
          await sleep(300);
        }
        const last = new Map<FanoutSide["name"], number>();
        const results: SearchResult[] = [];
        for (let run = 1; run <= RUNS; run++) {
          for (const side of [service, baseline]) {
            const previous = last.get(side.name);
            const result = await search(side, run, previous || start, previous ? 1.25 : 2, log);
            log(
              `fanout-baseline: ${side.name} ${count} receivers run ${run}: highest passing ${result.rate}/s ` +
                `(failed at ${result.failed_at ?? "-"}/s; ${result.probes.length} probes, ${result.seconds} s)`,
            );
            last.set(side.name, result.rate);
            results.push(result);
          }
        }
        searches.push(...results);
        rows.push(summarize(count, results));
      } finally {
        for (const receiver of [...(service?.receivers ?? []), ...(baseline?.receivers ?? [])]) receiver.close();
        await sleep(500);
      }
    }
  } finally {
    await relay.stop();
    await server.stop();
  }
  return { settings, rows, searches };
}
