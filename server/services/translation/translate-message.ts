// The translation worker's work (docs/translation.md): every language still pending for a
// message is translated, its prose only (protect.ts), each distinct text once (the cache, then
// the provider in batches), and stored with a `translation.ready` event (one per message for the
// languages stored together; each reader is shown theirs). The jobs that arrive while others are
// being translated go together (server/jobs/batcher.ts): one read, one cache lookup, one provider
// request per language pair for all their texts (up to the provider's batch size), one statement
// storing it all. A language the provider could not do now (429, 5xx, a timeout) is tried again
// by a delayed job of that message; after the last try, or at once for a refusal trying again
// cannot fix, it is stored as "failed" (with its event), so nothing stays pending.
import { hash } from "node:crypto";
import { sql, type SQL } from "drizzle-orm";
import { arrayLiteral, arrayParam, prepared, runStatement, runStatementRows } from "../../../db/prepared.ts";
import {
  messageTranslations,
  messages,
  translationCache,
  type Language,
  type Message,
  type TranslationState,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { commitWithEvents, eventCte, eventPayload, EVENTS_WRITTEN, type EventEntry } from "../../events/streams.ts";
import { retryDelayMs, type Backoff } from "../../jobs/backoff.ts";
import { jobRowsInsert, type OutboxJob } from "../../jobs/outbox.ts";
import { mapLimit } from "../../provider-http.ts";
import { messageStream } from "../../policy/places.ts";
import { proseOf, reassemble, splitForTranslation } from "./protect.ts";
import { TranslationProviderError, type Translated, type TranslationProvider } from "./provider.ts";
import { MESSAGES_PER_JOB, translationJobId, translationJobs, type TranslationJobPayload } from "./jobs.ts";

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
  return hash("sha256", `${source ?? "auto"}\n${target}\n${text}`, "base64url");
}

/**
 * Messages translated together at most, and batches of one process at once: jobs that arrive
 * while two batches are out wait and go together (server/jobs/batcher.ts).
 */
export const TRANSLATION_BATCH = { batchSize: MESSAGES_PER_JOB, atOnce: 2 };

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

/** A batch's messages with the languages still pending for each: prepared once (every batch runs it). */
function prepareBatchRead(db: Deps["db"], name: string) {
  return db
    .select({
      message: messages,
      pending: sql<Language[] | null>`(select array_agg(${messageTranslations.language}) from ${messageTranslations}
        where ${messageTranslations.messageId} = ${messages.id} and ${messageTranslations.status} = 'pending')`,
    })
    .from(messages)
    .where(sql`${messages.id} = any(${sql.placeholder("ids")}::text[])`)
    .prepare(name);
}

async function translateBatch(
  deps: Deps,
  provider: TranslationProvider,
  jobs: Map<string, TranslationJobPayload>,
): Promise<void> {
  // The messages and the languages still pending for each, in one round trip.
  const found = await prepared(deps.db, "translation_batch_messages", prepareBatchRead).execute({
    ids: arrayLiteral([...jobs.keys()]),
  });
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

  const now = deps.clock.now();
  const retries = retrying.map(({ work: item, retries, attempt }) => {
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
    return { payload: next, jobId: translationJobId(next), delayMs };
  });
  await commitWithEvents(deps, () =>
    runStatement(deps.db, storeStatement(now, cacheRows(work, outcomes), results, retries)),
  );
}

/** The cache's translations of every text of `work` into each of its pending languages (key → content), in one lookup. */
async function cachedTranslations(deps: Deps, work: Work[]): Promise<Map<string, string>> {
  const keys = new Set<string>();
  for (const item of work)
    for (const language of item.pending)
      for (const text of item.texts) keys.add(cacheKey(item.message.language, language, text));
  if (keys.size === 0) return new Map();
  // Prepared: one text whatever the number of keys.
  const rows = await runStatementRows<{ key: string; content: string }>(
    deps.db,
    sql`select key, content from ${translationCache} where key = any(${arrayParam([...keys])}::text[])`,
  );
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

/** What a batch stores in the translation cache: what the provider translated (new rows), and the keys the cache answered (marked used). */
type CacheRows = { added: Map<string, string>; used: Set<string> };

function cacheRows(work: Work[], outcomes: Map<Work, Outcome[]>): CacheRows {
  const added = new Map<string, string>();
  const used = new Set<string>();
  for (const item of work) {
    for (const outcome of outcomes.get(item)!) {
      if (outcome.status !== "done") continue;
      for (const [text, content] of outcome.translations) {
        const key = cacheKey(item.message.language, outcome.language, text);
        if (outcome.cached.has(text)) used.add(key);
        else added.set(key, content);
      }
    }
  }
  return { added, used };
}

/**
 * A batch's whole write as one statement (prepared: its text never varies): the cache's new
 * rows and the keys it answered; every result, on rows still pending of a message whose text is
 * still the one translated (an edit meanwhile asked for a translation of its own text, which the
 * edit's job stores), so a second run of the same job (a retry after a crash) stores nothing
 * twice; one `translation.ready` event per message for the results it stored (not for "not
 * needed"): the first language's in `data`, the others' in `other_translations`, each subscriber
 * shown its own; and the jobs of the languages to try again.
 */
function storeStatement(
  now: Date,
  cache: CacheRows,
  results: StoredResult[],
  retries: OutboxJob<TranslationJobPayload>[],
): SQL {
  const at = now.toISOString();
  // Each stored result's event (none for "not needed"): its stream and payload.
  const events = results.map((result) =>
    result.status === "not_needed"
      ? null
      : translationReady(result.message, result.language, result.status, result.content),
  );
  return sql`
    with cache_added as (
      insert into ${translationCache} (key, content, used_at)
      select c.key, c.content, ${at}::timestamptz
      from unnest(${arrayParam([...cache.added.keys()])}::text[], ${arrayParam([...cache.added.values()])}::text[]) as c(key, content)
      on conflict do nothing
      returning 1),
    cache_used as (
      update ${translationCache} set used_at = ${at}::timestamptz
      where ${translationCache.key} = any(${arrayParam([...cache.used])}::text[])
      returning 1),
    results as (
      select * from unnest(
        ${arrayParam(results.map((result) => result.message.id))}::text[],
        ${arrayParam(results.map((result) => result.language))}::text[],
        ${arrayParam(results.map((result) => result.status))}::text[],
        ${arrayParam(results.map((result) => result.content))}::text[],
        ${arrayParam(results.map((result) => result.message.content))}::text[],
        ${arrayParam(events.map((event) => event?.stream ?? null))}::text[],
        ${arrayParam(events.map((event) => (event ? JSON.stringify(eventPayload(event)) : null)))}::text[]) with ordinality
        as r(message_id, language, status, content, source, stream, payload, ord)),
    stored as (
      update ${messageTranslations} t set status = r.status, content = r.content,
        updated_at = ${at}::timestamptz
      from results r
      where t.message_id = r.message_id and t.language = r.language and t.status = 'pending'
        and exists (select 1 from ${messages} m where m.id = r.message_id and m.content = r.source)
      returning t.message_id, t.language),
    ${eventCte(sql`select r.stream, (array_agg(r.payload::jsonb order by r.ord))[1] || case when count(*) > 1
          then jsonb_build_object('other_translations', jsonb_agg(r.payload::jsonb -> 'data' order by r.ord) - 0)
          else '{}'::jsonb end,
        ${at}::timestamptz
      from results r join stored s on s.message_id = r.message_id and s.language = r.language
      where r.payload is not null group by r.message_id, r.stream order by min(r.ord)`)},
    retries as (${jobRowsInsert(now, translationJobs.message, retries)})
    select ${EVENTS_WRITTEN}`;
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
