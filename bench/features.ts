// `npm run bench -- features` (only when named): what push, translation and an outbound webhook,
// all on, cost per message on the live path. Needs DATABASE_URL and REDIS_URL.
//
// The question: "With push (devices registered), translation (a fake provider) and an outbound
// webhook all on, server + PostgreSQL + Redis CPU per message at a fixed load stays within 15 % of
// the plain path."
//
// Two configurations, measured in the same section, ALTERNATING plain / features / plain / ...
// for BENCH_RUNS pairs. Each measurement starts a server of its own (startBenchServer: one
// process, workers in it, its own Redis prefix) on a FRESH PostgreSQL database (created next to
// the one of DATABASE_URL, dropped afterwards; if it cannot be created, the database of
// DATABASE_URL itself), so no run reads tables the runs before it filled. Both configurations get
// the same server settings (PUSH_EXPO_URL at a fake Expo, OUTBOUND_ALLOW_PRIVATE=true) and the
// same team, the fan-out setup of bench/fanout.ts: an owner, BENCH_FEATURES_ACCOUNTS receiver
// accounts (20) whose preferred languages are en, ja and zh-CN in turn, 4 sender accounts (en),
// all in #general, and BENCH_FEATURES_RECEIVERS live receivers (100: WebSocket subscriptions to
// messages.onChannel, sharing the receiver accounts; one of them the typed client).
//   plain     TRANSLATION_PROVIDER=none, no device registered, no outbound webhook
//   features  TRANSLATION_PROVIDER=libretranslate at a fake LibreTranslate in this process
//             (test/helpers/translation.ts, answering after BENCH_TRANSLATION_DELAY_MS, 50), so
//             each message owes translations into ja and zh-CN; every receiver account with one
//             Expo device (POST /api/v1/devices; the fake Expo of test/helpers/push.ts in this
//             process) and its channel push level at `all` (the default, `mentions`, pushes
//             nobody for a plain message), so each message owes a push per receiver account; one active outbound
//             webhook on the workspace for message.created (to a receiver in this process,
//             answering 200: bench/outbound.ts)
// Load: the senders post to #general over REST, an open loop (bench/lib.ts postAtRate, at most
// 64 in flight) at BENCH_FEATURES_RATE messages/s (200) for BENCH_SECONDS (10), after an
// unrecorded warm-up of BENCH_FEATURES_WARMUP seconds (2) at the same rate. Measured from the
// first post until every accepted message reached every receiver and, with features, every push,
// translation text and webhook delivery it owes arrived at the fakes (at most BENCH_DRAIN_SECONDS,
// 20, after the window), plus 0.5 s for stragglers: the CPU time (user + system, from /proc) of
// the server process, of the PostgreSQL backends connected to the run's database
// (startDatabaseCpuWindow) and of every redis-server process, each per accepted message (µs)
// and their sum. The table reports the median of each configuration and the ratio features /
// plain of the medians (target: at most 1.15), with delivered %, delivery p99 and the counts of
// pushes, translated texts and webhook deliveries received (against what was owed), so a reader
// sees the load was carried and the features happened. Every run is in the JSON line, with, per
// kind, how long after the window everything owed of it had arrived (`all_in_after_s`).
//
//   BENCH_FEATURES_RATE       messages/s (200). The issue asks for 60 % of the raw-ws baseline's
//                             highest passing rate at 100 receivers, which
//                             `npm run bench -- fanout-baseline` prints ("baseline msg/s"): set
//                             this to it. The default is only a placeholder.
//   BENCH_FEATURES_RECEIVERS  live WebSocket receivers (100)
//   BENCH_FEATURES_ACCOUNTS   receiver accounts they share, each with a device when on (20)
//   BENCH_FEATURES_WARMUP     unrecorded warm-up at the rate on each fresh server, seconds (2)
//   BENCH_SECONDS             sending window of each run (10)
//   BENCH_DRAIN_SECONDS       longest wait after the window for deliveries and features (20)
//   BENCH_RUNS                plain / features pairs (3)
//   BENCH_TRANSLATION_DELAY_MS  the fake provider's answer delay (50)
//   BENCH_FEATURES_ONLY       the features turned on in the "features" configuration, a comma list of
//                             push, translation, webhook (all three): one alone shows its own share
//   BENCH_QUIET_WAIT          before each run, wait up to this many seconds for the machine to go idle (0)
//   BENCH_FEATURES_BEFORE     a checkout of an earlier commit (with node_modules): measure its plain
//                             path ("before") against this checkout's ("after") instead, target
//                             after / before ≤ 1.05 (a feature's cost on the plain path)
//
// Reading the numbers: Redis CPU is the whole redis-server's, PostgreSQL's only that of the
// backends of the run's database; other work using the same Redis shows in it (and in `other cpu
// %`). The fakes and the receivers run in this process, on the same cores: with features on the
// load generator does more (pushes, translation requests, signed webhook deliveries), which the
// server's CPU does not include but which competes with it for the cores.
import { readdirSync, readFileSync } from "node:fs";
import type { Language } from "../db/schema/index.ts";
import { startFakeExpo, type ExpoReceived } from "../test/helpers/push.ts";
import { startFakeLibreTranslate, type FakeTranslator } from "../test/helpers/translation.ts";
import {
  Collector,
  MARKER,
  openReceivers,
  PADDING,
  recordPost,
  serviceSide,
  setupTeam,
  type FanoutSide,
  type SendStats,
  type Receiver,
  type Team,
} from "./fanout.ts";
import {
  api,
  envNumber,
  freshDatabase,
  mapLimit,
  percentile,
  postAtRate,
  postJson,
  processCpuSeconds,
  round,
  sleep,
  startBenchServer,
  startDatabaseCpuWindow,
  startUsageWindow,
  waitForQuietMachine,
  type BenchServer,
} from "./lib.ts";
import { startReceiver } from "./outbound.ts";

const RATE = Math.min(20_000, envNumber("BENCH_FEATURES_RATE", 200));
const RECEIVERS = Math.min(10_000, Math.floor(envNumber("BENCH_FEATURES_RECEIVERS", 100)));
const ACCOUNTS = Math.min(RECEIVERS, Math.floor(envNumber("BENCH_FEATURES_ACCOUNTS", 20)));
const SENDERS = 4;
const WARMUP_SECONDS = Math.min(60, envNumber("BENCH_FEATURES_WARMUP", 2));
const SEND_SECONDS = Math.min(600, envNumber("BENCH_SECONDS", 10));
const DRAIN_SECONDS = Math.min(600, envNumber("BENCH_DRAIN_SECONDS", 20));
const RUNS = Math.max(1, Math.round(envNumber("BENCH_RUNS", 3)));
const DELAY_MS = Math.min(10_000, envNumber("BENCH_TRANSLATION_DELAY_MS", 50));
const FEATURE_NAMES = ["push", "translation", "webhook"] as const;
/** The features the "features" configuration turns on (BENCH_FEATURES_ONLY, all by default). */
const ON: ReadonlySet<(typeof FEATURE_NAMES)[number]> = new Set(
  process.env.BENCH_FEATURES_ONLY
    ? FEATURE_NAMES.filter((name) => process.env.BENCH_FEATURES_ONLY!.split(",").includes(name))
    : FEATURE_NAMES,
);
const QUIET_WAIT_SECONDS = Number(process.env.BENCH_QUIET_WAIT ?? 0) || 0;
/** After everything owed arrived: stragglers (duplicates, the last events) inside the window. */
const SETTLE_MS = 500;
/** Open loop: never more posts than this in flight; beyond it a due post is skipped (and counted). */
const MAX_IN_FLIGHT = 64;
/** The target: features / plain of the summed CPU per message at most this. */
/**
 * BENCH_FEATURES_BEFORE=<a checkout of an earlier commit, with its node_modules>: instead of plain
 * against features, the plain path of that checkout ("before") against the plain path of this one
 * ("after"), alternating the same way, for "CPU per message stays within 5 % of the commit before
 * this feature" (target: after / before at most 1.05).
 */
const BEFORE_ROOT = process.env.BENCH_FEATURES_BEFORE || undefined;
const TARGET_RATIO = BEFORE_ROOT ? 1.05 : 1.15;

const POSTER_LANGUAGE: Language = "en";
const READER_LANGUAGES: Language[] = ["en", "ja", "zh-CN"];
const readerLanguage = (index: number) => READER_LANGUAGES[index % READER_LANGUAGES.length]!;
/** The languages each message is translated into: those of the receiver accounts but the senders'. */
const TRANSLATED = [...new Set(Array.from({ length: ACCOUNTS }, (_, i) => readerLanguage(i)))].filter(
  (language) => language !== POSTER_LANGUAGE,
);

type Config = "plain" | "features" | "before" | "after";
/** The two configurations measured, the baseline first. */
const PAIR: readonly [Config, Config] = BEFORE_ROOT ? ["before", "after"] : ["plain", "features"];

// ---------------------------------------------------------------------------------------------
// What the fakes received, per measured window

/** Counts, for one window, what reached the fakes for messages carrying `tag`. */
class Tally {
  pushes = 0;
  pushDuplicates = 0;
  /** Pushes of messages not of this window (there should be none). */
  strayPushes = 0;
  private readonly pushKeys = new Set<string>();
  translationRequests = 0;
  translationTexts = 0;

  constructor(readonly tag: string) {}

  push(message: ExpoReceived) {
    if (!message.body?.includes(`${MARKER}${this.tag}:`)) {
      this.strayPushes++;
      return;
    }
    const key = `${message.data?.message_id ?? ""}|${message.to}`;
    if (this.pushKeys.has(key)) this.pushDuplicates++;
    else {
      this.pushKeys.add(key);
      this.pushes++;
    }
  }

  /** Takes (and forgets) the fake provider's request log so far. */
  readTranslator(fake: FakeTranslator) {
    for (const request of fake.requests) {
      const ours = request.texts.filter((text) => text.includes(`${MARKER}${this.tag}:`)).length;
      if (ours === 0) continue;
      this.translationRequests++;
      this.translationTexts += ours;
    }
    fake.requests.length = 0;
  }
}

// ---------------------------------------------------------------------------------------------
// CPU of Redis and a database per run

/** The pids of every process named redis-server (its threads are in its /proc/<pid>/stat). */
function redisPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === "redis-server") pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

/** CPU seconds of the redis-server processes over a window; null when none was found. */
function startRedisCpuWindow(): { finish(): number | null } {
  const before = new Map<number, number>();
  for (const pid of redisPids()) {
    try {
      before.set(pid, processCpuSeconds(pid));
    } catch {
      // ended
    }
  }
  return {
    finish() {
      if (before.size === 0) return null;
      let total = 0;
      for (const [pid, seconds] of before) {
        try {
          total += processCpuSeconds(pid) - seconds;
        } catch {
          // ended: its CPU is lost
        }
      }
      return total;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// One window: posts at the rate, then the drain

function poster(side: FanoutSide, collector: Collector, stats: SendStats) {
  return async (seq: number) => {
    stats.attempted++;
    const sentAt = performance.now();
    const content = `${MARKER}${collector.runTag}:${seq}:${sentAt.toFixed(3)}:${PADDING}`;
    await recordPost(stats, collector, seq, sentAt, async () => {
      const { status } = await postJson(side.route, side.token(seq), JSON.stringify({ content }));
      return status === 201 ? "ok" : `HTTP ${status}`;
    });
  };
}

export type FeaturesRun = {
  config: Config;
  run: number;
  fresh_database: boolean;
  rate_per_s: number;
  receivers: number;
  seconds: number;
  /** From the window's end until everything owed arrived (or the drain limit). */
  drain_seconds: number;
  /** Everything owed (deliveries, pushes, translations, webhook deliveries) arrived within the drain. */
  complete: boolean;
  /** Per kind, seconds after the window's end at which all of it had arrived (null: not within the drain). */
  all_in_after_s: Record<"deliveries" | "pushes" | "translations" | "webhooks", number | null>;
  posted: number;
  accepted: number;
  skipped: number;
  post_errors: number;
  accepted_per_s: number;
  delivered_pct: number;
  duplicates: number;
  p50_ms: number;
  p99_ms: number;
  post_p99_ms: number;
  server_cpu_us_per_message: number | null;
  pg_cpu_us_per_message: number | null;
  redis_cpu_us_per_message: number | null;
  total_cpu_us_per_message: number | null;
  server_cpu_pct: number;
  bench_cpu_pct: number;
  other_cpu_pct: number;
  pushes_expected: number;
  pushes_received: number;
  push_duplicates: number;
  stray_pushes: number;
  translations_expected: number;
  translation_texts_received: number;
  translation_requests: number;
  webhooks_expected: number;
  webhook_deliveries_received: number;
  webhook_duplicates: number;
  webhook_bad_signatures: number;
  errors?: Record<string, number>;
};

type Fakes = {
  expo: Awaited<ReturnType<typeof startFakeExpo>>;
  translator: FakeTranslator;
  hooks: Awaited<ReturnType<typeof startReceiver>>;
  setTally(tally: Tally | undefined): void;
};

let windowCounter = 0;

async function measureWindow(
  config: Config,
  side: FanoutSide,
  databaseUrl: string,
  fakes: Fakes,
  seconds: number,
): Promise<Omit<FeaturesRun, "config" | "run" | "fresh_database">> {
  const features = config === "features";
  const { receivers } = side;
  const maxMessages = Math.ceil(RATE * seconds) + 1;
  const collector = new Collector(`f${windowCounter++}x${Date.now().toString(36)}`, receivers.length, maxMessages);
  receivers.forEach((receiver, index) => {
    receiver.sink.collector = collector;
    receiver.sink.index = index;
  });
  const tally = new Tally(collector.runTag);
  fakes.translator.requests.length = 0;
  fakes.setTally(tally);
  const hooksBefore = {
    received: fakes.hooks.received(),
    unique: fakes.hooks.unique(),
    bad: fakes.hooks.badSignatures(),
  };
  // The fakes' own logs would grow for the whole section: read and forget them as they come.
  const reader = setInterval(() => {
    tally.readTranslator(fakes.translator);
    fakes.expo.received.length = 0;
  }, 250);
  const stats: SendStats = { attempted: 0, accepted: 0, errors: new Map(), skipped: 0, postLatencies: [] };

  const databaseCpu = await startDatabaseCpuWindow(databaseUrl);
  const redisCpu = startRedisCpuWindow();
  const usage = startUsageWindow(side.server.pid);
  const sendSeconds = await postAtRate(poster(side, collector, stats), {
    rate: RATE,
    seconds,
    maxMessages,
    maxInFlight: MAX_IN_FLIGHT,
    onSkip: () => stats.skipped++,
  });
  const windowEnd = performance.now();

  const expected = {
    deliveries: stats.accepted * receivers.length,
    pushes: features && ON.has("push") ? stats.accepted * ACCOUNTS : 0,
    translations: features && ON.has("translation") ? stats.accepted * TRANSLATED.length : 0,
    webhooks: features && ON.has("webhook") ? stats.accepted : 0,
  };
  // Seconds after the window's end at which each kind had all it was owed (null: not within the drain).
  const inAt: Record<"deliveries" | "pushes" | "translations" | "webhooks", number | null> = {
    deliveries: null,
    pushes: null,
    translations: null,
    webhooks: null,
  };
  const complete = () => {
    tally.readTranslator(fakes.translator);
    const now = round((performance.now() - windowEnd) / 1000, 2);
    const done = {
      deliveries: collector.deliveries >= expected.deliveries,
      pushes: tally.pushes >= expected.pushes,
      translations: tally.translationTexts >= expected.translations,
      webhooks: fakes.hooks.unique() - hooksBefore.unique >= expected.webhooks,
    };
    for (const kind of Object.keys(done) as (keyof typeof done)[]) if (done[kind]) inAt[kind] ??= now;
    return done.deliveries && done.pushes && done.translations && done.webhooks;
  };
  const drainEnd = windowEnd + DRAIN_SECONDS * 1000;
  while (!complete() && performance.now() < drainEnd) await sleep(20);
  const allArrived = complete();
  const drainSeconds = (performance.now() - windowEnd) / 1000;
  await sleep(SETTLE_MS);
  const usageWindow = usage.finish();
  const redisSeconds = redisCpu.finish();
  const databaseSeconds = await databaseCpu.finish();

  clearInterval(reader);
  tally.readTranslator(fakes.translator);
  fakes.setTally(undefined);
  fakes.expo.received.length = 0;
  for (const receiver of receivers) receiver.sink.collector = undefined;

  const latencies = collector.latencies.slice(0, collector.deliveries).sort();
  const postLatencies = stats.postLatencies.sort((a, b) => a - b);
  const perMessage = (cpuSeconds: number | null) =>
    cpuSeconds !== null && stats.accepted > 0 ? round((cpuSeconds / stats.accepted) * 1e6, 1) : null;
  const errors: Record<string, number> = Object.fromEntries(stats.errors);
  for (const text of collector.errors) errors[`receiver: ${text}`] = (errors[`receiver: ${text}`] ?? 0) + 1;
  if (collector.outOfRange > 0) errors["receiver: unknown message"] = collector.outOfRange;
  const hooksReceived = fakes.hooks.received() - hooksBefore.received;
  const hooksUnique = fakes.hooks.unique() - hooksBefore.unique;
  return {
    rate_per_s: RATE,
    receivers: receivers.length,
    seconds: round(sendSeconds, 1),
    drain_seconds: round(drainSeconds, 2),
    complete: allArrived,
    all_in_after_s: inAt,
    posted: stats.attempted,
    accepted: stats.accepted,
    skipped: stats.skipped,
    post_errors: [...stats.errors.values()].reduce((sum, count) => sum + count, 0),
    accepted_per_s: round(stats.accepted / sendSeconds, 1),
    delivered_pct:
      expected.deliveries === 0 ? 0 : round((collector.deliveredOfAccepted() / expected.deliveries) * 100, 2),
    duplicates: collector.duplicates,
    p50_ms: round(percentile(latencies, 50), 1),
    p99_ms: round(percentile(latencies, 99), 1),
    post_p99_ms: round(percentile(postLatencies, 99), 1),
    server_cpu_us_per_message: perMessage(usageWindow.serverCpuSeconds),
    pg_cpu_us_per_message: perMessage(databaseSeconds),
    redis_cpu_us_per_message: perMessage(redisSeconds),
    total_cpu_us_per_message: perMessage(usageWindow.serverCpuSeconds + databaseSeconds + (redisSeconds ?? 0)),
    server_cpu_pct: Math.round(usageWindow.serverCpuPct),
    bench_cpu_pct: Math.round(usageWindow.benchCpuPct),
    other_cpu_pct: Math.round(usageWindow.otherCpuPct),
    pushes_expected: expected.pushes,
    pushes_received: tally.pushes,
    push_duplicates: tally.pushDuplicates,
    stray_pushes: tally.strayPushes,
    translations_expected: expected.translations,
    translation_texts_received: tally.translationTexts,
    translation_requests: tally.translationRequests,
    webhooks_expected: expected.webhooks,
    webhook_deliveries_received: hooksUnique,
    webhook_duplicates: hooksReceived - hooksUnique,
    webhook_bad_signatures: fakes.hooks.badSignatures() - hooksBefore.bad,
    ...(Object.keys(errors).length > 0 ? { errors } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// One run: a fresh database and server, the team, the configuration's features, warm-up, window

async function measure(
  config: Config,
  run: number,
  fakes: Fakes,
  setWebhookSecret: (secret: string) => void,
  log: (line: string) => void,
): Promise<FeaturesRun> {
  const features = config === "features";
  const database = await freshDatabase(process.env.DATABASE_URL!, "features", log);
  let server: BenchServer | undefined;
  let receivers: Receiver[] = [];
  try {
    server = await startBenchServer(`features-${config}`, {
      ...(config === "before" && { root: BEFORE_ROOT }),
      env: {
        DATABASE_URL: database.url,
        PUSH_EXPO_URL: fakes.expo.url,
        OUTBOUND_ALLOW_PRIVATE: "true",
        ...(features && ON.has("translation")
          ? { TRANSLATION_PROVIDER: "libretranslate", TRANSLATION_URL: fakes.translator.url }
          : { TRANSLATION_PROVIDER: "none" }),
      },
    });
    const url = server.url;
    const team: Team = await setupTeam(url, ACCOUNTS, SENDERS, {
      owner: POSTER_LANGUAGE,
      receiver: readerLanguage,
    });
    if (features && ON.has("push")) {
      await mapLimit(team.receivers, 8, async (account, index) => {
        await api(url, "POST", "/api/v1/devices", account.token, {
          platform: index % 2 === 0 ? "ios" : "android",
          provider: "expo",
          push_token: `ExponentPushToken[features-${index}]`,
        });
        // At the default level (`mentions`) a plain channel message pushes nobody (docs/push.md).
        await api(url, "PUT", "/api/v1/me/notification-preferences", account.token, { channel_push: "all" });
      });
    }
    if (features && ON.has("webhook")) {
      const hook = await api<{ data: { id: string; secret: string } }>(
        url,
        "POST",
        `/api/v1/workspaces/${team.workspaceId}/outbound-webhooks`,
        team.owner.token,
        { url: fakes.hooks.url, events: ["message.created"] },
      );
      setWebhookSecret(hook.data.secret);
    }
    receivers = await openReceivers(server, team, RECEIVERS);
    const side = serviceSide(server, team, receivers);
    await sleep(500);

    // Unrecorded warm-up on this fresh server (JIT, pools, prepared statements, the features' jobs).
    const warm = await measureWindow(config, side, database.url, fakes, WARMUP_SECONDS);
    if (!warm.complete) log(`features: ${config} run ${run}: the warm-up did not drain within ${DRAIN_SECONDS} s`);
    await sleep(1000);
    if (QUIET_WAIT_SECONDS > 0) {
      const busy = await waitForQuietMachine(QUIET_WAIT_SECONDS);
      if (busy >= 15) log(`features: the machine is still ${Math.round(busy)}% busy with other work; measuring anyway`);
    }
    log(`features: ${config} run ${run}: ${RECEIVERS} receivers, ${RATE}/s for ${SEND_SECONDS} s`);
    const row = await measureWindow(config, side, database.url, fakes, SEND_SECONDS);
    return { config, run, fresh_database: database.fresh, ...row };
  } finally {
    for (const receiver of receivers) receiver.close();
    await sleep(200);
    await server?.stop();
    await database.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// The section

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export type FeaturesSummary = {
  config: Config;
  runs: number;
  accepted_per_s: number | null;
  delivered_pct: number | null;
  p99_ms: number | null;
  server_cpu_us_per_message: number | null;
  pg_cpu_us_per_message: number | null;
  redis_cpu_us_per_message: number | null;
  total_cpu_us_per_message: number | null;
  other_cpu_pct: number | null;
  /** Summed over the runs. */
  pushes: string;
  translations: string;
  webhooks: string;
};

export type FeaturesResult = {
  settings: {
    rate_per_s: number;
    receivers: number;
    receiver_accounts: number;
    translated_languages: Language[];
    seconds: number;
    warmup_seconds: number;
    drain_seconds: number;
    runs: number;
    translation_delay_ms: number;
  };
  summary: FeaturesSummary[];
  /** features / plain of the medians, per part and summed. */
  ratio: { server: number | null; pg: number | null; redis: number | null; total: number | null };
  /** features / plain of the summed CPU per message, per pair (run). */
  pair_ratios: (number | null)[];
  targets: { total_within_15pct: boolean | null; features_happened: boolean | null; load_carried: boolean | null };
  runs: FeaturesRun[];
};

function summarize(config: Config, runs: FeaturesRun[]): FeaturesSummary {
  const mine = runs.filter((run) => run.config === config);
  const med = (pick: (run: FeaturesRun) => number | null, digits = 1) => {
    const value = median(mine.flatMap((run) => (pick(run) === null ? [] : [pick(run)!])));
    return value === null ? null : round(value, digits);
  };
  const sum = (pick: (run: FeaturesRun) => number) => mine.reduce((total, run) => total + pick(run), 0);
  const owed = (got: (run: FeaturesRun) => number, expected: (run: FeaturesRun) => number) =>
    config !== "features" ? "-" : `${sum(got)}/${sum(expected)}`;
  return {
    config,
    runs: mine.length,
    accepted_per_s: med((run) => run.accepted_per_s),
    delivered_pct: med((run) => run.delivered_pct, 2),
    p99_ms: med((run) => run.p99_ms),
    server_cpu_us_per_message: med((run) => run.server_cpu_us_per_message),
    pg_cpu_us_per_message: med((run) => run.pg_cpu_us_per_message),
    redis_cpu_us_per_message: med((run) => run.redis_cpu_us_per_message),
    total_cpu_us_per_message: med((run) => run.total_cpu_us_per_message),
    other_cpu_pct: med((run) => run.other_cpu_pct, 0),
    pushes: owed(
      (run) => run.pushes_received,
      (run) => run.pushes_expected,
    ),
    translations: owed(
      (run) => run.translation_texts_received,
      (run) => run.translations_expected,
    ),
    webhooks: owed(
      (run) => run.webhook_deliveries_received,
      (run) => run.webhooks_expected,
    ),
  };
}

export async function runFeatures(log: (line: string) => void): Promise<FeaturesResult> {
  const settings = {
    rate_per_s: RATE,
    receivers: RECEIVERS,
    receiver_accounts: ACCOUNTS,
    translated_languages: TRANSLATED,
    seconds: SEND_SECONDS,
    warmup_seconds: WARMUP_SECONDS,
    drain_seconds: DRAIN_SECONDS,
    runs: RUNS,
    translation_delay_ms: DELAY_MS,
    features_on: [...ON],
  };
  const empty: FeaturesResult = {
    settings,
    summary: [],
    ratio: { server: null, pg: null, redis: null, total: null },
    pair_ratios: [],
    targets: { total_within_15pct: null, features_happened: null, load_carried: null },
    runs: [],
  };
  if (!process.env.DATABASE_URL || !process.env.REDIS_URL) {
    log("features: skipped, it needs DATABASE_URL (PostgreSQL) and REDIS_URL");
    return empty;
  }
  let tally: Tally | undefined;
  let webhookSecret = "";
  const expo = await startFakeExpo({ onReceive: (message) => tally?.push(message) });
  const translator = await startFakeLibreTranslate({ delayMs: DELAY_MS });
  const hooks = await startReceiver(() => webhookSecret);
  const fakes: Fakes = {
    expo,
    translator,
    hooks,
    setTally: (next) => {
      tally = next;
    },
  };
  const runs: FeaturesRun[] = [];
  try {
    for (let run = 1; run <= RUNS; run++) {
      for (const config of PAIR) {
        const row = await measure(config, run, fakes, (secret) => (webhookSecret = secret), log);
        log(
          `features: ${config} run ${run}: ${row.accepted_per_s} msg/s accepted, ${row.delivered_pct}% delivered, ` +
            `p99 ${row.p99_ms} ms; CPU µs/msg server ${row.server_cpu_us_per_message}, pg ${row.pg_cpu_us_per_message}, ` +
            `redis ${row.redis_cpu_us_per_message}, total ${row.total_cpu_us_per_message}` +
            (config === "features"
              ? `; pushes ${row.pushes_received}/${row.pushes_expected}, translations ` +
                `${row.translation_texts_received}/${row.translations_expected}, webhooks ` +
                `${row.webhook_deliveries_received}/${row.webhooks_expected}; all in after (s) ` +
                Object.entries(row.all_in_after_s)
                  .map(([kind, at]) => `${kind} ${at ?? "never"}`)
                  .join(", ")
              : ""),
        );
        runs.push(row);
      }
    }
  } finally {
    await hooks.stop();
    await translator.stop();
    await expo.stop();
  }
  const plain = summarize(PAIR[0], runs);
  const withFeatures = summarize(PAIR[1], runs);
  const ratioOf = (a: number | null, b: number | null) => (a !== null && b ? round(a / b, 3) : null);
  const total = ratioOf(withFeatures.total_cpu_us_per_message, plain.total_cpu_us_per_message);
  const featureRuns = runs.filter((run) => run.config === PAIR[1]);
  return {
    settings,
    summary: [plain, withFeatures],
    ratio: {
      server: ratioOf(withFeatures.server_cpu_us_per_message, plain.server_cpu_us_per_message),
      pg: ratioOf(withFeatures.pg_cpu_us_per_message, plain.pg_cpu_us_per_message),
      redis: ratioOf(withFeatures.redis_cpu_us_per_message, plain.redis_cpu_us_per_message),
      total,
    },
    pair_ratios: Array.from({ length: RUNS }, (_, i) => {
      const pair = runs.filter((run) => run.run === i + 1);
      return ratioOf(
        pair.find((run) => run.config === PAIR[1])?.total_cpu_us_per_message ?? null,
        pair.find((run) => run.config === PAIR[0])?.total_cpu_us_per_message ?? null,
      );
    }),
    targets: {
      total_within_15pct: total === null ? null : total <= TARGET_RATIO,
      features_happened: BEFORE_ROOT
        ? null
        : featureRuns.length > 0 &&
          featureRuns.every(
            (run) =>
              run.accepted > 0 &&
              run.pushes_received >= run.pushes_expected &&
              run.translation_texts_received >= run.translations_expected &&
              run.webhook_deliveries_received >= run.webhooks_expected,
          ),
      load_carried: runs.length > 0 && runs.every((run) => run.complete && run.skipped === 0 && run.post_errors === 0),
    },
    runs,
  };
}
