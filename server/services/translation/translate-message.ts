// The translation worker's work (docs/translation.md): every language still pending for a
// message is translated, its prose only (protect.ts), each distinct text once (the cache, then
// the provider in batches), and stored with a `translation.ready` event for the readers of that
// language. The jobs that arrive while others are being translated go together
// (server/jobs/batcher.ts): one read, one cache lookup, one provider request per language pair for
// all their texts (up to the provider's batch size), one transaction. A language the provider
// could not do now (429, 5xx, a timeout) is tried again by a delayed job of that message; after
// the last try, or at once for a refusal trying again cannot fix, it is stored as "failed"
// (with its event), so nothing stays pending.
import { createHash } from "node:crypto";
import { inArray, sql } from "drizzle-orm";
import { rowsOf, type Transaction } from "../../../db/client.ts";
import {
  messageTranslations,
  messages,
  translationCache,
  type Language,
  type Message,
  type TranslationState,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import type { EventEntry } from "../../events/streams.ts";
import { writeWithEvents } from "../../events/streams.ts";
import { retryDelayMs, type Backoff } from "../../jobs/backoff.ts";
import { enqueueJob } from "../../jobs/outbox.ts";
import { mapLimit } from "../../provider-http.ts";
import { messageStream } from "../../policy/places.ts";
import { proseOf, reassemble, splitForTranslation } from "./protect.ts";
import { TranslationProviderError, type Translated, type TranslationProvider } from "./provider.ts";
import { translationJobId, translationJobs, type TranslationJobPayload } from "./jobs.ts";

/** Tries per language, the first included: with the backoff below, about an hour of outage. */
export const MAX_TRANSLATION_ATTEMPTS = 16;
export const TRANSLATION_BACKOFF: Backoff = {
  firstMs: 1_000,
  longestMs: 10 * 60_000,
  longestRetryAfterMs: 60 * 60_000,
};
/** Provider requests of one batch at once. */
const REQUESTS_AT_ONCE = 4;
/** Cache entries unused this long are pruned. */
export const TRANSLATION_CACHE_DAYS = 30;

type Outcome =
  /** Every prose text with its translation; `cached`: those the cache answered. */
  | { language: Language; status: "done"; translations: Map<string, string>; cached: Set<string> }
  | { language: Language; status: "not_needed" }
  | { language: Language; status: "retry"; reason: string; retryAfterMs?: number }
  | { language: Language; status: "failed"; reason: string };

/** The cache key of a text in a language pair: a hash, so the key is short whatever the text. */
export function cacheKey(source: Language | null, target: Language, text: string): string {
  return createHash("sha256")
    .update(`${source ?? "auto"}\n${target}\n${text}`)
    .digest("base64url");
}

/**
 * Messages translated together at most, and batches of one process at once: jobs that arrive
 * while two batches are out wait and go together (server/jobs/batcher.ts).
 */
export const TRANSLATION_BATCH = { batchSize: 50, atOnce: 2 };

/** A message of the batch and what it still needs. */
type Work = {
  payload: TranslationJobPayload;
  message: Message;
  pending: Language[];
  pieces: ReturnType<typeof splitForTranslation>;
  /** Its prose, each text once. */
  texts: string[];
};

/** Per process, the batches running, by message id (see `oneBatchPerMessage`). */
const batchesRunning = new WeakMap<Deps, Map<string, Promise<void>>>();

/**
 * Runs `work` for the messages `ids` once no other batch of this process is working on any of
 * them: two jobs of one message that land in two batches running side by side (the post's job
 * and one a reader asked for a moment later) would otherwise both find its languages pending
 * and ask the provider twice. The later one then finds them done.
 */
async function oneBatchPerMessage(deps: Deps, ids: string[], work: () => Promise<void>): Promise<void> {
  let running = batchesRunning.get(deps);
  if (!running) batchesRunning.set(deps, (running = new Map()));
  for (;;) {
    const busy = ids.flatMap((id) => running.get(id) ?? []);
    if (busy.length === 0) break;
    await Promise.allSettled(busy);
  }
  const done = work();
  const settled = done.then(
    () => {},
    () => {},
  );
  for (const id of ids) running.set(id, settled);
  try {
    await done;
  } finally {
    for (const id of ids) if (running.get(id) === settled) running.delete(id);
  }
}

/** The messages of `payloads` (jobs), each translated into every language still pending for it. */
export async function translateMessages(
  deps: Deps,
  provider: TranslationProvider,
  payloads: TranslationJobPayload[],
): Promise<void> {
  // Two jobs of one message (its own and one a reader asked for) do its work once.
  const jobs = new Map<string, TranslationJobPayload>();
  for (const payload of payloads) if (!jobs.has(payload.messageId)) jobs.set(payload.messageId, payload);
  await oneBatchPerMessage(deps, [...jobs.keys()], () => translateBatch(deps, provider, jobs));
}

async function translateBatch(
  deps: Deps,
  provider: TranslationProvider,
  jobs: Map<string, TranslationJobPayload>,
): Promise<void> {
  // The messages and the languages still pending for each, in one round trip.
  const found = await deps.db
    .select({
      message: messages,
      pending: sql<Language[] | null>`(select array_agg(${messageTranslations.language}) from ${messageTranslations}
        where ${messageTranslations.messageId} = ${messages.id} and ${messageTranslations.status} = 'pending')`,
    })
    .from(messages)
    .where(inArray(messages.id, [...jobs.keys()]));
  // A message gone with its channel or conversation took its rows along; one with none pending is done.
  const work: Work[] = found.flatMap(({ message, pending }) => {
    if (!pending?.length) return [];
    const pieces = splitForTranslation(message.content);
    return [{ payload: jobs.get(message.id)!, message, pending, pieces, texts: [...new Set(proseOf(pieces))] }];
  });
  if (work.length === 0) return;

  const cached = await cachedTranslations(deps, work);
  const outcomes = await translateAll(provider, work, cached);

  const results: StoredResult[] = [];
  const retrying: { work: Work; retries: Extract<Outcome, { status: "retry" }>[]; attempt: number }[] = [];
  for (const item of work) {
    const attempt = item.payload.attempt ?? 1;
    const retries = outcomes.get(item)!.flatMap((outcome) => (outcome.status === "retry" ? [outcome] : []));
    const retryNow = attempt < MAX_TRANSLATION_ATTEMPTS && retries.length > 0;
    if (retryNow) retrying.push({ work: item, retries, attempt });
    for (const outcome of outcomes.get(item)!) {
      if (outcome.status === "retry" && retryNow) continue;
      if (outcome.status === "failed" || outcome.status === "retry")
        deps.logger.warn(
          { messageId: item.message.id, language: outcome.language, reason: outcome.reason, attempt },
          "translation: gave up",
        );
      results.push({
        message: item.message,
        language: outcome.language,
        status: outcome.status === "retry" ? "failed" : outcome.status,
        content: outcome.status === "done" ? reassemble(item.pieces, outcome.translations) : null,
      });
    }
  }

  await writeWithEvents(deps, async (tx, emit) => {
    const now = deps.clock.now();
    await storeCache(tx, now, work, outcomes);
    // Only rows still pending: a second run of the same job (a retry after a crash) stores
    // and announces nothing twice.
    const stored = await storeResults(tx, now, results);
    for (const result of results) {
      if (result.status !== "not_needed" && stored.has(`${result.message.id} ${result.language}`))
        emit(translationReady(result.message, result.language, result.status, result.content));
    }
    for (const { work: item, retries, attempt } of retrying) {
      const next = {
        messageId: item.message.id,
        ...(item.payload.language && { language: item.payload.language }),
        attempt: attempt + 1,
      };
      const retryAfters = retries.flatMap((retry) => (retry.retryAfterMs === undefined ? [] : [retry.retryAfterMs]));
      const delayMs = retryDelayMs(
        TRANSLATION_BACKOFF,
        attempt + 1,
        retryAfters.length ? Math.max(...retryAfters) : undefined,
      );
      await enqueueJob(tx, now, translationJobs.message, next, { jobId: translationJobId(next), delayMs });
      deps.logger.info(
        {
          messageId: item.message.id,
          languages: retries.map((retry) => retry.language),
          attempt: attempt + 1,
          delayMs,
          reason: retries[0]!.reason,
        },
        "translation: will try again",
      );
    }
  });
}

/** The cache's translations of every text of `work` into each of its pending languages (key → content), in one lookup. */
async function cachedTranslations(deps: Deps, work: Work[]): Promise<Map<string, string>> {
  const keys = new Set<string>();
  for (const item of work)
    for (const language of item.pending)
      for (const text of item.texts) keys.add(cacheKey(item.message.language, language, text));
  if (keys.size === 0) return new Map();
  const rows = await deps.db
    .select({ key: translationCache.key, content: translationCache.content })
    .from(translationCache)
    .where(inArray(translationCache.key, [...keys]));
  return new Map(rows.map((row) => [row.key, row.content]));
}

/**
 * Every pending language of every message: what the cache had, the rest from the provider.
 * The texts of all messages with the same source and target language go together, each
 * distinct text once, in requests of the provider's batch size.
 */
async function translateAll(
  provider: TranslationProvider,
  work: Work[],
  cached: Map<string, string>,
): Promise<Map<Work, Outcome[]>> {
  type Pair = {
    source: Language | null;
    target: Language;
    missing: Set<string>;
    /** Per text, the provider's result or the error its request failed with. */
    answers: Map<string, unknown>;
  };
  const pairs = new Map<string, Pair>();
  const asks: { item: Work; language: Language; pair: Pair; translations: Map<string, string>; missing: string[] }[] =
    [];
  for (const item of work) {
    for (const language of item.pending) {
      const key = `${item.message.language ?? "auto"} ${language}`;
      let pair = pairs.get(key);
      if (!pair) {
        pair = { source: item.message.language, target: language, missing: new Set(), answers: new Map() };
        pairs.set(key, pair);
      }
      const translations = new Map<string, string>();
      const missing: string[] = [];
      for (const text of item.texts) {
        const hit = cached.get(cacheKey(item.message.language, language, text));
        if (hit === undefined) missing.push(text);
        else translations.set(text, hit);
      }
      missing.forEach((text) => pair.missing.add(text));
      asks.push({ item, language, pair, translations, missing });
    }
  }

  const requests = [...pairs.values()].flatMap((pair) => {
    const texts = [...pair.missing];
    const chunks: { pair: Pair; texts: string[] }[] = [];
    for (let at = 0; at < texts.length; at += provider.batchSize)
      chunks.push({ pair, texts: texts.slice(at, at + provider.batchSize) });
    return chunks;
  });
  await mapLimit(requests, REQUESTS_AT_ONCE, async ({ pair, texts }) => {
    try {
      const results = await provider.translate({ texts, target: pair.target, source: pair.source });
      texts.forEach((text, index) => pair.answers.set(text, results[index]!));
    } catch (error) {
      texts.forEach((text) => pair.answers.set(text, error));
    }
  });

  const outcomes = new Map<Work, Outcome[]>(work.map((item) => [item, []]));
  for (const { item, language, pair, translations, missing } of asks) {
    outcomes.get(item)!.push(outcomeOf(item.message, language, pair.answers, translations, missing));
  }
  return outcomes;
}

/** One language of one message, from the cache's and the provider's answers. */
function outcomeOf(
  message: Message,
  language: Language,
  answers: Map<string, unknown>,
  translations: Map<string, string>,
  missing: string[],
): Outcome {
  const cached = new Set(translations.keys());
  const error = missing.map((text) => answers.get(text)).find((answer) => !isTranslated(answer));
  if (error !== undefined) {
    if (error instanceof TranslationProviderError && !error.retryable)
      return { language, status: "failed", reason: error.message };
    const reason = error instanceof Error ? error.message : "translation failed";
    return error instanceof TranslationProviderError && error.retryAfterMs !== undefined
      ? { language, status: "retry", reason, retryAfterMs: error.retryAfterMs }
      : { language, status: "retry", reason };
  }
  // A message of unknown language (a bot's) that the provider finds already in the reader's.
  const first = missing.length > 0 ? (answers.get(missing[0]!) as Translated) : undefined;
  if (message.language === null && first?.detectedSource === language) return { language, status: "not_needed" };
  for (const text of missing) translations.set(text, (answers.get(text) as Translated).text);
  return { language, status: "done", translations, cached };
}

function isTranslated(answer: unknown): answer is Translated {
  return typeof answer === "object" && answer !== null && "text" in answer && !(answer instanceof Error);
}

type StoredResult = {
  message: Message;
  language: Language;
  status: Exclude<TranslationState, "pending">;
  content: string | null;
};

/**
 * Every result in one statement, on rows still pending of a message whose text is still the one
 * translated (an edit meanwhile asked for a translation of its own text, which the edit's job
 * stores); resolves with the `<message id> <language>` stored.
 */
async function storeResults(tx: Transaction, now: Date, results: StoredResult[]): Promise<Set<string>> {
  if (results.length === 0) return new Set();
  const values = sql.join(
    results.map(
      (result) =>
        sql`(${result.message.id}, ${result.language}, ${result.status}, ${result.content}::text, ${result.message.content}::text)`,
    ),
    sql`, `,
  );
  const stored = await tx.execute(sql`
    update ${messageTranslations} set status = results.status, content = results.content,
      updated_at = ${now.toISOString()}::timestamptz
    from (values ${values}) as results (message_id, language, status, content, source)
    where ${messageTranslations.messageId} = results.message_id
      and ${messageTranslations.language} = results.language
      and ${messageTranslations.status} = 'pending'
      and exists (select 1 from ${messages} m where m.id = results.message_id and m.content = results.source)
    returning ${messageTranslations.messageId} as message_id, ${messageTranslations.language} as language`);
  return new Set(
    rowsOf<{ message_id: string; language: Language }>(stored).map((row) => `${row.message_id} ${row.language}`),
  );
}

/** What the provider translated goes into the cache; what the cache answered is marked used. */
async function storeCache(tx: Transaction, now: Date, work: Work[], outcomes: Map<Work, Outcome[]>): Promise<void> {
  const rows = new Map<string, { key: string; content: string; usedAt: Date }>();
  const used = new Set<string>();
  for (const item of work) {
    for (const outcome of outcomes.get(item)!) {
      if (outcome.status !== "done") continue;
      for (const [text, content] of outcome.translations) {
        const key = cacheKey(item.message.language, outcome.language, text);
        if (outcome.cached.has(text)) used.add(key);
        else rows.set(key, { key, content, usedAt: now });
      }
    }
  }
  if (rows.size > 0)
    await tx
      .insert(translationCache)
      .values([...rows.values()])
      .onConflictDoNothing();
  if (used.size > 0)
    await tx
      .update(translationCache)
      .set({ usedAt: now })
      .where(inArray(translationCache.key, [...used]));
}

function translationReady(
  message: Message,
  language: Language,
  status: "done" | "failed",
  content: string | null,
): EventEntry {
  return {
    ...messageStream(message),
    type: "translation.ready",
    data: { message_id: message.id, language, status, content },
  };
}

/** Drops cache entries unused for TRANSLATION_CACHE_DAYS. */
export async function pruneTranslationCache(deps: Deps): Promise<void> {
  const before = new Date(deps.clock.now().getTime() - TRANSLATION_CACHE_DAYS * 24 * 3600_000);
  await deps.db.delete(translationCache).where(sql`${translationCache.usedAt} < ${before.toISOString()}::timestamptz`);
}
