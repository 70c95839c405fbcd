// `npm run bench -- lifecycle` (only when named): what editing, reacting and deleting cost the live
// path of a busy channel, the reaction limit under a race, and what reactions cost a history page.
//
// One server (startBenchServer: its own process; PGlite in a fresh DATA_DIR, or the PostgreSQL of
// DATABASE_URL), a workspace (setupTeam of bench/fanout.ts) with BENCH_LIFECYCLE_SENDERS sender
// accounts (4), each with its own bearer token, and BENCH_LIFECYCLE_RECEIVERS live subscribers
// (100) on #general over tRPC WebSocket messages.onChannel (fan-out's receivers: one typed client,
// the rest bare sockets), sharing up to 20 receiver accounts.
//
// Part 1, loads. A closed loop of BENCH_LIFECYCLE_CONCURRENCY requests in flight (8; request slot
// w speaks for sender w mod senders) for BENCH_SECONDS (10) per run:
//   posts alone  POST /api/v1/workspaces/{w}/channels/{c}/messages {content}
//   mixed        a fixed cycle of 20 turns per slot: 14 posts, 3 edits (PATCH …/messages/{id}
//                {content} of one of the slot's own earlier messages), 2 reactions (PUT
//                …/messages/{id}/reactions/{emoji}, thumbsup, heart or 🎉, URL-encoded, on one of
//                them) and 1 delete (DELETE …/messages/{id}). Each slot keeps the ids of its own
//                posted messages; a delete takes its message out of that list before it is sent,
//                so no message is deleted twice or edited, reacted to or deleted after its delete.
//                A turn with no message of its own yet posts instead (the first turns of a run).
// Every post carries fan-out's marker (send time in its content), so the subscribers record the
// delivery of message.created into a Collector; an edit's new content carries no marker. After an
// unrecorded warm-up of each load (BENCH_LIFECYCLE_WARMUP seconds, 2), BENCH_RUNS (3) runs of each
// load, alternating (posts, mixed, mixed, posts, posts, mixed, ...: drift such as the growing table
// weighs on both alike), each drained (every accepted post at every subscriber, at most
// BENCH_DRAIN_SECONDS, 10) before the next. Per run: successful requests per second (ops/s: 2xx
// answers; a non-2xx answer or a network error is an error, counted by kind and status), request
// latency p99 over all successful requests and over posts, delivery latency p99 (post start →
// message.created at a subscriber) and delivered % (accepted posts × subscribers). The table shows
// the medians over the runs and mixed / posts alone of the median ops/s (target: at least 0.9).
// All requests, posts included, go through one node:http keep-alive client of this file, in both
// loads alike.
//
// Part 2, the reaction limit under a race: one sender posts a message, then 60 PUTs of distinct
// short names e1 … e60 from that sender at that message, all at once. Expected: exactly 50 answered
// 200 and 10 answered 422 ({message, errors: {emoji: [...]}}); the message's stored reactions are
// read back when its record shows them.
//
// Part 3, history pages: two new channels of BENCH_LIFECYCLE_HISTORY_MESSAGES messages each (500),
// posted by the senders; in one, every fifth message (20%) gets three reactions (thumbsup, heart,
// 🎉 from different senders). Then GET …/messages?limit=50 of each channel in turn (after 10 unrecorded
// of each), BENCH_LIFECYCLE_HISTORY_REQUESTS (50) of each, one at a time: median latency of each and
// their ratio, with / without reactions (target: at most 1.2).
//
//   BENCH_LIFECYCLE_RECEIVERS         live subscribers on #general (100)
//   BENCH_LIFECYCLE_SENDERS           sender accounts (4)
//   BENCH_LIFECYCLE_CONCURRENCY       requests in flight in part 1 (8)
//   BENCH_LIFECYCLE_WARMUP            unrecorded warm-up of each load, seconds (2)
//   BENCH_SECONDS                     window of each run (10)
//   BENCH_DRAIN_SECONDS               longest wait after a run for its deliveries (10)
//   BENCH_RUNS                        runs of each load (3)
//   BENCH_LIFECYCLE_HISTORY_MESSAGES  messages in each history channel (500)
//   BENCH_LIFECYCLE_HISTORY_REQUESTS  page requests per history channel (50)
//
// Reading the numbers: every subscriber, the load generator and the server share the machine's
// cores. Frames of later events about a post (an edit, a reaction) that still carry the post's
// marked content count as repeats (`duplicates` in the JSON), not as deliveries.
import { Agent as HttpAgent } from "node:http";
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
import {
  api,
  envNumber,
  keepAliveCaller,
  mapLimit,
  percentile,
  round,
  seeded,
  sleep,
  startBenchServer,
  startUsageWindow,
  type Answer,
} from "./lib.ts";

const RECEIVERS = Math.min(5000, Math.floor(envNumber("BENCH_LIFECYCLE_RECEIVERS", 100)));
const RECEIVER_ACCOUNTS = Math.min(RECEIVERS, 20);
const SENDERS = Math.min(32, Math.floor(envNumber("BENCH_LIFECYCLE_SENDERS", 4)));
const CONCURRENCY = Math.min(256, Math.floor(envNumber("BENCH_LIFECYCLE_CONCURRENCY", 8)));
const WARMUP_SECONDS = Math.min(60, envNumber("BENCH_LIFECYCLE_WARMUP", 2));
const SEND_SECONDS = Math.min(600, envNumber("BENCH_SECONDS", 10));
const DRAIN_SECONDS = Math.min(600, envNumber("BENCH_DRAIN_SECONDS", 10));
const RUNS = Math.max(1, Math.round(envNumber("BENCH_RUNS", 3)));
const HISTORY_MESSAGES = Math.min(10_000, Math.floor(envNumber("BENCH_LIFECYCLE_HISTORY_MESSAGES", 500)));
const HISTORY_REQUESTS = Math.min(10_000, Math.floor(envNumber("BENCH_LIFECYCLE_HISTORY_REQUESTS", 50)));
/** Posts per run at most: the collector keeps a byte per subscriber and post. */
const MAX_POSTS = Math.max(1000, Math.min(100_000, Math.floor(40_000_000 / RECEIVERS)));
/** Targets: mixed ops/s at least this share of posts alone; history with / without reactions at most this. */
export const TARGET_MIXED_SHARE = 0.9;
export const TARGET_HISTORY_RATIO = 1.2;
/** Part 2: distinct emoji raced at one message, and how many a message may hold. */
const RACE_EMOJI = 60;
const EMOJI_LIMIT = 50;
const EMOJI = ["thumbsup", "heart", "🎉"];
const HISTORY_PAGE = 50;
const HISTORY_WARMUP = 10;

type Load = "posts alone" | "mixed";
type OpKind = "post" | "edit" | "reaction" | "delete";
const KINDS: OpKind[] = ["post", "edit", "reaction", "delete"];
/** One cycle of the mixed load: 14 posts, 3 edits, 2 reactions, 1 delete. */
const LETTERS: Record<string, OpKind> = { P: "post", E: "edit", R: "reaction", D: "delete" };
const MIX: OpKind[] = [..."PPEPPRPPEPDPPRPEPPPP"].map((letter) => LETTERS[letter]!);

// ---------------------------------------------------------------------------------------------
// Requests

const agent = new HttpAgent({ keepAlive: true, maxSockets: 128 });
const REQUEST_TIMEOUT_MS = 30_000;

const call = keepAliveCaller(agent, REQUEST_TIMEOUT_MS);

const ok = (answer: Answer) => answer.status >= 200 && answer.status < 300;

function parse(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/** An error's label: the kind, the status and the start of the answer's `message`. */
function failure(kind: string, answer: Answer): string {
  const message = (parse(answer.body) as { message?: unknown } | undefined)?.message;
  return `${kind}: HTTP ${answer.status}${typeof message === "string" ? ` ${message.slice(0, 60)}` : ""}`;
}

const thrown = (kind: string, error: unknown) =>
  `${kind}: ${(error as Error).name === "TimeoutError" ? "timeout" : "network error"}`;

/** `data.id` of a `{data: message}` answer. */
function idOf(body: string): string | undefined {
  const id = (parse(body) as { data?: { id?: unknown } } | undefined)?.data?.id;
  return typeof id === "string" ? id : undefined;
}

/** How many reactions a message record shows (an array's length or an object's keys); null when it has none. */
function reactionsOf(message: unknown): number | null {
  const reactions = (message as { reactions?: unknown } | undefined)?.reactions;
  if (Array.isArray(reactions)) return reactions.length;
  if (reactions && typeof reactions === "object") return Object.keys(reactions).length;
  return null;
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const half = sorted.length / 2;
  return Number.isInteger(half) ? (sorted[half - 1]! + sorted[half]!) / 2 : sorted[Math.floor(half)]!;
}

const bump = (counts: Map<string, number>, key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);

// ---------------------------------------------------------------------------------------------
// Part 1: one run of one load

type KindStats = { attempted: number; ok: number; latencies: number[] };

type RunState = {
  collector: Collector;
  errors: Map<string, number>;
  /** Posts, in recordPost's shape (its errors are `errors`). */
  posts: { attempted: number; accepted: number; errors: Map<string, number>; postLatencies: number[] };
  others: Record<Exclude<OpKind, "post">, KindStats>;
  nextSeq: number;
};

function messagesUrl(baseUrl: string, team: Team, channelId = team.channelId): string {
  return `${baseUrl}/api/v1/workspaces/${team.workspaceId}/channels/${channelId}/messages`;
}

/** An edit, reaction or delete: timed, counted, and its failure recorded. */
async function otherOp(state: RunState, kind: Exclude<OpKind, "post">, send: () => Promise<Answer>) {
  const stats = state.others[kind];
  stats.attempted++;
  const started = performance.now();
  let outcome: string;
  try {
    const answer = await send();
    outcome = ok(answer) ? "ok" : failure(kind, answer);
  } catch (error) {
    outcome = thrown(kind, error);
  }
  if (outcome === "ok") {
    stats.ok++;
    stats.latencies.push(performance.now() - started);
  } else bump(state.errors, outcome);
}

/** One request slot of the closed loop: its sender's token, its own messages, its turn in the cycle. */
async function slot(state: RunState, load: Load, token: string, base: string, first: number, end: number) {
  const mine: string[] = [];
  const random = seeded(first + 1);
  const pick = () => Math.floor(random() * mine.length);
  let turn = first;
  let edits = 0;
  while (performance.now() < end) {
    let kind: OpKind = load === "posts alone" ? "post" : MIX[turn++ % MIX.length]!;
    if (mine.length === 0) kind = "post";
    if (kind === "post") {
      if (state.nextSeq >= MAX_POSTS) return;
      const seq = state.nextSeq++;
      state.posts.attempted++;
      const sentAt = performance.now();
      const content = `${MARKER}${state.collector.runTag}:${seq}:${sentAt.toFixed(3)}:${PADDING}`;
      await recordPost(state.posts, state.collector, seq, sentAt, async () => {
        try {
          const answer = await call("POST", base, token, { content });
          if (!ok(answer)) return failure("post", answer);
          const id = idOf(answer.body);
          if (id === undefined) return "post: answer without data.id";
          mine.push(id);
          return "ok";
        } catch (error) {
          return thrown("post", error);
        }
      });
    } else if (kind === "edit") {
      const id = mine[pick()]!;
      const content = `edited ${++edits}:${PADDING}`;
      await otherOp(state, "edit", () => call("PATCH", `${base}/${id}`, token, { content }));
    } else if (kind === "reaction") {
      const id = mine[pick()]!;
      const emoji = encodeURIComponent(EMOJI[Math.floor(random() * EMOJI.length)]!);
      await otherOp(state, "reaction", () => call("PUT", `${base}/${id}/reactions/${emoji}`, token));
    } else {
      // Out of the list before it is sent: never deleted twice, never touched afterwards.
      const index = pick();
      const id = mine[index]!;
      mine[index] = mine[mine.length - 1]!;
      mine.pop();
      await otherOp(state, "delete", () => call("DELETE", `${base}/${id}`, token));
    }
  }
}

export type KindRun = { attempted: number; ok: number; p50_ms: number | null; p99_ms: number | null };

export type LifecycleRun = {
  load: Load;
  /** 0: the warm-up. */
  run: number;
  receivers: number;
  concurrency: number;
  seconds: number;
  /** Successful requests (2xx) of every kind per second. */
  ops_per_s: number;
  ops: number;
  errors_total: number;
  op_p99_ms: number | null;
  post_p99_ms: number | null;
  delivery_p50_ms: number | null;
  delivery_p99_ms: number | null;
  deliveries_expected: number;
  deliveries_received: number;
  delivered_pct: number | null;
  /** Frames carrying an already-recorded post's marked content (repeats, later events about it). */
  duplicates: number;
  kinds: Record<OpKind, KindRun>;
  server_cpu_pct: number;
  bench_cpu_pct: number;
  other_cpu_pct: number;
  errors?: Record<string, number>;
};

const orNull = (sorted: ArrayLike<number>, p: number) => (sorted.length > 0 ? round(percentile(sorted, p), 1) : null);

let runCounter = 0;

async function measureLoad(
  load: Load,
  run: number,
  server: { url: string; pid: number },
  team: Team,
  receivers: Receiver[],
  seconds: number,
): Promise<LifecycleRun> {
  const collector = new Collector(`l${runCounter++}x${Date.now().toString(36)}`, receivers.length, MAX_POSTS);
  receivers.forEach((receiver, index) => {
    receiver.sink.collector = collector;
    receiver.sink.index = index;
  });
  const errors = new Map<string, number>();
  const kindStats = (): KindStats => ({ attempted: 0, ok: 0, latencies: [] });
  const state: RunState = {
    collector,
    errors,
    posts: { attempted: 0, accepted: 0, errors, postLatencies: [] },
    others: { edit: kindStats(), reaction: kindStats(), delete: kindStats() },
    nextSeq: 0,
  };
  const base = messagesUrl(server.url, team);
  const usage = startUsageWindow(server.pid);
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, (_, w) =>
      // Slots start at different turns of the cycle, so the edits and deletes do not all fall together.
      slot(state, load, team.senders[w % team.senders.length]!.token, base, (w * 7) % MIX.length, end),
    ),
  );
  const sendSeconds = (performance.now() - started) / 1000;
  const expected = state.posts.accepted * receivers.length;
  const drainEnd = performance.now() + DRAIN_SECONDS * 1000;
  while (collector.deliveries < expected && performance.now() < drainEnd) await sleep(20);
  await sleep(200); // repeats, if any
  const window = usage.finish();
  for (const receiver of receivers) receiver.sink.collector = undefined;

  const sorted = (values: number[]) => Float64Array.from(values).sort();
  const postLatencies = sorted(state.posts.postLatencies);
  const allLatencies = sorted([
    ...state.posts.postLatencies,
    ...Object.values(state.others).flatMap((stats) => stats.latencies),
  ]);
  const deliveries = collector.latencies.slice(0, collector.deliveries).sort();
  const kindRun = (attempted: number, okCount: number, latencies: Float64Array): KindRun => ({
    attempted,
    ok: okCount,
    p50_ms: orNull(latencies, 50),
    p99_ms: orNull(latencies, 99),
  });
  const kinds = {
    post: kindRun(state.posts.attempted, state.posts.accepted, postLatencies),
    edit: kindRun(state.others.edit.attempted, state.others.edit.ok, sorted(state.others.edit.latencies)),
    reaction: kindRun(
      state.others.reaction.attempted,
      state.others.reaction.ok,
      sorted(state.others.reaction.latencies),
    ),
    delete: kindRun(state.others.delete.attempted, state.others.delete.ok, sorted(state.others.delete.latencies)),
  };
  for (const text of collector.errors) bump(errors, `subscriber: ${text}`);
  if (collector.outOfRange > 0) errors.set("subscriber: unknown message", collector.outOfRange);
  const okOps = KINDS.reduce((sum, kind) => sum + kinds[kind].ok, 0);
  const attempted = KINDS.reduce((sum, kind) => sum + kinds[kind].attempted, 0);
  const received = collector.deliveredOfAccepted();
  return {
    load,
    run,
    receivers: receivers.length,
    concurrency: CONCURRENCY,
    seconds: round(sendSeconds, 1),
    ops_per_s: round(okOps / sendSeconds, 1),
    ops: okOps,
    errors_total: attempted - okOps,
    op_p99_ms: orNull(allLatencies, 99),
    post_p99_ms: orNull(postLatencies, 99),
    delivery_p50_ms: orNull(deliveries, 50),
    delivery_p99_ms: orNull(deliveries, 99),
    deliveries_expected: expected,
    deliveries_received: received,
    delivered_pct: expected > 0 ? round((received / expected) * 100, 2) : null,
    duplicates: collector.duplicates,
    kinds,
    server_cpu_pct: Math.round(window.serverCpuPct),
    bench_cpu_pct: Math.round(window.benchCpuPct),
    other_cpu_pct: Math.round(window.otherCpuPct),
    ...(errors.size > 0 ? { errors: Object.fromEntries(errors) } : {}),
  };
}

export type LoadSummary = {
  load: Load;
  runs: number;
  ops_per_s: number | null;
  op_p99_ms: number | null;
  post_p99_ms: number | null;
  delivery_p99_ms: number | null;
  delivered_pct: number | null;
  /** This load's median ops/s over posts alone's. */
  ratio_vs_posts: number | null;
  /** Failed requests, summed over the runs. */
  errors: number;
};

export type KindSummary = {
  load: Load;
  kind: OpKind;
  /** Summed over the runs. */
  attempted: number;
  ok: number;
  /** Medians over the runs. */
  p50_ms: number | null;
  p99_ms: number | null;
  /** The most frequent error of this kind over the runs, with its count. */
  top_error: string | null;
};

function summarizeLoad(load: Load, runs: LifecycleRun[], postsOpsPerS: number | null): LoadSummary {
  const mine = runs.filter((run) => run.load === load);
  const med = (pick: (run: LifecycleRun) => number | null, digits = 1) => {
    const value = median(mine.flatMap((run) => (pick(run) === null ? [] : [pick(run)!])));
    return value === null ? null : round(value, digits);
  };
  const opsPerS = med((run) => run.ops_per_s);
  const base = load === "posts alone" ? opsPerS : postsOpsPerS;
  return {
    load,
    runs: mine.length,
    ops_per_s: opsPerS,
    op_p99_ms: med((run) => run.op_p99_ms),
    post_p99_ms: med((run) => run.post_p99_ms),
    delivery_p99_ms: med((run) => run.delivery_p99_ms),
    delivered_pct: med((run) => run.delivered_pct, 2),
    ratio_vs_posts: opsPerS !== null && base ? round(opsPerS / base, 3) : null,
    errors: mine.reduce((sum, run) => sum + run.errors_total, 0),
  };
}

function summarizeKinds(load: Load, runs: LifecycleRun[]): KindSummary[] {
  const mine = runs.filter((run) => run.load === load);
  return KINDS.filter((kind) => mine.some((run) => run.kinds[kind].attempted > 0)).map((kind) => {
    const errors = new Map<string, number>();
    for (const run of mine)
      for (const [text, count] of Object.entries(run.errors ?? {}))
        if (text.startsWith(`${kind}: `)) errors.set(text, (errors.get(text) ?? 0) + count);
    const top = [...errors].sort((a, b) => b[1] - a[1])[0];
    const med = (pick: (stats: KindRun) => number | null) => {
      const value = median(mine.flatMap((run) => (pick(run.kinds[kind]) === null ? [] : [pick(run.kinds[kind])!])));
      return value === null ? null : round(value, 1);
    };
    return {
      load,
      kind,
      attempted: mine.reduce((sum, run) => sum + run.kinds[kind].attempted, 0),
      ok: mine.reduce((sum, run) => sum + run.kinds[kind].ok, 0),
      p50_ms: med((stats) => stats.p50_ms),
      p99_ms: med((stats) => stats.p99_ms),
      top_error: top ? `${top[0]} (×${top[1]})` : null,
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Part 2: 60 racing PUTs of distinct emoji at one message

export type RaceResult = {
  puts: number;
  ok_200: number;
  unprocessable_422: number;
  /** 422 answers whose body has `errors.emoji` as a list. */
  well_formed_422: number;
  /** Any other outcome, by status (or "network error"). */
  other: Record<string, number>;
  /** Distinct reactions the message record shows afterwards (null: the record shows none, or unread). */
  stored_reactions: number | null;
  pass: boolean;
  error?: string;
};

async function raceReactions(baseUrl: string, team: Team): Promise<RaceResult> {
  const sender = team.senders[0]!;
  const base = messagesUrl(baseUrl, team);
  const result: RaceResult = {
    puts: RACE_EMOJI,
    ok_200: 0,
    unprocessable_422: 0,
    well_formed_422: 0,
    other: {},
    stored_reactions: null,
    pass: false,
  };
  let posted: Answer;
  try {
    posted = await call("POST", base, sender.token, { content: "the message every racing reaction goes to" });
  } catch (error) {
    return { ...result, error: thrown("post", error) };
  }
  const id = ok(posted) ? idOf(posted.body) : undefined;
  if (id === undefined) return { ...result, error: failure("post", posted) };
  const answers = await Promise.all(
    Array.from({ length: RACE_EMOJI }, (_, i) =>
      call("PUT", `${base}/${id}/reactions/e${i + 1}`, sender.token).catch(() => undefined),
    ),
  );
  const other = new Map<string, number>();
  for (const answer of answers) {
    if (answer === undefined) bump(other, "network error");
    else if (answer.status === 200) result.ok_200++;
    else if (answer.status === 422) {
      result.unprocessable_422++;
      const emoji = (parse(answer.body) as { errors?: { emoji?: unknown } } | undefined)?.errors?.emoji;
      if (Array.isArray(emoji)) result.well_formed_422++;
    } else bump(other, `HTTP ${answer.status}`);
  }
  result.other = Object.fromEntries(other);
  // Read the message back from the channel's newest page.
  try {
    const page = await call("GET", `${base}?limit=10`, sender.token);
    const data = (parse(page.body) as { data?: { id?: string }[] } | undefined)?.data;
    result.stored_reactions = reactionsOf(data?.find((message) => message.id === id));
  } catch {
    // stays null
  }
  result.pass =
    result.ok_200 === EMOJI_LIMIT &&
    result.unprocessable_422 === RACE_EMOJI - EMOJI_LIMIT &&
    (result.stored_reactions === null || result.stored_reactions === EMOJI_LIMIT);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Part 3: history pages with and without reactions

export type HistoryResult = {
  messages_per_channel: number;
  /** Messages posted into each channel (of messages_per_channel). */
  posted_plain: number;
  posted_with_reactions: number;
  reacted_messages: number;
  reactions_placed: number;
  reactions_attempted: number;
  requests: number;
  page_size: number;
  plain_median_ms: number | null;
  with_reactions_median_ms: number | null;
  plain_p90_ms: number | null;
  with_reactions_p90_ms: number | null;
  /** with / without reactions of the medians. */
  ratio: number | null;
  /** Messages in the last page of the reactions channel whose record shows reactions (null: none shows any). */
  reacted_in_page: number | null;
  errors?: Record<string, number>;
};

async function historyPages(baseUrl: string, team: Team, log: (line: string) => void): Promise<HistoryResult> {
  const errors = new Map<string, number>();
  const tag = Date.now().toString(36);
  const channel = async (name: string) => {
    const created = await api<{ data: { id: string } }>(
      baseUrl,
      "POST",
      `/api/v1/workspaces/${team.workspaceId}/channels`,
      team.owner.token,
      { name: `${name} ${tag}` },
    );
    for (const sender of team.senders)
      await api(
        baseUrl,
        "POST",
        `/api/v1/workspaces/${team.workspaceId}/channels/${created.data.id}/join`,
        sender.token,
      ).catch(() => bump(errors, "join (ignored)"));
    return messagesUrl(baseUrl, team, created.data.id);
  };
  const plain = await channel("History plain");
  const reacted = await channel("History reactions");
  const fill = async (base: string) => {
    const ids = await mapLimit(Array.from({ length: HISTORY_MESSAGES }), 8, async (_, i) => {
      const token = team.senders[i % team.senders.length]!.token;
      try {
        const answer = await call("POST", base, token, { content: `history ${i}:${PADDING}` });
        if (ok(answer)) return idOf(answer.body);
        bump(errors, `fill ${failure("post", answer)}`);
      } catch (error) {
        bump(errors, `fill ${thrown("post", error)}`);
      }
      return undefined;
    });
    return ids;
  };
  log(`lifecycle: history: posting ${HISTORY_MESSAGES} messages into each of two channels`);
  const plainIds = await fill(plain);
  const reactedIds = await fill(reacted);
  // Every fifth message: three reactions, each emoji from another sender.
  const targets = reactedIds.flatMap((id, i) => (i % 5 === 0 && id !== undefined ? [id] : []));
  const puts = targets.flatMap((id) =>
    EMOJI.map((emoji, k) => ({ id, emoji, token: team.senders[k % team.senders.length]!.token })),
  );
  log(`lifecycle: history: ${puts.length} reactions on ${targets.length} messages`);
  const placed = await mapLimit(puts, 8, async ({ id, emoji, token }) => {
    try {
      const answer = await call("PUT", `${reacted}/${id}/reactions/${encodeURIComponent(emoji)}`, token);
      if (ok(answer)) return true;
      bump(errors, `fill ${failure("reaction", answer)}`);
    } catch (error) {
      bump(errors, `fill ${thrown("reaction", error)}`);
    }
    return false;
  });

  const reader = team.senders[0]!.token;
  const latencies: Record<"plain" | "reacted", number[]> = { plain: [], reacted: [] };
  let lastReactedPage = "";
  const page = async (which: "plain" | "reacted", record: boolean) => {
    const started = performance.now();
    try {
      const answer = await call("GET", `${which === "plain" ? plain : reacted}?limit=${HISTORY_PAGE}`, reader);
      const ms = performance.now() - started;
      if (!ok(answer)) {
        bump(errors, failure(`history ${which}`, answer));
        return;
      }
      if (record) latencies[which].push(ms);
      if (which === "reacted") lastReactedPage = answer.body;
    } catch (error) {
      bump(errors, thrown(`history ${which}`, error));
    }
  };
  for (let i = 0; i < HISTORY_WARMUP; i++) for (const which of ["plain", "reacted"] as const) await page(which, false);
  log(`lifecycle: history: ${HISTORY_REQUESTS} pages of ${HISTORY_PAGE} from each channel, alternating`);
  for (let i = 0; i < HISTORY_REQUESTS; i++) {
    const order = i % 2 === 0 ? (["plain", "reacted"] as const) : (["reacted", "plain"] as const);
    for (const which of order) await page(which, true);
  }
  const data = (parse(lastReactedPage) as { data?: unknown[] } | undefined)?.data ?? [];
  const shown = data.map(reactionsOf);
  const plainMedian = median(latencies.plain);
  const reactedMedian = median(latencies.reacted);
  const p90 = (values: number[]) => orNull(Float64Array.from(values).sort(), 90);
  return {
    messages_per_channel: HISTORY_MESSAGES,
    posted_plain: plainIds.filter((id) => id !== undefined).length,
    posted_with_reactions: reactedIds.filter((id) => id !== undefined).length,
    reacted_messages: targets.length,
    reactions_placed: placed.filter(Boolean).length,
    reactions_attempted: puts.length,
    requests: HISTORY_REQUESTS,
    page_size: HISTORY_PAGE,
    plain_median_ms: plainMedian === null ? null : round(plainMedian, 2),
    with_reactions_median_ms: reactedMedian === null ? null : round(reactedMedian, 2),
    plain_p90_ms: p90(latencies.plain),
    with_reactions_p90_ms: p90(latencies.reacted),
    ratio: plainMedian && reactedMedian !== null ? round(reactedMedian / plainMedian, 3) : null,
    reacted_in_page: shown.every((count) => count === null) ? null : shown.filter((count) => (count ?? 0) > 0).length,
    ...(errors.size > 0 ? { errors: Object.fromEntries(errors) } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// The section

export type LifecycleResult = {
  settings: {
    receivers: number;
    senders: number;
    concurrency: number;
    seconds: number;
    warmup_seconds: number;
    drain_seconds: number;
    runs: number;
    mix: string;
  };
  summary: LoadSummary[];
  kinds: KindSummary[];
  /** mixed / posts alone of ops/s, per pair of runs in the order measured. */
  pair_ratios: (number | null)[];
  race: RaceResult;
  history: HistoryResult;
  /** null: not judged, for the reason in `not_judged` (failed requests would make the comparison meaningless). */
  targets: {
    mixed_at_least_90pct: boolean | null;
    race_50_ok_10_refused: boolean;
    history_within_1_2: boolean | null;
    not_judged: { mixed?: string; history?: string };
  };
  warmup: LifecycleRun[];
  runs: LifecycleRun[];
};

function describe(row: LifecycleRun): string {
  const errors = Object.entries(row.errors ?? {})
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([text, count]) => `${text} ×${count}`)
    .join("; ");
  const mix = KINDS.filter((kind) => row.kinds[kind].attempted > 0)
    .map((kind) => `${kind} ${row.kinds[kind].ok}/${row.kinds[kind].attempted}`)
    .join(", ");
  return (
    `${row.ops_per_s} ops/s (${mix}), op p99 ${row.op_p99_ms ?? "-"} ms, post p99 ${row.post_p99_ms ?? "-"} ms, ` +
    `delivery p99 ${row.delivery_p99_ms ?? "-"} ms, delivered ${row.delivered_pct ?? "-"}%` +
    (errors ? `; errors: ${errors}` : "")
  );
}

export async function runLifecycle(log: (line: string) => void): Promise<LifecycleResult> {
  const server = await startBenchServer("lifecycle");
  let receivers: Receiver[] = [];
  try {
    log(`lifecycle: setting up ${RECEIVER_ACCOUNTS} receiver and ${SENDERS} sender accounts`);
    const team = await setupTeam(server.url, RECEIVER_ACCOUNTS, SENDERS);
    log(`lifecycle: opening ${RECEIVERS} subscribed WebSocket clients`);
    receivers = await openReceivers(server, team, RECEIVERS);
    await sleep(500);

    const loads: Load[] = ["posts alone", "mixed"];
    const warmup: LifecycleRun[] = [];
    for (const load of loads) {
      log(`lifecycle: warming up ${load} (${WARMUP_SECONDS} s)`);
      const row = await measureLoad(load, 0, server, team, receivers, WARMUP_SECONDS);
      log(`lifecycle: warm-up ${load}: ${describe(row)}`);
      warmup.push(row);
    }
    await sleep(1000);
    const runs: LifecycleRun[] = [];
    for (let run = 1; run <= RUNS; run++) {
      // posts, mixed | mixed, posts | ...: drift weighs on both alike.
      for (const load of run % 2 === 1 ? loads : [...loads].reverse()) {
        log(`lifecycle: ${load} run ${run}: ${CONCURRENCY} in flight for ${SEND_SECONDS} s, ${RECEIVERS} subscribers`);
        const row = await measureLoad(load, run, server, team, receivers, SEND_SECONDS);
        log(`lifecycle: ${load} run ${run}: ${describe(row)}`);
        runs.push(row);
        await sleep(500);
      }
    }
    for (const receiver of receivers) receiver.close();
    receivers = [];
    await sleep(500);

    log(`lifecycle: ${RACE_EMOJI} racing reaction PUTs at one message`);
    const race = await raceReactions(server.url, team);
    log(
      `lifecycle: race: ${race.ok_200} × 200, ${race.unprocessable_422} × 422` +
        (Object.keys(race.other).length > 0 ? `, other ${JSON.stringify(race.other)}` : "") +
        (race.error ? `; ${race.error}` : ""),
    );
    const history = await historyPages(server.url, team, log);

    const posts = summarizeLoad("posts alone", runs, null);
    const mixed = summarizeLoad("mixed", runs, posts.ops_per_s);
    const pairRatios = Array.from({ length: RUNS }, (_, i) => {
      const of = (load: Load) => runs.find((row) => row.run === i + 1 && row.load === load)?.ops_per_s;
      const [a, b] = [of("mixed"), of("posts alone")];
      return a !== undefined && b ? round(a / b, 3) : null;
    });
    const failed = posts.errors + mixed.errors;
    const mixedWhyNot =
      mixed.ratio_vs_posts === null
        ? "no throughput measured"
        : failed > 0
          ? `${failed} requests failed (posts alone ${posts.errors}, mixed ${mixed.errors})`
          : undefined;
    const historyFailed = Object.entries(history.errors ?? {})
      .filter(([text]) => !text.startsWith("join"))
      .reduce((sum, [, count]) => sum + count, 0);
    const historyWhyNot =
      history.ratio === null
        ? "no page latency measured"
        : historyFailed > 0
          ? `${historyFailed} requests failed (reactions placed ${history.reactions_placed}/${history.reactions_attempted})`
          : undefined;
    return {
      settings: {
        receivers: RECEIVERS,
        senders: SENDERS,
        concurrency: CONCURRENCY,
        seconds: SEND_SECONDS,
        warmup_seconds: WARMUP_SECONDS,
        drain_seconds: DRAIN_SECONDS,
        runs: RUNS,
        mix: "70% posts, 15% edits, 10% reactions, 5% deletes",
      },
      summary: [posts, mixed],
      kinds: [...summarizeKinds("posts alone", runs), ...summarizeKinds("mixed", runs)],
      pair_ratios: pairRatios,
      race,
      history,
      targets: {
        mixed_at_least_90pct: mixedWhyNot ? null : mixed.ratio_vs_posts! >= TARGET_MIXED_SHARE,
        race_50_ok_10_refused: race.pass,
        history_within_1_2: historyWhyNot ? null : history.ratio! <= TARGET_HISTORY_RATIO,
        not_judged: {
          ...(mixedWhyNot && { mixed: mixedWhyNot }),
          ...(historyWhyNot && { history: historyWhyNot }),
        },
      },
      warmup,
      runs,
    };
  } finally {
    for (const receiver of receivers) receiver.close();
    await sleep(500);
    await server.stop();
  }
}
