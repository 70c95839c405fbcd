// Push: one channel of BENCH_PUSH_MEMBERS members (1000) besides the poster, each member with one
// Expo device, the server sending to a fake Expo (test/helpers/push.ts) in this process. The same
// open-loop posting load (BENCH_PUSH_RATE messages/s for BENCH_SECONDS) runs twice: first while
// nobody has a device ("without push": the push job still runs, finds no device and sends
// nothing), then after every member registered one and set their channel push level to `all`
// (at the default, `mentions`, a plain channel message pushes nobody: docs/push.md) ("with
// push"). Each run records every POST's
// latency and, per message, the time from the POST's start until the fake had all of its pushes.
// Then, at rest, single messages: post one, time until all its pushes arrived, five times.
// BENCH_PUSH_WORKER=process (with REDIS_URL) runs the queues in a worker process of their own.
//
// The targets: post p99 not raised by more than 10%, 1000 pushes delivered in under 2 s.
import { startFakeExpo, type ExpoReceived } from "../test/helpers/push.ts";
import { setupTeam, type Team } from "./fanout.ts";
import {
  api,
  mapLimit,
  percentile,
  postAtRate,
  postJson,
  round,
  sleep,
  startBenchServer,
  startUsageWindow,
  waitForQuietMachine,
  type BenchServer,
  envNumber,
} from "./lib.ts";

const MEMBERS = Math.min(10_000, Math.floor(envNumber("BENCH_PUSH_MEMBERS", 1000)));
const RATE = Math.min(1000, envNumber("BENCH_PUSH_RATE", 20));
const SEND_SECONDS = Math.min(600, envNumber("BENCH_SECONDS", 10));
/** After a run's last post, how long to wait at most for its pushes. */
const DRAIN_SECONDS = Math.min(600, envNumber("BENCH_DRAIN_SECONDS", 20));
/** BENCH_PUSH_WORKER=process (needs REDIS_URL): `npm run worker` beside a WORKERS=off server. */
const WORKER_PROCESS = process.env.BENCH_PUSH_WORKER === "process";
const SINGLE_MESSAGES = 5;
const SINGLE_TIMEOUT_MS = 15_000;
/** Open loop: never more posts than this in flight; beyond it a due post is skipped (and counted). */
const MAX_IN_FLIGHT = 64;
const TOKEN_PATTERN = /^ExponentPushToken\[bench-(\d+)\]$/;
const tokenOf = (member: number) => `ExponentPushToken[bench-${member}]`;

// ---------------------------------------------------------------------------------------------
// Arrivals at the fake Expo, per message

/** One message's pushes as the fake received them: which members, when the first and the last came. */
type Arrival = { seen: Uint8Array; unique: number; duplicates: number; firstAt: number; completeAt: number };

class Arrivals {
  readonly byMessage = new Map<string, Arrival>();
  /** Pushes whose token or message_id was not one of ours. */
  strays = 0;
  total = 0;
  lastAt = 0;

  record(message: ExpoReceived) {
    const now = performance.now();
    this.total++;
    this.lastAt = now;
    const messageId = message.data?.message_id;
    const member = Number(TOKEN_PATTERN.exec(message.to)?.[1] ?? -1);
    if (!messageId || !(member >= 0 && member < MEMBERS)) {
      this.strays++;
      return;
    }
    let arrival = this.byMessage.get(messageId);
    if (!arrival) {
      arrival = { seen: new Uint8Array(MEMBERS), unique: 0, duplicates: 0, firstAt: now, completeAt: 0 };
      this.byMessage.set(messageId, arrival);
    }
    if (arrival.seen[member]) {
      arrival.duplicates++;
      return;
    }
    arrival.seen[member] = 1;
    arrival.unique++;
    if (arrival.unique === MEMBERS) arrival.completeAt = now;
  }
}

// ---------------------------------------------------------------------------------------------
// Posting

/** Posts (bench/lib.ts postJson), reading the new message's id from a 201. */
async function postMessage(url: URL, token: string, body: string): Promise<{ status: number; id?: string }> {
  const answer = await postJson(url, token, body, { readBody: true });
  if (answer.status !== 201) return { status: answer.status };
  try {
    return { status: answer.status, id: (JSON.parse(answer.body ?? "") as { data?: { id?: string } }).data?.id };
  } catch {
    return { status: answer.status };
  }
}

type Post = { id: string; startedAt: number; latencyMs: number };
type PostStats = { posts: Post[]; errors: Map<string, number>; skipped: number };

function poster(server: BenchServer, team: Team, stats: PostStats) {
  const url = new URL(`${server.url}/api/v1/workspaces/${team.workspaceId}/channels/${team.channelId}/messages`);
  return async (seq: number): Promise<Post | undefined> => {
    const startedAt = performance.now();
    const body = JSON.stringify({ content: `push bench ${seq}: the quick brown fox jumps over the lazy dog` });
    let outcome: string;
    let id: string | undefined;
    try {
      const answer = await postMessage(url, team.owner.token, body);
      id = answer.id;
      outcome = answer.status === 201 && id ? "ok" : `HTTP ${answer.status}`;
    } catch (error) {
      outcome = (error as Error).name === "TimeoutError" ? "timeout" : "network error";
    }
    if (outcome !== "ok" || !id) {
      stats.errors.set(outcome, (stats.errors.get(outcome) ?? 0) + 1);
      return undefined;
    }
    const post = { id, startedAt, latencyMs: performance.now() - startedAt };
    stats.posts.push(post);
    return post;
  };
}

// ---------------------------------------------------------------------------------------------
// A run

export type PushRow = {
  phase: string;
  members: number;
  devices: number;
  rate_per_s: number;
  seconds: number;
  posts: number;
  post_errors: number;
  skipped: number;
  post_p50_ms: number;
  post_p95_ms: number;
  post_p99_ms: number;
  post_max_ms: number;
  /** From a POST's start until the fake had the message's first push / all of them (messages that got all). */
  first_push_p50_ms: number | null;
  all_delivered_p50_ms: number | null;
  all_delivered_p95_ms: number | null;
  all_delivered_max_ms: number | null;
  /** Messages that did not get all their pushes within the drain window. */
  incomplete_messages: number;
  pushes_expected: number;
  pushes_delivered: number;
  delivered_pct: number | null;
  duplicates: number;
  stray_pushes: number;
  expo_requests: number;
  expo_batch_max: number;
  server_cpu_pct: number;
  stores_cpu_pct: number;
  bench_cpu_pct: number;
  other_cpu_pct: number;
  server_rss_peak_mib: number;
  errors?: Record<string, number>;
};

type Fake = Awaited<ReturnType<typeof startFakeExpo>>;

async function run(
  phase: string,
  server: BenchServer,
  team: Team,
  fake: Fake,
  setSink: (arrivals: Arrivals | undefined) => void,
  devices: number,
): Promise<PushRow> {
  const arrivals = new Arrivals();
  fake.received.length = 0;
  const requestsBefore = fake.requests;
  const batchesBefore = fake.batchSizes.length;
  setSink(arrivals);
  const stats: PostStats = { posts: [], errors: new Map(), skipped: 0 };
  const usage = startUsageWindow(server.pid);
  const seconds = await postAtRate(poster(server, team, stats), {
    rate: RATE,
    seconds: SEND_SECONDS,
    maxMessages: Math.ceil(RATE * SEND_SECONDS),
    maxInFlight: MAX_IN_FLIGHT,
    onSkip: () => stats.skipped++,
  });

  // Every accepted message's pushes, or the drain window; without devices, a moment for the jobs.
  const expectedPer = devices > 0 ? MEMBERS : 0;
  const drainEnd = performance.now() + (expectedPer > 0 ? DRAIN_SECONDS * 1000 : 1000);
  const complete = () => stats.posts.every((post) => (arrivals.byMessage.get(post.id)?.unique ?? 0) >= expectedPer);
  while (performance.now() < drainEnd && (expectedPer === 0 || !complete())) await sleep(20);
  // A little longer for duplicates or strays that would come after the last wanted push.
  await sleep(500);
  const window = usage.finish();
  setSink(undefined);

  const postLatencies = stats.posts.map((post) => post.latencyMs).sort((a, b) => a - b);
  const allDelivered: number[] = [];
  const firstPush: number[] = [];
  let delivered = 0;
  let duplicates = 0;
  let incomplete = 0;
  const ours = new Set<string>();
  for (const post of stats.posts) {
    ours.add(post.id);
    const arrival = arrivals.byMessage.get(post.id);
    if (arrival) {
      delivered += arrival.unique;
      duplicates += arrival.duplicates;
      firstPush.push(arrival.firstAt - post.startedAt);
    }
    if (expectedPer === 0) continue;
    if (arrival && arrival.completeAt > 0) allDelivered.push(arrival.completeAt - post.startedAt);
    else incomplete++;
  }
  // Pushes for messages this run did not post (there should be none).
  let strays = arrivals.strays;
  for (const [id, arrival] of arrivals.byMessage) if (!ours.has(id)) strays += arrival.unique + arrival.duplicates;
  allDelivered.sort((a, b) => a - b);
  firstPush.sort((a, b) => a - b);
  const expected = stats.posts.length * expectedPer;
  const batches = fake.batchSizes.slice(batchesBefore);
  const postErrors = [...stats.errors.values()].reduce((sum, count) => sum + count, 0);
  const orNull = (sorted: number[], p: number) => (sorted.length > 0 ? round(percentile(sorted, p), 1) : null);
  fake.received.length = 0;
  return {
    phase,
    members: MEMBERS,
    devices,
    rate_per_s: RATE,
    seconds: round(seconds, 1),
    posts: stats.posts.length,
    post_errors: postErrors,
    skipped: stats.skipped,
    post_p50_ms: round(percentile(postLatencies, 50), 1),
    post_p95_ms: round(percentile(postLatencies, 95), 1),
    post_p99_ms: round(percentile(postLatencies, 99), 1),
    post_max_ms: round(postLatencies.at(-1) ?? 0, 1),
    first_push_p50_ms: orNull(firstPush, 50),
    all_delivered_p50_ms: orNull(allDelivered, 50),
    all_delivered_p95_ms: orNull(allDelivered, 95),
    all_delivered_max_ms: allDelivered.length > 0 ? round(allDelivered.at(-1)!, 1) : null,
    incomplete_messages: incomplete,
    pushes_expected: expected,
    pushes_delivered: delivered,
    delivered_pct: expected > 0 ? round((delivered / expected) * 100, 2) : null,
    duplicates,
    stray_pushes: strays,
    expo_requests: fake.requests - requestsBefore,
    expo_batch_max: batches.length > 0 ? Math.max(...batches) : 0,
    server_cpu_pct: Math.round(window.serverCpuPct),
    stores_cpu_pct: Math.round(window.storesCpuPct),
    bench_cpu_pct: Math.round(window.benchCpuPct),
    other_cpu_pct: Math.round(window.otherCpuPct),
    server_rss_peak_mib: Math.round(window.rssPeak),
    ...(stats.errors.size > 0 ? { errors: Object.fromEntries(stats.errors) } : {}),
  };
}

export type SingleMessage = {
  post_ms: number;
  first_push_ms: number | null;
  all_pushes_ms: number | null;
  delivered: number;
  expo_requests: number;
};

/** At rest: one message, timed until all its pushes reached the fake. */
async function singleMessage(
  server: BenchServer,
  team: Team,
  fake: Fake,
  setSink: (arrivals: Arrivals | undefined) => void,
  seq: number,
): Promise<SingleMessage> {
  const arrivals = new Arrivals();
  setSink(arrivals);
  const requestsBefore = fake.requests;
  const stats: PostStats = { posts: [], errors: new Map(), skipped: 0 };
  const post = await poster(server, team, stats)(seq);
  if (!post) throw new Error(`push: the single message was refused (${[...stats.errors.keys()].join(", ")})`);
  const deadline = performance.now() + SINGLE_TIMEOUT_MS;
  while (performance.now() < deadline && !(arrivals.byMessage.get(post.id)?.completeAt ?? 0)) await sleep(5);
  await sleep(200);
  setSink(undefined);
  fake.received.length = 0;
  const arrival = arrivals.byMessage.get(post.id);
  return {
    post_ms: round(post.latencyMs, 1),
    first_push_ms: arrival ? round(arrival.firstAt - post.startedAt, 1) : null,
    all_pushes_ms: arrival && arrival.completeAt > 0 ? round(arrival.completeAt - post.startedAt, 1) : null,
    delivered: arrival?.unique ?? 0,
    expo_requests: fake.requests - requestsBefore,
  };
}

/** Until the fake has had nothing for `quietMs` (at most `maxMs`). */
async function waitForFakeQuiet(lastAt: () => number, quietMs: number, maxMs: number) {
  const deadline = performance.now() + maxMs;
  while (performance.now() < deadline && performance.now() - lastAt() < quietMs) await sleep(100);
}

export type PushResult = {
  members: number;
  rate_per_s: number;
  setup_seconds: { accounts: number; devices: number };
  rows: PushRow[];
  /** How much "with push" raised post p99 over "without push" (target: at most 10%). */
  post_p99_increase_pct: number | null;
  single: { runs: SingleMessage[]; all_pushes_median_ms: number | null; all_pushes_max_ms: number | null };
  /** The targets; "under 2 s" both for a single message at rest and for every message under the load. */
  targets: { post_p99_within_10pct: boolean; single_all_pushes_under_2s: boolean; load_all_pushes_under_2s: boolean };
};

export async function runPush(log: (line: string) => void): Promise<PushResult> {
  let sink: Arrivals | undefined;
  let lastArrivalAt = 0;
  const fake = await startFakeExpo({
    onReceive: (message) => {
      lastArrivalAt = performance.now();
      sink?.record(message);
    },
  });
  const setSink = (arrivals: Arrivals | undefined) => {
    sink = arrivals;
  };
  let server: BenchServer | undefined;
  try {
    server = await startBenchServer("push", { env: { PUSH_EXPO_URL: fake.url }, workerProcess: WORKER_PROCESS });
    if (WORKER_PROCESS) log("push: the queues run in a worker process of their own (WORKERS=off on the server)");
    log(`push: registering ${MEMBERS} members and a poster (Argon2id, 4 at a time)`);
    let t0 = performance.now();
    const team = await setupTeam(server.url, MEMBERS, 0);
    const accountSeconds = (performance.now() - t0) / 1000;
    log(`push: ${MEMBERS} members in ${round(accountSeconds, 1)} s`);

    // Warm-up: the posting path (and the push job with nobody to push to) before measuring.
    const warm: PostStats = { posts: [], errors: new Map(), skipped: 0 };
    const warmPost = poster(server, team, warm);
    for (let seq = 0; seq < 20; seq++) await warmPost(seq);
    await sleep(1000);

    const quietWait = Number(process.env.BENCH_QUIET_WAIT ?? 0) || 0;
    const maybeWaitForQuiet = async () => {
      if (quietWait <= 0) return;
      const busy = await waitForQuietMachine(quietWait);
      if (busy >= 15) log(`push: the machine is still ${Math.round(busy)}% busy with other work; measuring anyway`);
    };

    const rows: PushRow[] = [];
    await maybeWaitForQuiet();
    log(`push: without push (no devices), ${RATE}/s for ${SEND_SECONDS} s`);
    rows.push(await run("without push", server, team, fake, setSink, 0));

    log(`push: registering ${MEMBERS} Expo devices`);
    t0 = performance.now();
    await mapLimit(team.receivers, 16, async (member, index) => {
      await api(server!.url, "POST", "/api/v1/devices", member.token, {
        platform: index % 2 === 0 ? "ios" : "android",
        provider: "expo",
        push_token: tokenOf(index),
      });
      // At the default level (`mentions`) a plain channel message pushes nobody (docs/push.md).
      await api(server!.url, "PUT", "/api/v1/me/notification-preferences", member.token, { channel_push: "all" });
    });
    const deviceSeconds = (performance.now() - t0) / 1000;
    await sleep(1000);

    await maybeWaitForQuiet();
    log(`push: with push (${MEMBERS} devices), ${RATE}/s for ${SEND_SECONDS} s`);
    rows.push(await run("with push", server, team, fake, setSink, MEMBERS));

    log(`push: ${SINGLE_MESSAGES} single messages at rest`);
    const single: SingleMessage[] = [];
    for (let i = 0; i < SINGLE_MESSAGES; i++) {
      await waitForFakeQuiet(() => lastArrivalAt, 1000, 30_000);
      await waitForQuietMachine(5);
      single.push(await singleMessage(server, team, fake, setSink, 100_000 + i));
    }

    const [without, withPush] = rows as [PushRow, PushRow];
    const increase =
      without.post_p99_ms > 0
        ? round(((withPush.post_p99_ms - without.post_p99_ms) / without.post_p99_ms) * 100, 1)
        : null;
    const allSingle = single.map((s) => s.all_pushes_ms ?? Number.POSITIVE_INFINITY).sort((a, b) => a - b);
    const finite = (value: number | undefined) => (value === undefined || !Number.isFinite(value) ? null : value);
    const median = finite(allSingle[Math.floor(allSingle.length / 2)]);
    const max = finite(allSingle.at(-1));
    return {
      members: MEMBERS,
      rate_per_s: RATE,
      setup_seconds: { accounts: round(accountSeconds, 1), devices: round(deviceSeconds, 1) },
      rows,
      post_p99_increase_pct: increase,
      single: { runs: single, all_pushes_median_ms: median, all_pushes_max_ms: max },
      targets: {
        post_p99_within_10pct: increase !== null && increase <= 10,
        single_all_pushes_under_2s: max !== null && max < 2000,
        load_all_pushes_under_2s:
          withPush.incomplete_messages === 0 &&
          withPush.all_delivered_max_ms !== null &&
          withPush.all_delivered_max_ms < 2000,
      },
    };
  } finally {
    await server?.stop();
    await fake.stop();
  }
}
