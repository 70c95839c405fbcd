// The translation worker's work for one message (docs/translation.md): every language still
// pending for it is translated, its prose only (protect.ts), each distinct text once (the
// cache, then the provider in batches), and stored with a `translation.ready` event for the
// readers of that language, in one transaction. A language the provider could not do now (429,
// 5xx, a timeout) is tried again by a delayed job; after the last try, or at once for a refusal
// trying again cannot fix, it is stored as "failed" (with its event), so nothing stays pending.
import { createHash } from "node:crypto";
import { eq, inArray, sql } from "drizzle-orm";
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
import { mapLimit } from "../../outbound-http.ts";
import { messageStream } from "../messaging/post-message.ts";
import { proseOf, reassemble, splitForTranslation } from "./protect.ts";
import { TranslationProviderError, type TranslationProvider } from "./provider.ts";
import { translationJobId, translationJobs, type TranslationJobPayload } from "./jobs.ts";

/** Tries per language, the first included: with the backoff below, about an hour of outage. */
export const MAX_TRANSLATION_ATTEMPTS = 16;
export const TRANSLATION_BACKOFF: Backoff = {
  firstMs: 1_000,
  longestMs: 10 * 60_000,
  longestRetryAfterMs: 60 * 60_000,
};
/** Languages of one message translated at once. */
const LANGUAGES_AT_ONCE = 4;
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

export async function translateMessage(
  deps: Deps,
  provider: TranslationProvider,
  payload: TranslationJobPayload,
): Promise<void> {
  // The message and the languages still pending for it, in one round trip.
  const [found] = await deps.db
    .select({
      message: messages,
      pending: sql<Language[] | null>`(select array_agg(${messageTranslations.language}) from ${messageTranslations}
        where ${messageTranslations.messageId} = ${messages.id} and ${messageTranslations.status} = 'pending')`,
    })
    .from(messages)
    .where(eq(messages.id, payload.messageId))
    .limit(1);
  if (!found?.pending?.length) return; // gone with its channel or conversation (its rows went too), or done
  const { message, pending } = found;

  const pieces = splitForTranslation(message.content);
  const texts = proseOf(pieces);
  const cached = await cachedTranslations(deps, message.language, pending, texts);
  const outcomes = await mapLimit(pending, LANGUAGES_AT_ONCE, (language) =>
    translateInto(provider, message, texts, language, cached.get(language)!),
  );

  const attempt = payload.attempt ?? 1;
  const retries = outcomes.filter((outcome) => outcome.status === "retry");
  const retryNow = attempt < MAX_TRANSLATION_ATTEMPTS && retries.length > 0;
  const results = outcomes.flatMap((outcome) => {
    if (outcome.status === "retry" && retryNow) return [];
    const status: Exclude<TranslationState, "pending"> = outcome.status === "retry" ? "failed" : outcome.status;
    const content = outcome.status === "done" ? reassemble(pieces, outcome.translations) : null;
    return [{ language: outcome.language, status, content }];
  });
  await writeWithEvents(deps, async (tx, emit) => {
    const now = deps.clock.now();
    await storeCache(tx, now, message.language, outcomes);
    // Only rows still pending: a second run of the same job (a retry after a crash) stores
    // and announces nothing twice.
    const stored = await storeResults(tx, now, message.id, results);
    for (const result of results) {
      if (result.status !== "not_needed" && stored.has(result.language))
        emit(translationReady(message, result.language, result.status, result.content));
    }
    if (retryNow) {
      const next = {
        messageId: message.id,
        ...(payload.language && { language: payload.language }),
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
          messageId: message.id,
          languages: retries.map((retry) => retry.language),
          attempt: attempt + 1,
          delayMs,
          reason: retries[0]!.reason,
        },
        "translation: will try again",
      );
    }
  });
  if (retryNow) deps.jobOutbox.wake();
  for (const outcome of outcomes) {
    if (outcome.status === "failed" || (outcome.status === "retry" && !retryNow)) {
      deps.logger.warn(
        { messageId: message.id, language: outcome.language, reason: outcome.reason, attempt },
        "translation: gave up",
      );
    }
  }
}

/** Per language, the texts the cache already knows (text → translation), in one lookup for all. */
async function cachedTranslations(
  deps: Deps,
  source: Language | null,
  languages: Language[],
  texts: string[],
): Promise<Map<Language, Map<string, string>>> {
  const wanted = new Map<string, { language: Language; text: string }>();
  for (const language of languages)
    for (const text of texts) wanted.set(cacheKey(source, language, text), { language, text });
  const byLanguage = new Map(languages.map((language) => [language, new Map<string, string>()]));
  if (wanted.size === 0) return byLanguage;
  const rows = await deps.db
    .select({ key: translationCache.key, content: translationCache.content })
    .from(translationCache)
    .where(inArray(translationCache.key, [...wanted.keys()]));
  for (const row of rows) {
    const { language, text } = wanted.get(row.key)!;
    byLanguage.get(language)!.set(text, row.content);
  }
  return byLanguage;
}

/** One language: what the cache had, the rest from the provider in batches. */
async function translateInto(
  provider: TranslationProvider,
  message: Message,
  texts: string[],
  language: Language,
  cached: Map<string, string>,
): Promise<Outcome> {
  const translations = new Map(cached);
  const fromCache = new Set(cached.keys());
  const missing = texts.filter((text) => !translations.has(text));
  try {
    for (let at = 0; at < missing.length; at += provider.batchSize) {
      const batch = missing.slice(at, at + provider.batchSize);
      const results = await provider.translate({ texts: batch, target: language, source: message.language });
      // A message of unknown language (a bot's) that the provider finds already in the reader's.
      if (message.language === null && at === 0 && results[0]?.detectedSource === language)
        return { language, status: "not_needed" };
      batch.forEach((text, index) => translations.set(text, results[index]!.text));
    }
  } catch (error) {
    if (error instanceof TranslationProviderError && !error.retryable)
      return { language, status: "failed", reason: error.message };
    const reason = error instanceof Error ? error.message : "translation failed";
    return error instanceof TranslationProviderError && error.retryAfterMs !== undefined
      ? { language, status: "retry", reason, retryAfterMs: error.retryAfterMs }
      : { language, status: "retry", reason };
  }
  return { language, status: "done", translations, cached: fromCache };
}

/** Every language's result in one statement, on rows still pending; resolves with the languages stored. */
async function storeResults(
  tx: Transaction,
  now: Date,
  messageId: string,
  results: { language: Language; status: TranslationState; content: string | null }[],
): Promise<Set<Language>> {
  if (results.length === 0) return new Set();
  const values = sql.join(
    results.map((result) => sql`(${result.language}, ${result.status}, ${result.content}::text)`),
    sql`, `,
  );
  const stored = await tx.execute(sql`
    update ${messageTranslations} set status = results.status, content = results.content,
      updated_at = ${now.toISOString()}::timestamptz
    from (values ${values}) as results (language, status, content)
    where ${messageTranslations.messageId} = ${messageId}
      and ${messageTranslations.language} = results.language
      and ${messageTranslations.status} = 'pending'
    returning ${messageTranslations.language}`);
  return new Set(rowsOf<{ language: Language }>(stored).map((row) => row.language));
}

/** What the provider translated goes into the cache; what the cache answered is marked used. */
async function storeCache(tx: Transaction, now: Date, source: Language | null, outcomes: Outcome[]): Promise<void> {
  const rows: { key: string; content: string; usedAt: Date }[] = [];
  const used: string[] = [];
  for (const outcome of outcomes) {
    if (outcome.status !== "done") continue;
    for (const [text, content] of outcome.translations) {
      const key = cacheKey(source, outcome.language, text);
      if (outcome.cached.has(text)) used.push(key);
      else rows.push({ key, content, usedAt: now });
    }
  }
  if (rows.length > 0) await tx.insert(translationCache).values(rows).onConflictDoNothing();
  if (used.length > 0)
    await tx.update(translationCache).set({ usedAt: now }).where(inArray(translationCache.key, used));
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
