// Fan-out: N receivers subscribed over WebSocket (messages.onChannel) to one channel, senders
// posting to it over REST; and the server memory an idle WebSocket connection costs.
//
// With DATABASE_URL set, the fan-out section also measures the same plan against a baseline:
// bench/baseline-relay.ts, a bare `ws` relay that INSERTs each posted message into a table of
// its own in the same PostgreSQL and broadcasts it to its sockets (rows with server "baseline",
// after the service's; BENCH_FANOUT_BASELINE=0 leaves them out). Its receivers are bare `ws`
// sockets that read the send time out of the broadcast frame as the service's receivers do, into
// the same Collector. bench/fanout-baseline.ts compares the two sides properly (alternating runs,
// rate search). An open-loop row passes (`pass`) when at least 99.9% of the due posts were
// accepted, 99.9% of accepted × N were delivered and the delivery p99 is under 200 ms.
//
// Receivers speak the tRPC WebSocket protocol with a bare `ws` socket, in the frames of
// server/http/trpc-ws-protocol.ts (what @trpc/client's wsLink sends), which costs the load
// generator far less than a tRPC client per receiver. One receiver of
// every fan-out run is the real typed client (createChatClient), as a check that the bare
// receivers see what a client sees. Every message carries its send time in its content; a
// receiver reads it out of the frame without parsing the whole frame.
import WebSocket from "ws";
import { createChatClient, type ChatClient } from "@chat-service/client";
import type { Language } from "../db/schema/index.ts";
import { PING, PONG } from "../server/http/trpc-ws-protocol.ts";
import {
  api,
  mapLimit,
  openTrpcSocket,
  percentile,
  postAtRate,
  postJson,
  round,
  settledMemory,
  sleep,
  startBaselineRelay,
  startBenchServer,
  startDatabaseCpuWindow,
  startUsageWindow,
  waitForQuietMachine,
  type BenchServer,
  type MemoryReading,
  envNumber,
  TrpcRequests,
} from "./lib.ts";

/** Length of each sending window, and how long to wait afterwards for stragglers. */
const SEND_SECONDS = envNumber("BENCH_FANOUT_SECONDS", 6);
const DRAIN_SECONDS = envNumber("BENCH_DRAIN_SECONDS", 6);
/** Before each run, wait up to this long for other work on the machine to stop (0: don't). */
const QUIET_WAIT_SECONDS = Number(process.env.BENCH_QUIET_WAIT ?? 0) || 0;
/** Concurrent REST posts in a max-rate run (closed loop). */
const MAX_RATE_SENDERS = envNumber("BENCH_SENDERS", 16);
/** Open-loop runs never have more posts than this in flight; beyond it, a due post is skipped. */
const MAX_IN_FLIGHT = 64;
/** Receivers share this many accounts (each receiver is still its own socket and subscription). */
const RECEIVER_ACCOUNTS = 20;
const SENDER_ACCOUNTS = 4;
const IDLE_CONNECTIONS = envNumber("BENCH_IDLE_CONNECTIONS", 5000);

/**
 * Fan-out runs per receiver count: first a closed loop at the maximum rate, then an open loop at
 * the target rate (300 messages/s; 40 at 1000 receivers), then an open loop at 80% of
 * the maximum just measured, which shows the latency below saturation.
 */
type PlannedRate = number | "max" | "80% of max";
function plannedRuns(): { receivers: number; rate: PlannedRate }[] {
  const sizes = (process.env.BENCH_FANOUT ?? "10,100,1000")
    .split(",")
    .map((value) => Number(value.trim()))
    .filter((value) => Number.isInteger(value) && value > 0 && value <= 10_000);
  const targetRate = (receivers: number) => (receivers >= 1000 ? 40 : 300);
  return sizes.flatMap((receivers) => [
    { receivers, rate: "max" as const },
    { receivers, rate: targetRate(receivers) },
    { receivers, rate: "80% of max" as const },
  ]);
}

export type Account = { id: number; token: string };
export type Team = { workspaceId: string; channelId: string; owner: Account; receivers: Account[]; senders: Account[] };

async function register(baseUrl: string, label: string, language?: Language): Promise<Account> {
  const body = await api<{ access_token: string; user: { id: number } }>(
    baseUrl,
    "POST",
    "/api/v1/auth/app/register",
    undefined,
    {
      name: label,
      email: `${label}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.test`,
      password: "bench-password",
      password_confirmation: "bench-password",
      ...(language && { preferred_language: language }),
    },
  );
  return { id: body.user.id, token: body.access_token };
}

/**
 * An owner with a workspace; receiver and sender accounts join it by invite, landing in #general.
 * `languages` sets the preferred_language of the owner and of each receiver (by index).
 */
export async function setupTeam(
  baseUrl: string,
  receiverAccounts: number,
  senderAccounts: number,
  languages: { owner?: Language; receiver?: (index: number) => Language } = {},
): Promise<Team> {
  const owner = await register(baseUrl, "owner", languages.owner);
  const workspace = await api<{ data: { id: string } }>(baseUrl, "POST", "/api/v1/workspaces", owner.token, {
    name: "Bench",
  });
  const workspaceId = workspace.data.id;
  const channels = await api<{ data: { id: string; slug: string }[] }>(
    baseUrl,
    "GET",
    `/api/v1/workspaces/${workspaceId}/channels`,
    owner.token,
  );
  const general = channels.data.find((channel) => channel.slug === "general");
  if (!general) throw new Error("the new workspace has no #general");
  const invite = await api<{ data: { token: string } }>(
    baseUrl,
    "POST",
    `/api/v1/workspaces/${workspaceId}/invites`,
    owner.token,
    {},
  );
  const join = async (label: string, language?: Language) => {
    const account = await register(baseUrl, label, language);
    await api(baseUrl, "POST", `/api/v1/invites/${invite.data.token}/accept`, account.token);
    return account;
  };
  // Registration hashes a password (Argon2id): a few at a time.
  const receivers = await mapLimit(Array.from({ length: receiverAccounts }), 4, (_, i) =>
    join(`receiver${i}`, languages.receiver?.(i)),
  );
  const senders = await mapLimit(Array.from({ length: senderAccounts }), 4, (_, i) => join(`sender${i}`));
  return { workspaceId, channelId: general.id, owner, receivers, senders };
}

// ---------------------------------------------------------------------------------------------
// Recording deliveries

export const MARKER = "fanout:";
const MARKER_IN_FRAME = Buffer.from(`"content":"${MARKER}`);
export const PADDING = " the quick brown fox jumps over the lazy dog, a chat message of ordinary length";

/** What one run records: which receiver saw which message (once), and each delivery's latency. */
export class Collector {
  readonly seen: Uint8Array[];
  readonly accepted: Uint8Array;
  latencies: Float64Array;
  deliveries = 0;
  duplicates = 0;
  outOfRange = 0;
  lastDeliveryAt = 0;
  errors: string[] = [];

  constructor(
    readonly runTag: string,
    receivers: number,
    readonly maxMessages: number,
  ) {
    this.seen = Array.from({ length: receivers }, () => new Uint8Array(maxMessages));
    this.accepted = new Uint8Array(maxMessages);
    this.latencies = new Float64Array(1 << 16);
  }

  record(receiver: number, tag: string, seq: number, sentAt: number) {
    if (tag !== this.runTag) return; // a message of an earlier run
    const now = performance.now();
    const seen = this.seen[receiver];
    if (!seen || !(seq >= 0 && seq < this.maxMessages)) {
      this.outOfRange++;
      return;
    }
    if (seen[seq]) {
      this.duplicates++;
      return;
    }
    seen[seq] = 1;
    if (this.deliveries === this.latencies.length) {
      const grown = new Float64Array(this.latencies.length * 2);
      grown.set(this.latencies);
      this.latencies = grown;
    }
    this.latencies[this.deliveries++] = now - sentAt;
    this.lastDeliveryAt = now;
  }

  /** Deliveries of accepted messages (unique per receiver). */
  deliveredOfAccepted(): number {
    let count = 0;
    for (const seen of this.seen)
      for (let seq = 0; seq < this.maxMessages; seq++) if (seen[seq] && this.accepted[seq]) count++;
    return count;
  }
}

/**
 * Records the marked message a frame carries, reading `fanout:<tag>:<seq>:<sentAt>:` straight out
 * of the frame's bytes (after `"content":"`) without parsing it. False if the frame has no marker.
 */
function recordMarkedFrame(data: Buffer, sink: Sink): boolean {
  const at = data.indexOf(MARKER_IN_FRAME);
  if (at === -1) return false;
  const start = at + MARKER_IN_FRAME.length - MARKER.length;
  const marker = parseMarker(data.toString("latin1", start, Math.min(data.length, start + 80)));
  if (marker) sink.collector?.record(sink.index, marker.tag, marker.seq, marker.sentAt);
  return true;
}

/** Reads `fanout:<tag>:<seq>:<sentAt>:` out of a message's content. */
function parseMarker(text: string): { tag: string; seq: number; sentAt: number } | undefined {
  if (!text.startsWith(MARKER)) return undefined;
  const [tag, seq, sentAt] = text.slice(MARKER.length).split(":", 3);
  if (tag === undefined || seq === undefined || sentAt === undefined) return undefined;
  return { tag, seq: Number(seq), sentAt: Number(sentAt) };
}

// ---------------------------------------------------------------------------------------------
// Receivers

type Sink = { collector: Collector | undefined; index: number };

export interface Receiver {
  readonly sink: Sink;
  close(): void;
}

/** A bare `ws` socket speaking the tRPC WebSocket protocol. */
class RawReceiver implements Receiver {
  readonly sink: Sink = { collector: undefined, index: 0 };
  private readonly requests: TrpcRequests;
  stopped = false;

  private constructor(private readonly socket: WebSocket) {
    this.requests = new TrpcRequests(socket);
    socket.on("message", (data: Buffer, isBinary: boolean) => this.onFrame(data, isBinary));
    socket.on("close", () => {
      this.stopped = true;
      this.requests.rejectAll("socket closed");
    });
    socket.on("error", () => {});
  }

  /** Opens the socket and sends the connection params, as the tRPC client does. */
  static open(baseUrl: string, token: string): Promise<RawReceiver> {
    return openTrpcSocket(baseUrl, token, (socket) => new RawReceiver(socket));
  }

  /** A query over the socket: proves the connection params authenticated it. */
  query(path: string) {
    return this.requests.send("query", path);
  }

  /** Resolves when the server answers `started`. */
  subscribe(path: string, input: unknown) {
    return this.requests.send("subscription", path, input);
  }

  private onFrame(data: Buffer, isBinary: boolean) {
    if (!isBinary && data.length === PING.length && data.toString() === PING) {
      this.socket.send(PONG);
      return;
    }
    if (recordMarkedFrame(data, this.sink)) return;
    let message: { id?: number; result?: { type?: string; data?: unknown }; error?: { message?: string } };
    try {
      message = JSON.parse(data.toString());
    } catch {
      return;
    }
    const waiter = this.requests.waiter(message.id);
    if (message.error) {
      const text = message.error.message ?? "error";
      this.sink.collector?.errors.push(text);
      waiter?.reject(new Error(text));
      return;
    }
    if (message.result?.type === "stopped") this.stopped = true;
    if (
      waiter &&
      (message.result?.type === "started" || message.result?.type === "data" || message.result?.type === undefined)
    ) {
      // A query answers with {type:"data"}; a subscription first with {type:"started"}.
      waiter.resolve(message.result?.data);
    }
  }

  close() {
    this.socket.close();
  }
}

/** The typed client (createChatClient over `ws`), one per fan-out run. */
class ClientReceiver implements Receiver {
  readonly sink: Sink = { collector: undefined, index: 0 };
  private constructor(
    private readonly client: ChatClient,
    private readonly subscription: { unsubscribe(): void },
  ) {}

  static open(
    baseUrl: string,
    token: string,
    input: { workspace_id: string; channel_id: string },
  ): Promise<ClientReceiver> {
    const client = createChatClient({
      url: baseUrl,
      token,
      webSocket: { WebSocket },
    });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("typed client subscription did not start")), 60_000);
      let receiver: ClientReceiver | undefined;
      const subscription = client.messages.onChannel.subscribe(input, {
        onStarted: () => {
          clearTimeout(timer);
          receiver = new ClientReceiver(client, subscription);
          resolve(receiver);
        },
        onData: (tracked) => {
          const event = tracked.data;
          const marker = event.type === "message.created" ? parseMarker(event.data.message.content) : undefined;
          if (marker && receiver)
            receiver.sink.collector?.record(receiver.sink.index, marker.tag, marker.seq, marker.sentAt);
        },
        onError: (error) => {
          clearTimeout(timer);
          if (receiver) receiver.sink.collector?.errors.push(`typed client: ${error.message}`);
          else reject(error);
        },
      });
    });
  }

  close() {
    this.subscription.unsubscribe();
    this.client.close();
  }
}

/**
 * A bare `ws` socket on the baseline relay (bench/baseline-relay.ts). The relay sends `ready`
 * first, then every broadcast; the receiver reads each one as RawReceiver reads a tRPC data frame.
 */
class BaselineReceiver implements Receiver {
  readonly sink: Sink = { collector: undefined, index: 0 };

  private constructor(private readonly socket: WebSocket) {
    socket.on("message", (data: Buffer) => recordMarkedFrame(data, this.sink));
    socket.on("error", () => {});
  }

  /** Resolves once the relay's `ready` frame arrived: from then on the socket gets every broadcast. */
  static open(baseUrl: string): Promise<BaselineReceiver> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(`${baseUrl.replace(/^http/, "ws")}/ws`, {
        perMessageDeflate: false,
        skipUTF8Validation: true,
      });
      const timer = setTimeout(() => {
        socket.terminate();
        reject(new Error("baseline WebSocket open timed out"));
      }, 30_000);
      socket.once("message", () => {
        clearTimeout(timer);
        resolve(new BaselineReceiver(socket));
      });
      socket.once("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  }

  close() {
    this.socket.close();
  }
}

export function openBaselineReceivers(relay: BenchServer, count: number): Promise<Receiver[]> {
  return mapLimit(Array.from({ length: count }), 50, () => BaselineReceiver.open(relay.url));
}

export async function openReceivers(server: BenchServer, team: Team, count: number): Promise<Receiver[]> {
  const input = { workspace_id: team.workspaceId, channel_id: team.channelId };
  const tokenOf = (i: number) => team.receivers[i % team.receivers.length]!.token;
  const typed = await ClientReceiver.open(server.url, tokenOf(0), input);
  const raw = await mapLimit(Array.from({ length: count - 1 }), 50, async (_, i) => {
    const receiver = await RawReceiver.open(server.url, tokenOf(i + 1));
    await receiver.subscribe("messages.onChannel", input);
    return receiver;
  });
  return [typed, ...raw];
}

// ---------------------------------------------------------------------------------------------
// Senders

export type SendStats = {
  attempted: number;
  accepted: number;
  errors: Map<string, number>;
  skipped: number;
  postLatencies: number[];
};

/**
 * Makes one marked post (`send` answers "ok" or what went wrong) and records it: accepted, with
 * its latency from `sentAt`, or counted under its failure (a timeout, a refused connection).
 */
export async function recordPost(
  stats: Pick<SendStats, "accepted" | "errors" | "postLatencies">,
  collector: Collector,
  seq: number,
  sentAt: number,
  send: () => Promise<string>,
): Promise<void> {
  let outcome: string;
  try {
    outcome = await send();
  } catch (error) {
    outcome = (error as Error).name === "TimeoutError" ? "timeout" : "network error";
  }
  if (outcome === "ok") {
    stats.accepted++;
    collector.accepted[seq] = 1;
    stats.postLatencies.push(performance.now() - sentAt);
  } else {
    stats.errors.set(outcome, (stats.errors.get(outcome) ?? 0) + 1);
  }
}

/**
 * One side of a fan-out measurement: a server process, its receivers, and where (and with which
 * bearer token, if any) a post goes. Both sides answer a post with 201.
 */
export type FanoutSide = {
  name: "service" | "baseline";
  server: BenchServer;
  receivers: Receiver[];
  route: URL;
  token: (seq: number) => string | undefined;
};

/** The service: posts to #general over REST, from the sender accounts in turn. */
export function serviceSide(server: BenchServer, team: Team, receivers: Receiver[]): FanoutSide {
  return {
    name: "service",
    server,
    receivers,
    route: new URL(`${server.url}/api/v1/workspaces/${team.workspaceId}/channels/${team.channelId}/messages`),
    token: (seq) => team.senders[seq % team.senders.length]!.token,
  };
}

/** The baseline relay: the same JSON body, without authentication. */
export function baselineSide(relay: BenchServer, receivers: Receiver[]): FanoutSide {
  return {
    name: "baseline",
    server: relay,
    receivers,
    route: new URL(`${relay.url}/channels/general/messages`),
    token: () => undefined,
  };
}

function poster(side: Pick<FanoutSide, "route" | "token">, collector: Collector, stats: SendStats) {
  const { route } = side;
  return async (seq: number) => {
    stats.attempted++;
    const sentAt = performance.now();
    const content = `${MARKER}${collector.runTag}:${seq}:${sentAt.toFixed(3)}:${PADDING}`;
    await recordPost(stats, collector, seq, sentAt, async () => {
      const { status } = await postJson(route, side.token(seq), JSON.stringify({ content }));
      return status === 201 ? "ok" : `HTTP ${status}`;
    });
  };
}

/** Closed loop: `senders` posts in flight at all times, for the window. */
async function sendAtMax(post: (seq: number) => Promise<void>, senders: number, maxMessages: number, seconds: number) {
  const end = performance.now() + seconds * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: senders }, async () => {
      while (performance.now() < end && next < maxMessages) await post(next++);
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// A fan-out run

/** The pass rule of an open-loop row (see the header). */
export const PASS_DELIVERED_PCT = 99.9;
export const PASS_P99_MS = 200;

export type FanoutRow = {
  /** "service" (server/main.ts) or "baseline" (bench/baseline-relay.ts). */
  server: FanoutSide["name"];
  receivers: number;
  rate: string;
  seconds: number;
  posted: number;
  accepted: number;
  post_errors: number;
  skipped: number;
  accepted_per_s: number;
  deliveries: number;
  deliveries_per_s: number;
  delivered_pct: number;
  /** Open loop: the pass rule held (see the header). Null for the closed-loop max row. */
  pass: boolean | null;
  duplicates: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
  max_ms: number;
  post_p50_ms: number;
  post_p99_ms: number;
  server_cpu_pct: number;
  /** The server process's CPU time over the row (window and drain) per delivery, in µs. */
  server_cpu_us_per_delivery: number | null;
  /**
   * CPU time of the PostgreSQL backends connected to the bench database over the row, per
   * accepted message, in µs (null on PGlite). See startDatabaseCpuWindow.
   */
  pg_cpu_us_per_message: number | null;
  server_rss_mib: number;
  server_rss_peak_mib: number;
  /** The server's JS heap in use after the run and a full GC: growth between runs would be a leak (null: not measured). */
  server_heap_after_gc_mib: number | null;
  stores_cpu_pct: number;
  bench_cpu_pct: number;
  other_cpu_pct: number;
  machine_cpu_pct: number;
  errors?: Record<string, number>;
};

let runCounter = 0;

/**
 * One row: posts to `side` at `rate` (an open loop; "max": a closed loop) for `seconds`, then
 * waits up to `drainSeconds` for every accepted message to reach every receiver.
 */
export async function fanoutRun(
  side: FanoutSide,
  rate: number | "max",
  label: string,
  options: { seconds?: number; drainSeconds?: number; measureHeap?: boolean } = {},
): Promise<FanoutRow> {
  const { server, receivers } = side;
  const seconds = options.seconds ?? SEND_SECONDS;
  const drainSeconds = options.drainSeconds ?? DRAIN_SECONDS;
  const maxMessages =
    rate === "max"
      ? Math.max(1000, Math.min(50_000, Math.floor(40_000_000 / receivers.length)))
      : Math.ceil(rate * seconds) + 1;
  const collector = new Collector(`r${runCounter++}x${Date.now().toString(36)}`, receivers.length, maxMessages);
  receivers.forEach((receiver, index) => {
    receiver.sink.collector = collector;
    receiver.sink.index = index;
  });
  const stats: SendStats = { attempted: 0, accepted: 0, errors: new Map(), skipped: 0, postLatencies: [] };
  const post = poster(side, collector, stats);

  const databaseCpu = process.env.DATABASE_URL ? await startDatabaseCpuWindow(process.env.DATABASE_URL) : undefined;
  const usage = startUsageWindow(server.pid);
  const firstSendAt = performance.now();
  if (rate === "max") await sendAtMax(post, MAX_RATE_SENDERS, maxMessages, seconds);
  else {
    await postAtRate(post, {
      rate,
      seconds,
      maxMessages,
      maxInFlight: MAX_IN_FLIGHT,
      onSkip: () => stats.skipped++,
    });
  }
  const sendSeconds = (performance.now() - firstSendAt) / 1000;

  // Wait for every accepted message to reach every receiver, or for the drain window to pass.
  const expected = stats.accepted * receivers.length;
  const drainEnd = performance.now() + drainSeconds * 1000;
  while (collector.deliveries < expected && performance.now() < drainEnd) await sleep(20);
  const window = usage.finish();
  const databaseCpuSeconds = await databaseCpu?.finish();
  for (const receiver of receivers) receiver.sink.collector = undefined;
  const heap = options.measureHeap === false ? undefined : await server.heap?.collectAndMeasure();

  const delivered = collector.deliveredOfAccepted();
  const latencies = collector.latencies.slice(0, collector.deliveries).sort();
  const p99 = percentile(latencies, 99);
  const due = stats.attempted + stats.skipped;
  const notPosted = due - stats.accepted;
  const postLatencies = stats.postLatencies.sort((a, b) => a - b);
  const deliverySeconds = collector.deliveries > 0 ? (collector.lastDeliveryAt - firstSendAt) / 1000 : sendSeconds;
  const postErrors = [...stats.errors.values()].reduce((sum, count) => sum + count, 0);
  const errors: Record<string, number> = Object.fromEntries(stats.errors);
  for (const text of collector.errors) errors[`receiver: ${text}`] = (errors[`receiver: ${text}`] ?? 0) + 1;
  if (collector.outOfRange > 0) errors["receiver: unknown message"] = collector.outOfRange;
  return {
    server: side.name,
    receivers: receivers.length,
    rate: label,
    seconds: round(sendSeconds, 1),
    posted: stats.attempted,
    accepted: stats.accepted,
    post_errors: postErrors,
    skipped: stats.skipped,
    accepted_per_s: round(stats.accepted / sendSeconds, 1),
    deliveries: collector.deliveries,
    deliveries_per_s: Math.round(collector.deliveries / deliverySeconds),
    delivered_pct: expected === 0 ? 0 : round((delivered / expected) * 100, 2),
    pass:
      rate === "max"
        ? null
        : expected > 0 &&
          notPosted <= due * (1 - PASS_DELIVERED_PCT / 100) &&
          delivered >= expected * (PASS_DELIVERED_PCT / 100) &&
          p99 < PASS_P99_MS,
    duplicates: collector.duplicates,
    p50_ms: round(percentile(latencies, 50), 1),
    p95_ms: round(percentile(latencies, 95), 1),
    p99_ms: round(p99, 1),
    max_ms: round(latencies.length > 0 ? latencies[latencies.length - 1]! : 0, 1),
    post_p50_ms: round(percentile(postLatencies, 50), 1),
    post_p99_ms: round(percentile(postLatencies, 99), 1),
    server_cpu_pct: Math.round(window.serverCpuPct),
    server_cpu_us_per_delivery:
      collector.deliveries > 0 ? round((window.serverCpuSeconds / collector.deliveries) * 1e6, 1) : null,
    pg_cpu_us_per_message:
      databaseCpuSeconds !== undefined && stats.accepted > 0
        ? round((databaseCpuSeconds / stats.accepted) * 1e6, 0)
        : null,
    server_rss_mib: Math.round(window.rssEnd),
    server_rss_peak_mib: Math.round(window.rssPeak),
    server_heap_after_gc_mib: heap ? round(heap.usedMiB, 1) : null,
    stores_cpu_pct: Math.round(window.storesCpuPct),
    bench_cpu_pct: Math.round(window.benchCpuPct),
    other_cpu_pct: Math.round(window.otherCpuPct),
    machine_cpu_pct: Math.round(window.machineBusyPct),
    ...(Object.keys(errors).length > 0 ? { errors } : {}),
  };
}

/** Whether the fan-out section also measures the baseline relay (needs DATABASE_URL). */
function baselineWanted(): boolean {
  return Boolean(process.env.DATABASE_URL) && process.env.BENCH_FANOUT_BASELINE !== "0";
}

/**
 * The planned rows against one side: receivers are opened (through `open`) whenever the count
 * changes; the "80% of max" row takes the max row's accepted rate just measured.
 */
async function measurePlan(
  runs: { receivers: number; rate: PlannedRate }[],
  open: (count: number) => Promise<FanoutSide>,
  log: (line: string) => void,
  prefix: string,
): Promise<FanoutRow[]> {
  const rows: FanoutRow[] = [];
  let side: FanoutSide | undefined;
  try {
    let maxAccepted = 0;
    for (const run of runs) {
      if (side?.receivers.length !== run.receivers) {
        for (const receiver of side?.receivers ?? []) receiver.close();
        side = undefined;
        await sleep(500);
        log(`${prefix}: opening ${run.receivers} WebSocket receivers`);
        side = await open(run.receivers);
        await sleep(500);
      }
      const rate = run.rate === "80% of max" ? Math.max(1, Math.round(maxAccepted * 0.8)) : run.rate;
      const label =
        run.rate === "max"
          ? `max (${MAX_RATE_SENDERS} in flight)`
          : run.rate === "80% of max"
            ? `${rate}/s (80% of max)`
            : `${rate}/s (target)`;
      if (QUIET_WAIT_SECONDS > 0) {
        const busy = await waitForQuietMachine(QUIET_WAIT_SECONDS);
        if (busy >= 15)
          log(`${prefix}: the machine is still ${Math.round(busy)}% busy with other work; measuring anyway`);
      }
      log(`${prefix}: ${run.receivers} receivers, ${label}, ${SEND_SECONDS} s`);
      const row = await fanoutRun(side, rate, label);
      if (run.rate === "max") maxAccepted = row.accepted_per_s;
      rows.push(row);
      await sleep(1000);
    }
  } finally {
    for (const receiver of side?.receivers ?? []) receiver.close();
  }
  return rows;
}

export async function runFanout(log: (line: string) => void): Promise<FanoutRow[]> {
  const runs = plannedRuns();
  if (runs.length === 0) return [];
  const rows: FanoutRow[] = [];
  const server = await startBenchServer("fanout", { inspect: true });
  try {
    log(`fan-out: setting up ${RECEIVER_ACCOUNTS} receiver and ${SENDER_ACCOUNTS} sender accounts`);
    const team = await setupTeam(server.url, RECEIVER_ACCOUNTS, SENDER_ACCOUNTS);
    const open = async (count: number) => serviceSide(server, team, await openReceivers(server, team, count));
    rows.push(...(await measurePlan(runs, open, log, "fan-out")));
  } finally {
    await server.stop();
  }
  if (!baselineWanted()) {
    if (!process.env.DATABASE_URL) log("fan-out: no baseline rows (the baseline relay needs DATABASE_URL)");
    return rows;
  }
  const relay = await startBaselineRelay();
  try {
    const open = async (count: number) => baselineSide(relay, await openBaselineReceivers(relay, count));
    rows.push(...(await measurePlan(runs, open, log, "fan-out baseline")));
  } finally {
    await relay.stop();
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Idle memory per WebSocket connection

export type IdleRow = {
  stage: string;
  connections: number;
  subscribed: boolean;
  server_rss_mib: number;
  rss_kib_per_connection: number | null;
  heap_used_mib: number;
  heap_kib_per_connection: number | null;
  compared_with: string;
};

export async function runIdle(
  log: (line: string) => void,
): Promise<{ rows: IdleRow[]; broadcast: Record<string, number> }> {
  const total = IDLE_CONNECTIONS;
  const half = Math.floor(total / 2);
  const server = await startBenchServer("idle", { inspect: true });
  const sockets: RawReceiver[] = [];
  try {
    const team = await setupTeam(server.url, 10, 1);
    const tokenOf = (i: number) => team.receivers[i % team.receivers.length]!.token;
    const connect = async (i: number) => {
      const socket = await RawReceiver.open(server.url, tokenOf(i));
      await socket.query("me.get");
      return socket;
    };

    // Warm-up: the code paths (JIT, pools, first allocations) of connect, auth and subscribe.
    log("idle: warming up");
    const warm = await mapLimit(Array.from({ length: 200 }), 50, (_, i) => connect(i));
    await mapLimit(warm, 50, (socket) => socket.subscribe("events.onUser", undefined));
    for (const socket of warm) socket.close();
    await sleep(2000);
    const baseline = await settledMemory(server);

    const row = (
      stage: string,
      connections: number,
      subscribed: boolean,
      now: MemoryReading,
      from: MemoryReading,
      fromConnections: number,
      comparedWith: string,
    ): IdleRow => ({
      stage,
      connections,
      subscribed,
      server_rss_mib: round(now.rss, 1),
      rss_kib_per_connection: round(((now.rss - from.rss) * 1024) / (connections - fromConnections), 1),
      heap_used_mib: round(now.heap, 1),
      heap_kib_per_connection: round(((now.heap - from.heap) * 1024) / (connections - fromConnections), 1),
      compared_with: comparedWith,
    });
    const rows: IdleRow[] = [
      {
        stage: "baseline (after warm-up)",
        connections: 0,
        subscribed: false,
        server_rss_mib: round(baseline.rss, 1),
        rss_kib_per_connection: null,
        heap_used_mib: round(baseline.heap, 1),
        heap_kib_per_connection: null,
        compared_with: "",
      },
    ];

    log(`idle: opening ${half} connections (connection params, authenticated, no subscription)`);
    for (const socket of await mapLimit(Array.from({ length: half }), 100, (_, i) => connect(i))) sockets.push(socket);
    const halfway = await settledMemory(server);
    rows.push(row("connected + authenticated", half, false, halfway, baseline, 0, "baseline"));

    log(`idle: opening ${total - half} more connections`);
    for (const socket of await mapLimit(Array.from({ length: total - half }), 100, (_, i) => connect(half + i)))
      sockets.push(socket);
    const connected = await settledMemory(server);
    rows.push(row("connected + authenticated", total, false, connected, baseline, 0, "baseline"));
    rows.push(row("connected + authenticated", total, false, connected, halfway, half, `${half} connections`));

    // The measure: each connection with one events.onUser subscription (its user's
    // streams: the user, the workspace, its channels).
    log(`idle: subscribing all ${total} to events.onUser`);
    await mapLimit(sockets, 100, (socket) => socket.subscribe("events.onUser", undefined));
    const subscribed = await settledMemory(server);
    rows.push(row("each also subscribed to events.onUser", total, true, subscribed, baseline, 0, "baseline"));
    rows.push(
      row("each also subscribed to events.onUser", total, true, subscribed, connected, 0, "connected, unsubscribed"),
    );

    // A few messages to all of them: one event fanned out to every idle subscriber.
    log(`idle: 10 messages to ${total} subscribers`);
    const collector = new Collector(`idle${Date.now().toString(36)}`, sockets.length, 10);
    sockets.forEach((socket, index) => {
      socket.sink.collector = collector;
      socket.sink.index = index;
    });
    const stats: SendStats = { attempted: 0, accepted: 0, errors: new Map(), skipped: 0, postLatencies: [] };
    const post = poster(serviceSide(server, team, []), collector, stats);
    const usage = startUsageWindow(server.pid);
    for (let seq = 0; seq < 10; seq++) {
      await post(seq);
      await sleep(200);
    }
    const drainEnd = performance.now() + 15_000;
    while (collector.deliveries < stats.accepted * sockets.length && performance.now() < drainEnd) await sleep(20);
    const window = usage.finish();
    const latencies = collector.latencies.slice(0, collector.deliveries).sort();
    const broadcast = {
      subscribers: sockets.length,
      messages: stats.accepted,
      delivered_pct: round((collector.deliveredOfAccepted() / Math.max(1, stats.accepted * sockets.length)) * 100, 2),
      p50_ms: round(percentile(latencies, 50), 1),
      p99_ms: round(percentile(latencies, 99), 1),
      max_ms: round(latencies.length > 0 ? latencies[latencies.length - 1]! : 0, 1),
      server_cpu_pct: Math.round(window.serverCpuPct),
      server_rss_peak_mib: Math.round(window.rssPeak),
    };
    return { rows, broadcast };
  } finally {
    for (const socket of sockets) socket.close();
    await sleep(500);
    await server.stop();
  }
}
