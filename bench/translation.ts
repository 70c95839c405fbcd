// Translation: one channel (#general) of BENCH_TRANSLATION_READERS readers (30) besides the poster,
// whose language is en; the readers read en, ja and zh-CN in turn (a third each), so every
// message is translated twice: into ja and into zh-CN. The provider is a fake LibreTranslate in
// this process (test/helpers/translation.ts) that answers after BENCH_TRANSLATION_DELAY_MS (50).
// One live subscriber per reader language (the typed client, messages.onChannel) records when
// each `translation.ready` reached it; the en one should get none.
//
// The same open-loop posting load (BENCH_TRANSLATION_RATE messages/s, 100, for BENCH_SECONDS, 10)
// runs twice, each against a server of its own: first with TRANSLATION_PROVIDER=none
// ("translation off"), then with TRANSLATION_PROVIDER=libretranslate pointing at the fake
// ("translation on"). Every message's text is unique (a counter in it), so the translation
// cache never answers and each translation is a provider call. Measured: every POST's latency;
// with translation on, per message and language the time from the POST's start until its
// translation.ready reached the subscriber of that language; the provider requests (and texts)
// per message.
//
// BENCH_TRANSLATION_WORKER=process (with REDIS_URL) runs the queues in a worker process of their own.
//
// The targets: post→translation.ready p99 under 500 ms, post p99 not raised by more than 10%.
import WebSocket from "ws";
import { createChatClient, type ChatClient } from "@chat-service/client";
import type { Language } from "../db/schema/index.ts";
import { startFakeLibreTranslate, type FakeTranslator } from "../test/helpers/translation.ts";
import { setupTeam } from "./fanout.ts";
import {
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

const READERS = Math.min(3000, Math.floor(envNumber("BENCH_TRANSLATION_READERS", 30)));
const RATE = Math.min(1000, envNumber("BENCH_TRANSLATION_RATE", 100));
const SEND_SECONDS = Math.min(600, envNumber("BENCH_SECONDS", 10));
const DELAY_MS = Math.min(10_000, envNumber("BENCH_TRANSLATION_DELAY_MS", 50));
/** After a run's last post, how long to wait at most for its translations. */
const DRAIN_SECONDS = Math.min(600, envNumber("BENCH_DRAIN_SECONDS", 20));
/** Before each run, wait up to this long for other work on the machine to stop (0: don't). */
const QUIET_WAIT_SECONDS = Number(process.env.BENCH_QUIET_WAIT ?? 0) || 0;
/** Open loop: never more posts than this in flight; beyond it a due post is skipped (and counted). */
const MAX_IN_FLIGHT = 64;
const WARM_UP_MESSAGES = 20;
/** BENCH_TRANSLATION_WORKER=process (needs REDIS_URL): `npm run worker` beside a WORKERS=off server. */
const WORKER_PROCESS = process.env.BENCH_TRANSLATION_WORKER === "process";

const POSTER_LANGUAGE: Language = "en";
/** The readers' languages, assigned in turn; all but the poster's are translated into. */
const READER_LANGUAGES: Language[] = ["en", "ja", "zh-CN"];
const TRANSLATED: Language[] = READER_LANGUAGES.filter((language) => language !== POSTER_LANGUAGE);

// ---------------------------------------------------------------------------------------------
// The team

type Account = { id: number; token: string; language: Language };
type Team = { workspaceId: string; channelId: string; poster: Account; readers: Account[] };

const readerLanguage = (index: number) => READER_LANGUAGES[index % READER_LANGUAGES.length]!;

/** The poster owns a workspace; readers join it by invite (landing in #general), languages in turn. */
async function setupTranslationTeam(baseUrl: string): Promise<Team> {
  const team = await setupTeam(baseUrl, READERS, 0, { owner: POSTER_LANGUAGE, receiver: readerLanguage });
  return {
    workspaceId: team.workspaceId,
    channelId: team.channelId,
    poster: { ...team.owner, language: POSTER_LANGUAGE },
    readers: team.receivers.map((account, index) => ({ ...account, language: readerLanguage(index) })),
  };
}

// ---------------------------------------------------------------------------------------------
// Subscribers: one per reader language, recording translation.ready

type Ready = { at: number; status: "done" | "failed"; content: string | null };

class Subscriber {
  /** translation.ready per message id, the first one (later ones are counted as duplicates). */
  readonly ready = new Map<string, Ready>();
  duplicates = 0;
  /** translation.ready events in a language other than this subscriber's. */
  wrongLanguage = 0;
  errors: string[] = [];

  private constructor(
    readonly language: Language,
    private readonly client: ChatClient,
    private subscription: { unsubscribe(): void } | undefined,
  ) {}

  static open(server: BenchServer, team: Team, reader: Account): Promise<Subscriber> {
    const client = createChatClient({
      url: server.url,
      token: reader.token,
      webSocket: { WebSocket },
    });
    const subscriber = new Subscriber(reader.language, client, undefined);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("translation: a subscription did not start")), 60_000);
      let started = false;
      subscriber.subscription = client.messages.onChannel.subscribe(
        { workspace_id: team.workspaceId, channel_id: team.channelId },
        {
          onStarted: () => {
            started = true;
            clearTimeout(timer);
            resolve(subscriber);
          },
          onData: (tracked) => {
            const event = tracked.data;
            if (event.type !== "translation.ready") return;
            const at = performance.now();
            if (event.data.language !== subscriber.language) {
              subscriber.wrongLanguage++;
              return;
            }
            if (subscriber.ready.has(event.data.message_id)) {
              subscriber.duplicates++;
              return;
            }
            subscriber.ready.set(event.data.message_id, { at, status: event.data.status, content: event.data.content });
          },
          onError: (error) => {
            clearTimeout(timer);
            if (started) subscriber.errors.push(error.message);
            else reject(error);
          },
        },
      );
    });
  }

  reset() {
    this.ready.clear();
    this.duplicates = 0;
    this.wrongLanguage = 0;
    this.errors = [];
  }

  close() {
    this.subscription?.unsubscribe();
    this.client.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Posting

type Post = { id: string; content: string; startedAt: number; latencyMs: number };
type PostStats = { posts: Post[]; errors: Map<string, number>; skipped: number };

function poster(server: BenchServer, team: Team, tag: string, stats: PostStats) {
  const url = new URL(`${server.url}/api/v1/workspaces/${team.workspaceId}/channels/${team.channelId}/messages`);
  return async (seq: number): Promise<void> => {
    const startedAt = performance.now();
    // Unique per run and message: the translation cache must not answer.
    const content = `translation bench ${tag} ${seq}: the quick brown fox jumps over the lazy dog`;
    let outcome: string;
    let id: string | undefined;
    try {
      const answer = await postJson(url, team.poster.token, JSON.stringify({ content }), { readBody: true });
      if (answer.status === 201) {
        try {
          id = (JSON.parse(answer.body ?? "") as { data?: { id?: string } }).data?.id;
        } catch {
          // counted below
        }
      }
      outcome = answer.status === 201 && id ? "ok" : `HTTP ${answer.status}`;
    } catch (error) {
      outcome = (error as Error).name === "TimeoutError" ? "timeout" : "network error";
    }
    if (outcome !== "ok" || !id) {
      stats.errors.set(outcome, (stats.errors.get(outcome) ?? 0) + 1);
      return;
    }
    stats.posts.push({ id, content, startedAt, latencyMs: performance.now() - startedAt });
  };
}

// ---------------------------------------------------------------------------------------------
// A run

export type TranslationReadyRow = {
  language: string;
  expected: number;
  received: number;
  failed: number;
  /** "done" whose content is not the fake's `[<language>] <text>`. */
  wrong_content: number;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
  max_ms: number | null;
};

export type TranslationRow = {
  phase: "translation off" | "translation on";
  readers: number;
  rate_per_s: number;
  seconds: number;
  posts: number;
  post_errors: number;
  skipped: number;
  post_p50_ms: number;
  post_p95_ms: number;
  post_p99_ms: number;
  post_max_ms: number;
  /** With translation on: post → translation.ready, per translated language and "all". */
  ready: TranslationReadyRow[];
  translations_expected: number;
  translations_received: number;
  /** translation.ready that reached a subscriber of another language, or twice. */
  wrong_language_events: number;
  duplicate_events: number;
  provider_requests: number;
  provider_requests_per_message: number | null;
  provider_texts_per_request: number | null;
  server_cpu_pct: number;
  stores_cpu_pct: number;
  bench_cpu_pct: number;
  other_cpu_pct: number;
  server_rss_peak_mib: number;
  errors?: Record<string, number>;
};

const orNull = (sorted: number[], p: number) => (sorted.length > 0 ? round(percentile(sorted, p), 1) : null);

async function run(
  phase: TranslationRow["phase"],
  server: BenchServer,
  team: Team,
  subscribers: Subscriber[],
  fake: FakeTranslator,
): Promise<TranslationRow> {
  const translating = phase === "translation on";
  const tag = `r${Date.now().toString(36)}`;
  for (const subscriber of subscribers) subscriber.reset();
  const requestsBefore = fake.requests.length;
  const stats: PostStats = { posts: [], errors: new Map(), skipped: 0 };
  const usage = startUsageWindow(server.pid);
  const seconds = await postAtRate(poster(server, team, tag, stats), {
    rate: RATE,
    seconds: SEND_SECONDS,
    maxMessages: Math.ceil(RATE * SEND_SECONDS),
    maxInFlight: MAX_IN_FLIGHT,
    onSkip: () => stats.skipped++,
  });

  // Every accepted message's translations, or the drain window; without translation, a moment.
  const translatedBy = subscribers.filter((subscriber) => TRANSLATED.includes(subscriber.language));
  const complete = () => translatedBy.every((subscriber) => stats.posts.every((post) => subscriber.ready.has(post.id)));
  const drainEnd = performance.now() + (translating ? DRAIN_SECONDS * 1000 : 1000);
  while (performance.now() < drainEnd && !(translating ? complete() : false)) await sleep(20);
  // A little longer for duplicates or events in the wrong language.
  await sleep(500);
  const window = usage.finish();

  const postLatencies = stats.posts.map((post) => post.latencyMs).sort((a, b) => a - b);
  const ready: TranslationReadyRow[] = [];
  const all: number[] = [];
  let allFailed = 0;
  let allWrong = 0;
  if (translating) {
    for (const subscriber of translatedBy) {
      const latencies: number[] = [];
      let failed = 0;
      let wrong = 0;
      for (const post of stats.posts) {
        const event = subscriber.ready.get(post.id);
        if (!event) continue;
        latencies.push(event.at - post.startedAt);
        if (event.status === "failed") failed++;
        else if (event.content !== `[${subscriber.language}] ${post.content}`) wrong++;
      }
      latencies.sort((a, b) => a - b);
      all.push(...latencies);
      allFailed += failed;
      allWrong += wrong;
      ready.push({
        language: subscriber.language,
        expected: stats.posts.length,
        received: latencies.length,
        failed,
        wrong_content: wrong,
        p50_ms: orNull(latencies, 50),
        p95_ms: orNull(latencies, 95),
        p99_ms: orNull(latencies, 99),
        max_ms: latencies.length > 0 ? round(latencies.at(-1)!, 1) : null,
      });
    }
    all.sort((a, b) => a - b);
    ready.push({
      language: "all",
      expected: stats.posts.length * translatedBy.length,
      received: all.length,
      failed: allFailed,
      wrong_content: allWrong,
      p50_ms: orNull(all, 50),
      p95_ms: orNull(all, 95),
      p99_ms: orNull(all, 99),
      max_ms: all.length > 0 ? round(all.at(-1)!, 1) : null,
    });
  }
  // Only this run's messages: warm-up requests came before `requestsBefore`.
  const ours = (texts: string[]) => texts.some((text) => text.includes(`translation bench ${tag} `));
  const requests = fake.requests.slice(requestsBefore).filter((request) => ours(request.texts));
  const texts = requests.reduce((sum, request) => sum + request.texts.length, 0);
  const errors: Record<string, number> = Object.fromEntries(stats.errors);
  for (const subscriber of subscribers)
    for (const text of subscriber.errors)
      errors[`subscriber ${subscriber.language}: ${text}`] =
        (errors[`subscriber ${subscriber.language}: ${text}`] ?? 0) + 1;
  return {
    phase,
    readers: READERS,
    rate_per_s: RATE,
    seconds: round(seconds, 1),
    posts: stats.posts.length,
    post_errors: [...stats.errors.values()].reduce((sum, count) => sum + count, 0),
    skipped: stats.skipped,
    post_p50_ms: round(percentile(postLatencies, 50), 1),
    post_p95_ms: round(percentile(postLatencies, 95), 1),
    post_p99_ms: round(percentile(postLatencies, 99), 1),
    post_max_ms: round(postLatencies.at(-1) ?? 0, 1),
    ready,
    translations_expected: translating ? stats.posts.length * translatedBy.length : 0,
    translations_received: all.length,
    wrong_language_events: subscribers.reduce((sum, subscriber) => sum + subscriber.wrongLanguage, 0),
    duplicate_events: subscribers.reduce((sum, subscriber) => sum + subscriber.duplicates, 0),
    provider_requests: requests.length,
    provider_requests_per_message: stats.posts.length > 0 ? round(requests.length / stats.posts.length, 2) : null,
    provider_texts_per_request: requests.length > 0 ? round(texts / requests.length, 2) : null,
    server_cpu_pct: Math.round(window.serverCpuPct),
    stores_cpu_pct: Math.round(window.storesCpuPct),
    bench_cpu_pct: Math.round(window.benchCpuPct),
    other_cpu_pct: Math.round(window.otherCpuPct),
    server_rss_peak_mib: Math.round(window.rssPeak),
    ...(Object.keys(errors).length > 0 ? { errors } : {}),
  };
}

/** A server of its own for one phase: team, subscribers, warm-up, then the measured run. */
async function phase(
  name: TranslationRow["phase"],
  fake: FakeTranslator,
  log: (line: string) => void,
): Promise<TranslationRow> {
  const translating = name === "translation on";
  const server = await startBenchServer(translating ? "translation-on" : "translation-off", {
    env: translating
      ? { TRANSLATION_PROVIDER: "libretranslate", TRANSLATION_URL: fake.url }
      : { TRANSLATION_PROVIDER: "none" },
    workerProcess: WORKER_PROCESS,
  });
  if (WORKER_PROCESS) log("translation: the queues run in a worker process of their own (WORKERS=off on the server)");
  const subscribers: Subscriber[] = [];
  try {
    log(`translation: ${name}: registering ${READERS} readers (${READER_LANGUAGES.join(", ")}) and a poster`);
    const team = await setupTranslationTeam(server.url);
    for (const language of READER_LANGUAGES) {
      const reader = team.readers.find((account) => account.language === language);
      if (reader) subscribers.push(await Subscriber.open(server, team, reader));
    }

    // Warm-up: the posting path (and, when on, the translation job) before measuring.
    const warm: PostStats = { posts: [], errors: new Map(), skipped: 0 };
    const warmPost = poster(server, team, `warm${Date.now().toString(36)}`, warm);
    for (let seq = 0; seq < WARM_UP_MESSAGES; seq++) await warmPost(seq);
    const warmEnd = performance.now() + 15_000;
    const translatedBy = subscribers.filter((subscriber) => TRANSLATED.includes(subscriber.language));
    while (
      translating &&
      performance.now() < warmEnd &&
      !translatedBy.every((subscriber) => warm.posts.every((post) => subscriber.ready.has(post.id)))
    )
      await sleep(50);
    await sleep(1000);

    if (QUIET_WAIT_SECONDS > 0) {
      const busy = await waitForQuietMachine(QUIET_WAIT_SECONDS);
      if (busy >= 15)
        log(`translation: the machine is still ${Math.round(busy)}% busy with other work; measuring anyway`);
    }
    log(`translation: ${name}, ${RATE}/s for ${SEND_SECONDS} s`);
    return await run(name, server, team, subscribers, fake);
  } finally {
    for (const subscriber of subscribers) subscriber.close();
    await sleep(200);
    await server.stop();
  }
}

export type TranslationResult = {
  readers: number;
  reader_languages: Language[];
  poster_language: Language;
  translated_languages: Language[];
  rate_per_s: number;
  provider_delay_ms: number;
  rows: TranslationRow[];
  /** How much translation raised post p99 (target: at most 10%). */
  post_p99_increase_pct: number | null;
  targets: { ready_p99_under_500ms: boolean; post_p99_within_10pct: boolean; all_translations_received: boolean };
};

export async function runTranslation(log: (line: string) => void): Promise<TranslationResult> {
  const fake = await startFakeLibreTranslate({ delayMs: DELAY_MS });
  try {
    const off = await phase("translation off", fake, log);
    const on = await phase("translation on", fake, log);
    const increase =
      off.post_p99_ms > 0 ? round(((on.post_p99_ms - off.post_p99_ms) / off.post_p99_ms) * 100, 1) : null;
    const overall = on.ready.find((row) => row.language === "all");
    return {
      readers: READERS,
      reader_languages: READER_LANGUAGES,
      poster_language: POSTER_LANGUAGE,
      translated_languages: TRANSLATED,
      rate_per_s: RATE,
      provider_delay_ms: DELAY_MS,
      rows: [off, on],
      post_p99_increase_pct: increase,
      targets: {
        ready_p99_under_500ms:
          overall !== undefined && overall.received === overall.expected && (overall.p99_ms ?? Infinity) < 500,
        post_p99_within_10pct: increase !== null && increase <= 10,
        all_translations_received:
          on.translations_received === on.translations_expected && on.translations_expected > 0,
      },
    };
  } finally {
    await fake.stop();
  }
}
