// `npm run bench [-- requests|fanout|fanout-baseline|idle|push|translation|webhooks|outbound|features|lifecycle|unread|search|presence ...]`: load scenarios against the
// real server, started as its own process for each section (PGlite, or PostgreSQL/Redis when
// DATABASE_URL/REDIS_URL are set). Every loop is bounded in time and count, and only talks to
// 127.0.0.1. Prints a table per section, then everything as one line of JSON. With no argument,
// all of them run but fanout-baseline (about 15 minutes), features, lifecycle, unread, search and presence (only when named).
//
//   requests  request/response throughput and latency of the main paths (BENCH_SECONDS each)
//   fanout    N receivers on one channel over WebSocket, senders over REST (BENCH_FANOUT=10,100,1000);
//             with DATABASE_URL the same rows again against the baseline relay, a bare `ws` server
//             with one INSERT per message (bench/baseline-relay.ts; BENCH_FANOUT_BASELINE=0: not)
//   fanout-baseline  service against the baseline relay, highest passing open-loop rate of each
//             (99.9% delivered, p99 < 200 ms) by a rate search to 5%, median of BENCH_RUNS (3)
//             alternating runs, at BENCH_FANOUT (here 100,1000) receivers; ratio and CPU per
//             delivery; needs DATABASE_URL. Knobs in bench/fanout-baseline.ts.
//   idle      server memory per idle WebSocket connection at BENCH_IDLE_CONNECTIONS (5000), each with
//             one events.onUser subscription (BENCH_COMPILED=1, for any section: the server runs the
//             compiled build, dist/, as the image does, rather than under tsx)
//   push      a channel of BENCH_PUSH_MEMBERS (1000) members with one Expo device each (a fake
//             Expo in this process): post latency at BENCH_PUSH_RATE (20/s) for BENCH_SECONDS (10)
//             without and with push, time until all of a message's pushes arrived
//   translation  a channel of BENCH_TRANSLATION_READERS (30) readers in en, ja and zh-CN, a poster in
//             en, a fake LibreTranslate answering in BENCH_TRANSLATION_DELAY_MS (50): post latency at
//             BENCH_TRANSLATION_RATE (100/s) for BENCH_SECONDS (10) with translation off and on,
//             time from post to translation.ready per language, provider calls per message
//   webhooks  a channel with BENCH_WEBHOOK_SUBSCRIBERS (100) live subscribers: closed-loop posts
//             (BENCH_WEBHOOK_CONCURRENCY, 8, in flight for BENCH_SECONDS, 10, each) over REST and
//             through a signed inbound webhook, in alternating slices: posts/s, post latency, post →
//             live receipt (per delivery and until the last subscriber), webhook rate as a share of
//             REST's (target 80%)
//   outbound  BENCH_OUTBOUND_MESSAGES (1000) outbound webhook deliveries queued, then drained by one
//             worker process to a local receiver: deliveries/s (target 500; needs PostgreSQL and Redis)
//   features  server + PostgreSQL + Redis CPU per message at a fixed open-loop rate (BENCH_FEATURES_RATE,
//             200: set it to 60% of fanout-baseline's "baseline msg/s") to BENCH_FEATURES_RECEIVERS (100)
//             receivers, plain against push + translation + an outbound webhook all on, alternating
//             BENCH_RUNS (3) pairs, each on a fresh server and database; medians, ratio (target ≤ 1.15)
//             and the counts that show the features happened; needs DATABASE_URL and REDIS_URL.
//             Knobs in bench/features.ts.
//   lifecycle  a channel with BENCH_LIFECYCLE_RECEIVERS (100) live subscribers: closed-loop posts alone
//             against a mix of 70% posts, 15% edits, 10% reactions, 5% deletes from 4 senders, alternating
//             BENCH_RUNS (3) runs each: ops/s, p99s, delivery, ratio (target ≥ 0.9); 60 racing reaction
//             PUTs at one message (expect 50 × 200, 10 × 422); history page latency with reactions on 20%
//             against without (target ≤ 1.2). Knobs in bench/lifecycle.ts.
//   unread    BENCH_UNREAD_MESSAGES (10,000,000) messages over BENCH_UNREAD_CHANNELS (2000) channels, bulk-loaded
//             in SQL once (kept for later runs; BENCH_UNREAD_RELOAD=1 loads again), a reader in
//             BENCH_UNREAD_MEMBER_CHANNELS (100) of them with over 1000 unread and some mentions in each:
//             GET …/channels and GET /api/v1/unread p50/p95/p99 over BENCH_UNREAD_REQUESTS (200) each
//             (target p95 < 30 ms), the answers checked, EXPLAIN (ANALYZE, BUFFERS) of the count SQL,
//             POST …/read latency; needs DATABASE_URL (a database of its own). Knobs in bench/unread.ts.
//   search    message search: BENCH_SEARCH_MESSAGES (1,000,000) messages in five languages with translations
//             over 50 channels, loaded in SQL once into a database bench_search next to DATABASE_URL's (kept;
//             BENCH_SEARCH_RELOAD=1 loads again), indexed by the product's own backfill (timed, rows/s,
//             interrupted once and resumed); seven queries × BENCH_SEARCH_REQUESTS (100) p50/p95/p99 (target
//             p95 < 100 ms) and pathological ones (target < 2 s, no 5xx), every answer checked against one
//             worked out from the messages, EXPLAIN (ANALYZE, BUFFERS); post → found under fan-out load
//             (BENCH_SEARCH_FANOUT_RATE, 600/s, to 100 receivers, on a fresh database; target p99 < 2 s);
//             the seven queries on PGlite with BENCH_SEARCH_PGLITE_MESSAGES (100,000). Needs DATABASE_URL
//             (and REDIS_URL for the fan-out part). Knobs in bench/search.ts.
//   presence  BENCH_PRESENCE_SOCKETS (5000) signed-in sockets (one user each, seeded in SQL, all in one
//             workspace), BENCH_PRESENCE_WATCHERS (1000) of them on presence.onUsers with 50 users each,
//             100 disconnects and reconnects a second for 60 s (half back in 1 s, inside the grace window;
//             half after it, PRESENCE_OFFLINE_AFTER_SECONDS=2): watchers' event delay p50/p99 (target p99
//             < 2 s past the change, offline counted from close + grace), Redis commands per connect or
//             disconnect (the server's own, by MONITOR), PostgreSQL statements in the minute (the server's
//             counter; target ≤ 1/s), heap per idle socket against the service before presence (git
//             archive of that commit; target within 1 KiB). About 4 minutes. Knobs in bench/presence.ts.
import { cpus, totalmem } from "node:os";
import { runFanout, runIdle } from "./fanout.ts";
import { runFanoutBaseline } from "./fanout-baseline.ts";
import { runFeatures } from "./features.ts";
import { runLifecycle, TARGET_HISTORY_RATIO, TARGET_MIXED_SHARE } from "./lifecycle.ts";
import { runOutbound } from "./outbound.ts";
import { runPresence, TARGET_MEMORY_KIB, TARGET_P99_MS, TARGET_STATEMENTS_PER_S } from "./presence.ts";
import { runPush } from "./push.ts";
import { runRequestRows } from "./requests.ts";
import {
  runSearch,
  TARGET_FRESH_P99_MS,
  TARGET_P95_MS as SEARCH_TARGET_P95_MS,
  TARGET_PATHOLOGICAL_MS,
} from "./search.ts";
import { runTranslation } from "./translation.ts";
import { runUnread, TARGET_P95_MS } from "./unread.ts";
import { runWebhooks } from "./webhooks.ts";

const SECTIONS = [
  "requests",
  "fanout",
  "fanout-baseline",
  "idle",
  "push",
  "translation",
  "webhooks",
  "outbound",
  "features",
  "lifecycle",
  "unread",
  "search",
  "presence",
] as const;
type Section = (typeof SECTIONS)[number];
/** Sections that run only when named. */
const ON_REQUEST: readonly Section[] = ["fanout-baseline", "features", "lifecycle", "unread", "search", "presence"];

const asked = process.argv.slice(2).filter((arg) => arg !== "--");
const unknown = asked.filter((arg) => !(SECTIONS as readonly string[]).includes(arg));
if (unknown.length > 0) {
  console.error(`unknown section(s): ${unknown.join(", ")}; choose from ${SECTIONS.join(", ")}`);
  process.exit(2);
}
const selected = new Set<Section>(
  asked.length > 0 ? (asked as Section[]) : SECTIONS.filter((section) => !ON_REQUEST.includes(section)),
);
const log = (line: string) => console.error(`[bench] ${line}`);

const result: Record<string, unknown> = {
  database: process.env.DATABASE_URL ? "postgres" : "pglite",
  redis: Boolean(process.env.REDIS_URL),
  node: process.version,
  cpus: `${cpus().length} × ${cpus()[0]?.model ?? "unknown"}`,
  memory_gib: Math.round(totalmem() / 2 ** 30),
};
const started = performance.now();

if (selected.has("requests")) {
  log("requests");
  const rows = await runRequestRows();
  console.table(rows);
  result.rows = rows;
}
if (selected.has("fanout")) {
  const rows = await runFanout(log);
  // The table keeps the main columns; the JSON line has them all.
  console.table(
    rows.map((row) => ({
      server: row.server,
      receivers: row.receivers,
      rate: row.rate,
      "accepted/s": row.accepted_per_s,
      "deliveries/s": row.deliveries_per_s,
      "delivered %": row.delivered_pct,
      p50_ms: row.p50_ms,
      p95_ms: row.p95_ms,
      p99_ms: row.p99_ms,
      pass: row.pass ?? "-",
      "post p99 ms": row.post_p99_ms,
      "server cpu %": row.server_cpu_pct,
      "cpu µs/delivery": row.server_cpu_us_per_delivery ?? "-",
      "pg cpu µs/msg": row.pg_cpu_us_per_message ?? "-",
      "rss MiB": row.server_rss_mib,
      "heap MiB": row.server_heap_after_gc_mib ?? "-",
      "pg+redis cpu %": row.stores_cpu_pct,
      "bench cpu %": row.bench_cpu_pct,
      "other cpu %": row.other_cpu_pct,
      errors: row.post_errors + row.skipped,
    })),
  );
  result.fanout = rows;
}
if (selected.has("fanout-baseline")) {
  const comparison = await runFanoutBaseline(log);
  const dash = (value: number | null) => value ?? "-";
  console.table(
    comparison.rows.map((row) => ({
      receivers: row.receivers,
      runs: row.runs,
      "service msg/s": dash(row.service_rate),
      "baseline msg/s": dash(row.baseline_rate),
      "service/baseline": dash(row.ratio),
      "median of run ratios": dash(row.median_run_ratio),
      "service cpu µs/delivery": dash(row.service_cpu_us_per_delivery),
      "baseline cpu µs/delivery": dash(row.baseline_cpu_us_per_delivery),
      "service pg µs/msg": dash(row.service_pg_cpu_us_per_message),
      "baseline pg µs/msg": dash(row.baseline_pg_cpu_us_per_message),
      "service p99 ms": dash(row.service_p99_ms),
      "baseline p99 ms": dash(row.baseline_p99_ms),
      "baseline bench cpu %": dash(row.baseline_bench_cpu_pct),
      "other cpu %": dash(row.other_cpu_pct),
    })),
  );
  // Each run: the highest passing rate of each side, in the order measured.
  console.table(
    comparison.rows.map((row) => ({
      receivers: row.receivers,
      "service msg/s (each run)": row.service_rates.join(", "),
      "baseline msg/s (each run)": row.baseline_rates.join(", "),
      "ratio (each run)": row.ratios.map(dash).join(", "),
    })),
  );
  result.fanout_baseline = {
    settings: comparison.settings,
    rows: comparison.rows,
    // The probes in brief; the best probe of each search in full.
    searches: comparison.searches,
  };
}
if (selected.has("idle")) {
  const idle = await runIdle(log);
  console.table(idle.rows);
  console.table([idle.broadcast]);
  result.idle = idle;
}
if (selected.has("push")) {
  const push = await runPush(log);
  const dash = (value: number | null) => value ?? "-";
  console.table(
    push.rows.map((row) => ({
      phase: row.phase,
      members: row.members,
      rate: `${row.rate_per_s}/s`,
      posts: row.posts,
      "post p50 ms": row.post_p50_ms,
      "post p95 ms": row.post_p95_ms,
      "post p99 ms": row.post_p99_ms,
      "all-delivered p50 ms": dash(row.all_delivered_p50_ms),
      "all-delivered p95 ms": dash(row.all_delivered_p95_ms),
      "all-delivered max ms": dash(row.all_delivered_max_ms),
      "delivered %": dash(row.delivered_pct),
      duplicates: row.duplicates,
      "expo requests": row.expo_requests,
      errors: row.post_errors + row.skipped,
    })),
  );
  console.table([
    {
      measurement: "one message, all pushes ms",
      messages: push.single.runs.length,
      median: dash(push.single.all_pushes_median_ms),
      max: dash(push.single.all_pushes_max_ms),
      "first push ms (each)": push.single.runs.map((run) => dash(run.first_push_ms)).join(", "),
      "all pushes ms (each)": push.single.runs.map((run) => dash(run.all_pushes_ms)).join(", "),
    },
  ]);
  result.push = push;
}
if (selected.has("translation")) {
  const translation = await runTranslation(log);
  const dash = (value: number | null | undefined) => value ?? "-";
  console.table(
    translation.rows.map((row) => {
      const all = row.ready.find((ready) => ready.language === "all");
      return {
        phase: row.phase,
        rate: `${row.rate_per_s}/s`,
        posts: row.posts,
        "post p50 ms": row.post_p50_ms,
        "post p95 ms": row.post_p95_ms,
        "post p99 ms": row.post_p99_ms,
        "post max ms": row.post_max_ms,
        "ready p50 ms": dash(all?.p50_ms),
        "ready p99 ms": dash(all?.p99_ms),
        "ready max ms": dash(all?.max_ms),
        "received/expected":
          row.phase === "translation on" ? `${row.translations_received}/${row.translations_expected}` : "-",
        "provider req/msg": dash(row.provider_requests_per_message),
        "texts/req": dash(row.provider_texts_per_request),
        "server cpu %": row.server_cpu_pct,
        "pg+redis cpu %": row.stores_cpu_pct,
        errors: row.post_errors + row.skipped,
      };
    }),
  );
  console.table(
    translation.rows
      .flatMap((row) => row.ready)
      .map((ready) => ({
        "post → translation.ready": ready.language,
        expected: ready.expected,
        received: ready.received,
        failed: ready.failed,
        "wrong content": ready.wrong_content,
        p50_ms: dash(ready.p50_ms),
        p95_ms: dash(ready.p95_ms),
        p99_ms: dash(ready.p99_ms),
        max_ms: dash(ready.max_ms),
      })),
  );
  console.table([
    {
      "post p99 change %": dash(translation.post_p99_increase_pct),
      "post p99 within 10%": translation.targets.post_p99_within_10pct,
      "ready p99 under 500 ms": translation.targets.ready_p99_under_500ms,
      "all translations received": translation.targets.all_translations_received,
    },
  ]);
  result.translation = translation;
}
if (selected.has("webhooks")) {
  const webhooks = await runWebhooks(log);
  const dash = (value: number | null) => value ?? "-";
  console.table(
    webhooks.rows.map((row) => ({
      phase: row.phase,
      subscribers: row.subscribers,
      "in flight": row.concurrency,
      posts: row.posts,
      "posts/s": row.posts_per_s,
      "post p50 ms": row.post_p50_ms,
      "post p99 ms": row.post_p99_ms,
      "all-received p50 ms": dash(row.all_received_p50_ms),
      "all-received p99 ms": dash(row.all_received_p99_ms),
      "all-received max ms": dash(row.all_received_max_ms),
      "delivery p50 ms": dash(row.delivery_p50_ms),
      "delivery p99 ms": dash(row.delivery_p99_ms),
      "received/expected": `${row.deliveries_received}/${row.deliveries_expected}`,
      "server cpu %": row.server_cpu_pct,
      "pg+redis cpu %": row.stores_cpu_pct,
      "other cpu %": row.other_cpu_pct,
      errors: row.post_errors,
    })),
  );
  console.table([
    {
      "webhook / REST posts/s %": dash(webhooks.webhook_to_rest_pct),
      "target ≥ 80%": webhooks.targets.webhook_rate_at_least_80pct_of_rest,
    },
  ]);
  result.webhooks = webhooks;
}
if (selected.has("outbound")) {
  const outbound = await runOutbound(log);
  console.table([
    {
      mode: outbound.mode,
      messages: outbound.messages,
      "received (unique)": `${outbound.deliveries_received} (${outbound.unique_deliveries})`,
      duplicates: outbound.duplicates,
      "bad signatures": outbound.bad_signatures,
      "drain s": outbound.drain_seconds,
      "deliveries/s": outbound.deliveries_per_s,
      "worker cpu %": outbound.worker_cpu_pct ?? "-",
      "target ≥ 500/s": outbound.targets.deliveries_per_s_at_least_500 ?? "-",
    },
  ]);
  result.outbound = outbound;
}
if (selected.has("features")) {
  const features = await runFeatures(log);
  const dash = (value: number | boolean | null) => value ?? "-";
  console.table(
    features.summary.map((row) => ({
      config: row.config,
      runs: row.runs,
      "accepted/s": dash(row.accepted_per_s),
      "delivered %": dash(row.delivered_pct),
      p99_ms: dash(row.p99_ms),
      "server µs/msg": dash(row.server_cpu_us_per_message),
      "pg µs/msg": dash(row.pg_cpu_us_per_message),
      "redis µs/msg": dash(row.redis_cpu_us_per_message),
      "total µs/msg": dash(row.total_cpu_us_per_message),
      "other cpu %": dash(row.other_cpu_pct),
      pushes: row.pushes,
      "translated texts": row.translations,
      "webhook deliveries": row.webhooks,
    })),
  );
  console.table([
    {
      "features/plain total": dash(features.ratio.total),
      server: dash(features.ratio.server),
      pg: dash(features.ratio.pg),
      redis: dash(features.ratio.redis),
      "total (each pair)": features.pair_ratios.map(dash).join(", "),
      "within 15%": dash(features.targets.total_within_15pct),
      "features happened": dash(features.targets.features_happened),
      "load carried": dash(features.targets.load_carried),
    },
  ]);
  result.features = features;
}
if (selected.has("lifecycle")) {
  const lifecycle = await runLifecycle(log);
  const dash = (value: number | string | null) => value ?? "-";
  const verdict = (met: boolean | null, why?: string) =>
    met === null ? `not judged (${why})` : met ? "met" : "missed";
  const mixed = lifecycle.summary.find((row) => row.load === "mixed");
  console.table(
    lifecycle.summary.map((row) => ({
      load: row.load,
      "ops/s": dash(row.ops_per_s),
      "post p99 ms": dash(row.post_p99_ms),
      "delivery p99 ms": dash(row.delivery_p99_ms),
      delivered: row.delivered_pct === null ? "-" : `${row.delivered_pct}%`,
      "ratio vs posts alone": dash(row.ratio_vs_posts),
      "op p99 ms": dash(row.op_p99_ms),
      runs: row.runs,
      errors: row.errors,
    })),
  );
  console.table(
    lifecycle.kinds.map((row) => ({
      load: row.load,
      kind: row.kind,
      "ok/attempted": `${row.ok}/${row.attempted}`,
      "p50 ms": dash(row.p50_ms),
      "p99 ms": dash(row.p99_ms),
      "top error": dash(row.top_error),
    })),
  );
  console.log(
    `target: mixed ≥ ${TARGET_MIXED_SHARE * 100}% of posts alone: ` +
      `${mixed?.ratio_vs_posts == null ? "-" : `${Math.round(mixed.ratio_vs_posts * 1000) / 10}%`} ` +
      `(each pair: ${lifecycle.pair_ratios.map(dash).join(", ")}) → ` +
      verdict(lifecycle.targets.mixed_at_least_90pct, lifecycle.targets.not_judged.mixed),
  );
  const { race, history } = lifecycle;
  console.table([
    {
      "60 racing PUTs of distinct emoji on one message": `${race.puts} PUTs`,
      "got 200": race.ok_200,
      "got 422": race.unprocessable_422,
      "422 with errors.emoji": race.well_formed_422,
      other: Object.keys(race.other).length > 0 ? JSON.stringify(race.other) : "-",
      "stored reactions": dash(race.stored_reactions),
      "expect 50 × 200, 10 × 422": race.pass ? "met" : "missed",
      ...(race.error && { error: race.error }),
    },
  ]);
  console.table([
    {
      "history page (limit 50)": `${history.messages_per_channel} messages per channel`,
      requests: history.requests,
      "plain median ms": dash(history.plain_median_ms),
      "reactions median ms": dash(history.with_reactions_median_ms),
      "plain p90 ms": dash(history.plain_p90_ms),
      "reactions p90 ms": dash(history.with_reactions_p90_ms),
      "reactions placed": `${history.reactions_placed}/${history.reactions_attempted}`,
      "reacted in page": dash(history.reacted_in_page),
      ratio: dash(history.ratio),
      [`target ≤ ${TARGET_HISTORY_RATIO}`]: verdict(
        lifecycle.targets.history_within_1_2,
        lifecycle.targets.not_judged.history,
      ),
    },
  ]);
  result.lifecycle = lifecycle;
}
if (selected.has("unread")) {
  const unread = await runUnread(log);
  const dash = (value: number | string | null) => value ?? "-";
  const { data_set: data } = unread;
  console.table([
    {
      messages: data.messages,
      channels: unread.settings.channels,
      "reader's channels": unread.settings.member_channels,
      "loaded this run": data.loaded_this_run,
      "load s (this run)": dash(data.load_seconds_this_run),
      "load s (all loads)": data.load_seconds_total,
      "database MiB": data.database_mib,
      "messages heap MiB": data.messages_heap_mib,
      "messages indexes MiB": data.messages_indexes_mib,
    },
  ]);
  console.table(
    unread.rows.map((row) => ({
      endpoint: row.endpoint,
      requests: row.requests,
      p50_ms: dash(row.p50_ms),
      p95_ms: dash(row.p95_ms),
      p99_ms: dash(row.p99_ms),
      max_ms: dash(row.max_ms),
      "answer KiB": dash(row.answer_kib),
      errors: row.errors,
      "server cpu ms/req": dash(row.server_cpu_ms),
      "postgres cpu ms/req": dash(row.pg_cpu_ms),
      [`p95 < ${TARGET_P95_MS} ms`]: row.pass === null ? "-" : row.pass ? "met" : "missed",
    })),
  );
  console.table(
    unread.explain.map((row) => ({
      "EXPLAIN (ANALYZE, BUFFERS)": row.statement,
      "execution ms": row.execution_ms,
      "planning ms": row.planning_ms,
      "heap fetches": row.heap_fetches,
      "buffers hit": row.shared_hit,
      "buffers read": row.shared_read,
      "jit functions": dash(row.jit_functions),
      "execution ms, jit off": dash(row.execution_ms_without_jit),
      scans: row.scans.join("; "),
    })),
  );
  console.log(
    `machine during the recorded requests: ${unread.machine.machine_busy_pct}% busy, other work ` +
      `${unread.machine.other_cpu_pct}% of a core (${unread.machine.busy_before_pct}% busy just before)`,
  );
  const problems = [...unread.checks.list, ...unread.checks.unread, ...unread.checks.reads];
  console.log(
    `answers: ${unread.targets.answers_right ? "right" : "WRONG"}` +
      (unread.checks.differing_answers > 0 ? ` (${unread.checks.differing_answers} differed from the first)` : "") +
      (problems.length > 0 ? `: ${problems.join("; ")}` : ""),
  );
  result.unread = unread;
}
if (selected.has("search")) {
  const search = await runSearch(log);
  const dash = (value: number | string | boolean | null | undefined) => value ?? "-";
  const verdict = (pass: boolean | null) => (pass === null ? "-" : pass ? "met" : "missed");
  const dataRow = (data: NonNullable<typeof search.postgres>["data"]) => {
    const backfill = data.backfill;
    return {
      database: data.database,
      messages: data.messages,
      "done translations": data.translations,
      "readable channels": `${data.readable_channels} of ${data.channels + 1}`,
      "load s (this run)": dash(data.load_seconds_this_run),
      "load s (all loads)": data.load_seconds_total,
      "index built by": backfill ? `${backfill.built_by}${data.backfill_this_run ? "" : " (earlier run)"}` : "-",
      "backfill s": dash(backfill?.seconds),
      "rows/s": dash(backfill?.rows_per_s),
      "messages/s": dash(backfill?.messages_per_s),
      "restart at %": backfill?.restart ? backfill.restart.at_pct : "-",
      resumed: backfill?.restart ? backfill.restart.resumed : "-",
      "index complete": dash(backfill?.complete),
      "index rows": data.index_rows,
      "database MiB": dash(data.database_mib),
      "index table MiB": data.index_table_mib,
      "GIN MiB": data.gin_mib,
    };
  };
  const queryRow = (row: NonNullable<typeof search.postgres>["queries"][number], target: string) => ({
    query: row.query,
    q: row.q,
    requests: row.requests,
    p50_ms: dash(row.p50_ms),
    p95_ms: dash(row.p95_ms),
    p99_ms: dash(row.p99_ms),
    max_ms: dash(row.max_ms),
    "first page hits": dash(row.first_page_hits),
    "matching messages": dash(row.matching_messages),
    errors: Object.keys(row.statuses).length > 0 ? JSON.stringify(row.statuses) : 0,
    answer: row.right === null ? "-" : row.right ? "right" : `WRONG: ${row.problem}`,
    [target]: verdict(row.pass),
  });
  if (search.postgres) {
    const pg = search.postgres;
    console.table([dataRow(pg.data)]);
    console.table(pg.queries.map((row) => queryRow(row, `p95 < ${SEARCH_TARGET_P95_MS} ms`)));
    console.table(pg.pathological.map((row) => queryRow(row, `max < ${TARGET_PATHOLOGICAL_MS} ms`)));
    console.table(
      pg.explain.map((row) => ({
        query: row.query,
        statement: row.statement,
        "execution ms": row.execution_ms,
        "planning ms": row.planning_ms,
        "buffers hit": row.shared_hit,
        "buffers read": row.shared_read,
      })),
    );
    for (const row of pg.explain.filter((row) => row.plan.length > 0)) {
      console.log(`EXPLAIN (ANALYZE, BUFFERS) of ${row.statement} for "${row.query}" (${row.execution_ms} ms):`);
      console.log(row.plan.join("\n"));
    }
    console.log(
      `machine during the recorded requests: ${pg.machine.machine_busy_pct}% busy, other work ` +
        `${pg.machine.other_cpu_pct}% of a core (${pg.machine.busy_before_pct}% busy just before)`,
    );
  }
  if (search.freshness) {
    const fresh = search.freshness;
    console.table([
      {
        "fan-out rate": `${fresh.rate_per_s}/s`,
        receivers: fresh.receivers,
        seconds: fresh.seconds,
        "accepted/s": fresh.accepted_per_s,
        "accepted % of due": fresh.accepted_pct,
        skipped: fresh.skipped,
        "post errors": fresh.post_errors,
        "delivered %": fresh.delivered_pct,
        "delivery p50/p99 ms": `${fresh.delivery_p50_ms} / ${fresh.delivery_p99_ms}`,
        "delivered all": fresh.delivered_ok,
        "probes found": `${fresh.probes_found}/${fresh.probes}`,
        "found p50 ms": dash(fresh.found_p50_ms),
        "found p95 ms": dash(fresh.found_p95_ms),
        "found p99 ms": dash(fresh.found_p99_ms),
        "found max ms": dash(fresh.found_max_ms),
        "searches/s": fresh.searches_per_s,
        "search p50/p95 ms": `${dash(fresh.search_p50_ms)} / ${dash(fresh.search_p95_ms)}`,
        "server cpu %": fresh.server_cpu_pct,
        [`p99 < ${TARGET_FRESH_P99_MS} ms`]: verdict(fresh.pass),
      },
    ]);
  }
  if (search.pglite) {
    console.table([dataRow(search.pglite.data)]);
    console.table(search.pglite.queries.map((row) => queryRow(row, `p95 < ${SEARCH_TARGET_P95_MS} ms`)));
  }
  if (search.skipped.length > 0) console.log(`search: skipped: ${search.skipped.join("; ")}`);
  result.search = search;
}
if (selected.has("presence")) {
  const presence = await runPresence(log);
  const dash = (value: number | string | null | undefined) => value ?? "-";
  const verdict = (met: boolean | null) => (met === null ? "-" : met ? "met" : "missed");
  const { settings, churn, snapshot, events, redis, postgres, memory, targets } = presence;
  console.table([
    {
      sockets: settings.sockets,
      watchers: `${settings.watchers} × ${settings.watched_each} users`,
      "churn /s": settings.rate_per_s,
      seconds: settings.seconds,
      "offline after s": settings.offline_after_s,
      "away s (short/long)": `${settings.short_away_s} / ${settings.long_away_s}`,
      connects: churn.connects,
      disconnects: churn.disconnects,
      "connect errors": churn.connect_errors,
      "late ticks": churn.late_ticks,
      "first events online": `${snapshot.online}/${snapshot.expected}`,
      "server cpu %": churn.server_cpu_pct,
      "pg+redis cpu %": churn.stores_cpu_pct,
      "bench cpu %": churn.bench_cpu_pct,
      "other cpu %": churn.other_cpu_pct,
    },
  ]);
  console.table(
    events.rows.map((row) => ({
      "watchers' events": row.kind,
      expected: row.expected,
      received: row.received,
      missed: row.missed,
      p50_ms: dash(row.p50_ms),
      p99_ms: dash(row.p99_ms === null && row.missed > 0 ? "missed > 1%" : row.p99_ms),
      max_ms: dash(row.max_ms),
      unexpected: row.kind === "all" ? events.unexpected : "",
      [`p99 < ${TARGET_P99_MS} ms`]:
        row.kind === "all"
          ? verdict(targets.event_p99_under_2s)
          : verdict(row.p99_ms !== null && row.p99_ms < TARGET_P99_MS),
    })),
  );
  console.table([
    {
      measurement: "Redis commands per connect or disconnect",
      value: redis ? redis.commands_per_change : "n/a",
      detail: redis
        ? `${redis.churn_commands} from the server in the minute (${redis.churn_script_runs} script runs; ` +
          `${redis.commands_with_scripts_per_change}/change counting the ${redis.churn_commands_in_scripts} run inside scripts); ` +
          `at rest ${redis.idle_commands_per_s}/s subtracted`
        : "no REDIS_URL",
      target: "-",
      result: "-",
    },
    {
      measurement: "PostgreSQL statements in the minute",
      value: postgres ? postgres.statements_in_window : "n/a",
      detail: postgres ? `${postgres.per_s}/s; at rest ${postgres.idle_statements} in ${postgres.idle_seconds} s` : "",
      target: `≤ ${TARGET_STATEMENTS_PER_S * settings.seconds}`,
      result: verdict(targets.postgres_at_most_1_per_s),
    },
    {
      measurement: "heap KiB per idle socket, with − without presence",
      value: dash(memory.heap_kib_difference),
      detail: `RSS difference ${dash(memory.rss_kib_difference)} KiB/socket; without: ${memory.without_presence}`,
      target: `≤ ${TARGET_MEMORY_KIB}`,
      result: verdict(targets.memory_within_1kib),
    },
    {
      measurement: "heap growth over the churn, bytes per event received",
      value: dash(memory.heap_growth_bytes_per_event),
      detail:
        `${dash(memory.heap_growth_mib)} MiB (${dash(memory.heap_growth_bytes_per_change)} B per connect or disconnect), ` +
        `same sockets and subscriptions, after a full GC; ${dash(memory.heap_freed_on_unsubscribe_mib)} MiB freed when the watchers unsubscribed`,
      target: "-",
      result: "-",
    },
  ]);
  console.table(
    memory.rows.map((row) => ({
      server: row.server,
      code: row.code,
      sockets: row.sockets,
      "heap before MiB": row.heap_before_mib,
      "heap with sockets MiB": row.heap_with_sockets_mib,
      "heap KiB/socket": row.heap_kib_per_socket,
      "rss before MiB": row.rss_before_mib,
      "rss with sockets MiB": row.rss_with_sockets_mib,
      "rss KiB/socket": row.rss_kib_per_socket,
    })),
  );
  console.table(
    memory.heap_along_the_run.map((row) => ({
      "server with presence, after a full GC": row.stage,
      "heap MiB": row.heap_mib,
      "rss MiB": row.rss_mib,
    })),
  );
  if (postgres && postgres.by_text.length > 0)
    console.table(
      postgres.by_text.slice(0, 10).map((row) => ({
        "statements in the minute": row.count,
        scopes: row.scopes,
        text: row.text.length > 110 ? `${row.text.slice(0, 109)}…` : row.text,
      })),
    );
  if (redis)
    console.log(
      `Redis commands of the server in the minute: ${Object.entries(redis.by_command)
        .slice(0, 12)
        .map(([command, count]) => `${command} ${count}`)
        .join(", ")}`,
    );
  if (events.missed_samples.length > 0)
    console.log(`missed events (first ${events.missed_samples.length}): ${events.missed_samples.join("; ")}`);
  if (events.unexpected_samples.length > 0)
    console.log(
      `unexpected events (first ${events.unexpected_samples.length}): ${events.unexpected_samples.join("; ")}`,
    );
  for (const note of presence.notes) console.log(`presence: ${note}`);
  result.presence = presence;
}
result.total_seconds = Math.round((performance.now() - started) / 1000);
console.log(JSON.stringify(result));
