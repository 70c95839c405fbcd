// Webhooks: signed inbound webhook posts into a channel with live subscribers, against REST
// posts into the same channel in the same run (issue 14: the webhook rate at least 80% of the
// REST rate, and p99 from the webhook POST to live receipt).
//
// One server (WEBHOOK_QUOTA_PER_HOUR raised out of the way), a workspace whose owner posts and
// BENCH_WEBHOOK_SUBSCRIBERS members (100), each subscribed live to #general over a WebSocket of
// its own (fan-out's receivers: one typed client, the rest bare sockets speaking the tRPC
// protocol). The owner creates a webhook with signature_required whose default channel is
// #general. Two phases load it with the same closed loop (BENCH_WEBHOOK_CONCURRENCY posts in
// flight, 8, for BENCH_SECONDS, 10, each): "REST" (POST /api/v1/.../channels/{id}/messages with
// the owner's bearer token) and "webhook" (POST /webhooks/{id}/messages, each body signed afresh
// with the current unix time in X-Service-Signature). After an unmeasured warm-up of both paths,
// the phases alternate in BENCH_WEBHOOK_SLICES slices each (4; REST, webhook, webhook, REST, ...),
// each slice drained before the next, so that other work on a shared machine weighs on both
// alike. Measured per phase: accepted posts per second, POST latency, and from each POST's start
// until live receipt: per delivery, and per message until the last subscriber got it.
import {
  Collector,
  MARKER,
  openReceivers,
  PADDING,
  recordPost,
  setupTeam,
  type Receiver,
  type Team,
} from "./fanout.ts";
import { signWebhookBody } from "../server/services/webhooks/signature.ts";
import {
  api,
  percentile,
  postJson,
  round,
  sleep,
  startBenchServer,
  startUsageWindow,
  waitForQuietMachine,
  type BenchServer,
  envNumber,
} from "./lib.ts";

const SUBSCRIBERS = Math.min(5000, Math.floor(envNumber("BENCH_WEBHOOK_SUBSCRIBERS", 100)));
const CONCURRENCY = Math.min(256, Math.floor(envNumber("BENCH_WEBHOOK_CONCURRENCY", 8)));
const SEND_SECONDS = Math.min(600, envNumber("BENCH_SECONDS", 10));
/** After a phase's last post, how long to wait at most for its deliveries. */
const DRAIN_SECONDS = Math.min(600, envNumber("BENCH_DRAIN_SECONDS", 10));
/** Each phase's BENCH_SECONDS is cut into this many slices, alternating with the other phase's. */
const SLICES = Math.min(20, Math.floor(envNumber("BENCH_WEBHOOK_SLICES", 4)));
const WARM_UP_SECONDS = Math.min(60, envNumber("BENCH_WEBHOOK_WARM_UP_SECONDS", 2));
/** Before each phase, wait up to this long for other work on the machine to stop (0: don't). */
const QUIET_WAIT_SECONDS = Number(process.env.BENCH_QUIET_WAIT ?? 0) || 0;
/** Accounts registered for the subscribers (Argon2id each); more subscribers share them. */
const SUBSCRIBER_ACCOUNTS = Math.min(SUBSCRIBERS, 100);
/** Posts per phase at most: the collector keeps a byte per subscriber and message. */
const MAX_MESSAGES = Math.max(1000, Math.min(100_000, Math.floor(40_000_000 / SUBSCRIBERS)));
/** The target: webhook posts/s at least this share of REST posts/s. */
const TARGET_RATIO_PCT = 80;

type Webhook = { id: string; signingSecret: string; url: URL };

/** A fan-out collector that also keeps, per message, how many subscribers got it and the latest receipt. */
class ReceiptCollector extends Collector {
  readonly receivedBy: Uint32Array;
  readonly lastLatency: Float64Array;

  constructor(runTag: string, receivers: number, maxMessages: number) {
    super(runTag, receivers, maxMessages);
    this.receivedBy = new Uint32Array(maxMessages);
    this.lastLatency = new Float64Array(maxMessages);
  }

  override record(receiver: number, tag: string, seq: number, sentAt: number) {
    const before = this.deliveries;
    super.record(receiver, tag, seq, sentAt);
    if (this.deliveries === before) return; // another run's, a duplicate or out of range
    const latency = this.latencies[before]!;
    this.receivedBy[seq]!++;
    if (latency > this.lastLatency[seq]!) this.lastLatency[seq] = latency;
  }
}

type Phase = "REST" | "webhook";
type PostStats = { attempted: number; accepted: number; errors: Map<string, number>; postLatencies: number[] };

/** The answer's `message`, for an error's label. */
function messageOf(body: string | undefined): string {
  try {
    const message = (JSON.parse(body ?? "") as { message?: unknown }).message;
    return typeof message === "string" ? `: ${message.slice(0, 80)}` : "";
  } catch {
    return "";
  }
}

function poster(
  phase: Phase,
  server: BenchServer,
  team: Team,
  webhook: Webhook,
  collector: Collector,
  stats: PostStats,
) {
  const restUrl = new URL(`${server.url}/api/v1/workspaces/${team.workspaceId}/channels/${team.channelId}/messages`);
  return async (seq: number) => {
    stats.attempted++;
    const sentAt = performance.now();
    const body = JSON.stringify({ content: `${MARKER}${collector.runTag}:${seq}:${sentAt.toFixed(3)}:${PADDING}` });
    await recordPost(stats, collector, seq, sentAt, async () => {
      let answer: { status: number; body?: string };
      if (phase === "REST") answer = await postJson(restUrl, team.owner.token, body, { readBody: true });
      else {
        const timestamp = Math.floor(Date.now() / 1000);
        const signature = `t=${timestamp},v1=${signWebhookBody(webhook.signingSecret, timestamp, body)}`;
        answer = await postJson(webhook.url, undefined, body, {
          readBody: true,
          headers: { "X-Service-Signature": signature },
        });
      }
      return answer.status === 201 ? "ok" : `HTTP ${answer.status}${messageOf(answer.body)}`;
    });
  };
}

export type WebhookRow = {
  phase: Phase;
  subscribers: number;
  concurrency: number;
  seconds: number;
  posted: number;
  posts: number;
  post_errors: number;
  posts_per_s: number;
  post_p50_ms: number;
  post_p99_ms: number;
  post_max_ms: number;
  /** Per message, POST start → the last subscriber's receipt (messages every subscriber got). */
  all_received_p50_ms: number | null;
  all_received_p99_ms: number | null;
  all_received_max_ms: number | null;
  /** Accepted messages that some subscriber never got within the drain window. */
  incomplete_messages: number;
  /** Per delivery, POST start → receipt. */
  delivery_p50_ms: number | null;
  delivery_p99_ms: number | null;
  delivery_max_ms: number | null;
  deliveries_expected: number;
  deliveries_received: number;
  duplicates: number;
  server_cpu_pct: number;
  stores_cpu_pct: number;
  bench_cpu_pct: number;
  other_cpu_pct: number;
  server_rss_peak_mib: number;
  errors?: Record<string, number>;
};

const orNull = (sorted: ArrayLike<number>, p: number) => (sorted.length > 0 ? round(percentile(sorted, p), 1) : null);

/** One phase's posting state, kept across its slices: one collector, one sequence of messages. */
type PhaseState = {
  phase: Phase;
  collector: ReceiptCollector;
  stats: PostStats;
  post: (seq: number) => Promise<void>;
  next: number;
  sendSeconds: number;
  windows: ReturnType<ReturnType<typeof startUsageWindow>["finish"]>[];
};

function phaseState(phase: Phase, server: BenchServer, team: Team, webhook: Webhook, tag: string): PhaseState {
  const collector = new ReceiptCollector(tag, SUBSCRIBERS, MAX_MESSAGES);
  const stats: PostStats = { attempted: 0, accepted: 0, errors: new Map(), postLatencies: [] };
  return {
    phase,
    collector,
    stats,
    post: poster(phase, server, team, webhook, collector, stats),
    next: 0,
    sendSeconds: 0,
    windows: [],
  };
}

/** Closed loop: CONCURRENCY posts in flight for `seconds`, then the drain of this slice's deliveries. */
async function runSlice(state: PhaseState, server: BenchServer, receivers: Receiver[], seconds: number) {
  const { collector, stats } = state;
  receivers.forEach((receiver, index) => {
    receiver.sink.collector = collector;
    receiver.sink.index = index;
  });
  const usage = startUsageWindow(server.pid);
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end && state.next < MAX_MESSAGES) await state.post(state.next++);
    }),
  );
  state.sendSeconds += (performance.now() - started) / 1000;
  const expected = stats.accepted * receivers.length;
  const drainEnd = performance.now() + DRAIN_SECONDS * 1000;
  while (collector.deliveries < expected && performance.now() < drainEnd) await sleep(20);
  await sleep(200); // duplicates, if any
  state.windows.push(usage.finish());
  for (const receiver of receivers) receiver.sink.collector = undefined;
}

function summarize(state: PhaseState, receivers: number): WebhookRow {
  const { phase, collector, stats } = state;
  const allReceived: number[] = [];
  let incomplete = 0;
  for (let seq = 0; seq < state.next; seq++) {
    if (!collector.accepted[seq]) continue;
    if (collector.receivedBy[seq] === receivers) allReceived.push(collector.lastLatency[seq]!);
    else incomplete++;
  }
  allReceived.sort((a, b) => a - b);
  const deliveries = collector.latencies.slice(0, collector.deliveries).sort();
  const postLatencies = stats.postLatencies.sort((a, b) => a - b);
  const errors: Record<string, number> = Object.fromEntries(stats.errors);
  for (const text of collector.errors) errors[`subscriber: ${text}`] = (errors[`subscriber: ${text}`] ?? 0) + 1;
  if (collector.outOfRange > 0) errors["subscriber: unknown message"] = collector.outOfRange;
  // CPU shares over all the phase's slices, weighted by their length.
  const windowSeconds = state.windows.reduce((sum, window) => sum + window.seconds, 0);
  const cpu = (pick: (window: PhaseState["windows"][number]) => number) =>
    Math.round(state.windows.reduce((sum, window) => sum + pick(window) * window.seconds, 0) / (windowSeconds || 1));
  return {
    phase,
    subscribers: receivers,
    concurrency: CONCURRENCY,
    seconds: round(state.sendSeconds, 1),
    posted: stats.attempted,
    posts: stats.accepted,
    post_errors: stats.attempted - stats.accepted,
    posts_per_s: round(stats.accepted / (state.sendSeconds || 1), 1),
    post_p50_ms: round(percentile(postLatencies, 50), 1),
    post_p99_ms: round(percentile(postLatencies, 99), 1),
    post_max_ms: round(postLatencies.at(-1) ?? 0, 1),
    all_received_p50_ms: orNull(allReceived, 50),
    all_received_p99_ms: orNull(allReceived, 99),
    all_received_max_ms: allReceived.length > 0 ? round(allReceived.at(-1)!, 1) : null,
    incomplete_messages: incomplete,
    delivery_p50_ms: orNull(deliveries, 50),
    delivery_p99_ms: orNull(deliveries, 99),
    delivery_max_ms: deliveries.length > 0 ? round(deliveries.at(-1)!, 1) : null,
    deliveries_expected: stats.accepted * receivers,
    deliveries_received: collector.deliveredOfAccepted(),
    duplicates: collector.duplicates,
    server_cpu_pct: cpu((window) => window.serverCpuPct),
    stores_cpu_pct: cpu((window) => window.storesCpuPct),
    bench_cpu_pct: cpu((window) => window.benchCpuPct),
    other_cpu_pct: cpu((window) => window.otherCpuPct),
    server_rss_peak_mib: Math.round(Math.max(0, ...state.windows.map((window) => window.rssPeak))),
    ...(Object.keys(errors).length > 0 ? { errors } : {}),
  };
}

export type WebhookResult = {
  subscribers: number;
  concurrency: number;
  seconds: number;
  slices: number;
  rows: WebhookRow[];
  /** Webhook posts/s as a share of REST posts/s, measured in the same run. */
  webhook_to_rest_pct: number | null;
  targets: { webhook_rate_at_least_80pct_of_rest: boolean };
};

export async function runWebhooks(log: (line: string) => void): Promise<WebhookResult> {
  const server = await startBenchServer("webhooks", { env: { WEBHOOK_QUOTA_PER_HOUR: "10000000" } });
  let receivers: Receiver[] = [];
  try {
    log(`webhooks: registering ${SUBSCRIBER_ACCOUNTS} subscriber accounts and an owner`);
    const team = await setupTeam(server.url, SUBSCRIBER_ACCOUNTS, 0);
    const created = await api<{ data: { id: string; signing_secret: string; signature_required: boolean } }>(
      server.url,
      "POST",
      `/api/v1/workspaces/${team.workspaceId}/webhooks`,
      team.owner.token,
      { name: "Bench webhook", default_channel_id: team.channelId, signature_required: true },
    );
    if (!created.data.signature_required) throw new Error("the webhook was created without signature_required");
    const webhook: Webhook = {
      id: created.data.id,
      signingSecret: created.data.signing_secret,
      url: new URL(`${server.url}/webhooks/${created.data.id}/messages`),
    };
    log(`webhooks: opening ${SUBSCRIBERS} subscribed WebSocket clients`);
    receivers = await openReceivers(server, team, SUBSCRIBERS);
    await sleep(500);

    const runTag = Date.now().toString(36);
    for (const phase of ["REST", "webhook"] as const) {
      log(`webhooks: warming up ${phase} posting (${WARM_UP_SECONDS} s)`);
      const warm = phaseState(phase, server, team, webhook, `w${phase}${runTag}`);
      await runSlice(warm, server, receivers, WARM_UP_SECONDS);
      if (warm.stats.accepted === 0)
        log(`webhooks: every ${phase} warm-up post failed: ${JSON.stringify(Object.fromEntries(warm.stats.errors))}`);
    }
    await sleep(1000);
    if (QUIET_WAIT_SECONDS > 0) {
      const busy = await waitForQuietMachine(QUIET_WAIT_SECONDS);
      if (busy >= 15) log(`webhooks: the machine is still ${Math.round(busy)}% busy with other work; measuring anyway`);
    }
    // The phases alternate in slices, A B B A A B B A ..., so that other work on the machine
    // (and the growing tables) weigh on both alike.
    const rest = phaseState("REST", server, team, webhook, `mREST${runTag}`);
    const hook = phaseState("webhook", server, team, webhook, `mwebhook${runTag}`);
    const order = Array.from({ length: SLICES }, (_, i) => (i % 2 === 0 ? [rest, hook] : [hook, rest])).flat();
    log(
      `webhooks: REST and webhook, ${CONCURRENCY} in flight, ${SEND_SECONDS} s each in ${SLICES} alternating slices, ${SUBSCRIBERS} subscribers`,
    );
    for (const state of order) await runSlice(state, server, receivers, SEND_SECONDS / SLICES);
    const restRow = summarize(rest, receivers.length);
    const hookRow = summarize(hook, receivers.length);
    const ratio = restRow.posts_per_s > 0 ? round((hookRow.posts_per_s / restRow.posts_per_s) * 100, 1) : null;
    return {
      subscribers: SUBSCRIBERS,
      concurrency: CONCURRENCY,
      seconds: SEND_SECONDS,
      slices: SLICES,
      rows: [restRow, hookRow],
      webhook_to_rest_pct: ratio,
      targets: { webhook_rate_at_least_80pct_of_rest: ratio !== null && ratio >= TARGET_RATIO_PCT },
    };
  } finally {
    for (const receiver of receivers) receiver.close();
    await sleep(500);
    await server.stop();
  }
}
