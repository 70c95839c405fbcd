// LibreTranslate (https://docs.libretranslate.com/guides/api_usage/): one POST /translate per
// batch, `q` an array of texts, answered with `translatedText` in the same order (and, when the
// source is "auto", one `detectedLanguage` per text). Self-hosted servers usually take no key;
// libretranslate.com and servers started with --api-keys want `api_key` in the body.
import type { Language } from "../../../../db/schema/index.ts";
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  describeRequestError,
  parseJson,
  parseRetryAfter,
  postWithTimeout,
  redactSecrets,
} from "../../../provider-http.ts";
import {
  TranslationProviderError,
  type TranslateRequest,
  type Translated,
  type TranslationProvider,
} from "../provider.ts";

export type LibreTranslateOptions = {
  /** The server's base URL (TRANSLATION_URL), without /translate. */
  url: string;
  apiKey: string | undefined;
  /** Per-request timeout (default 10 s; a timeout is retryable). */
  timeoutMs?: number;
};

/**
 * Our codes as LibreTranslate takes them. Simplified Chinese is "zh", the Argos model code:
 * older servers know only model codes ("zh-hans is not supported", LibreTranslate issue #783),
 * and current ones, which added ISO aliases ("zh-Hans" → "zh" in iso2model()), still pass a
 * model code through unchanged. "zh-Hans" would break every server older than the aliases.
 */
const LIBRETRANSLATE_CODES: Record<Language, string> = {
  en: "en",
  "zh-CN": "zh",
  ja: "ja",
  th: "th",
  id: "id",
};

/**
 * A detected language back to ours. Current servers answer ISO codes ("zh-Hans", model2iso()),
 * older ones model codes ("zh"); codes are compared lowercased. Traditional Chinese ("zt",
 * "zh-Hant") and anything we do not offer is null.
 */
const FROM_LIBRETRANSLATE: Record<string, Language> = {
  en: "en",
  zh: "zh-CN",
  "zh-hans": "zh-CN",
  ja: "ja",
  th: "th",
  id: "id",
};

export function fromLibreTranslateCode(code: unknown): Language | null {
  return typeof code === "string" ? (FROM_LIBRETRANSLATE[code.toLowerCase()] ?? null) : null;
}

type TranslateAnswer = { translatedText?: unknown; detectedLanguage?: unknown; error?: unknown };

export class LibreTranslateProvider implements TranslationProvider {
  readonly name = "libretranslate" as const;
  /** LibreTranslate's --batch-limit is unlimited by default; 50 keeps one request well under a timeout. */
  readonly batchSize = 50;
  private readonly timeoutMs: number;

  constructor(private readonly options: LibreTranslateOptions) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  }

  async translate({ texts, target, source }: TranslateRequest): Promise<Translated[]> {
    if (texts.length === 0) return [];
    const body: Record<string, unknown> = {
      q: texts,
      source: source === null ? "auto" : LIBRETRANSLATE_CODES[source],
      target: LIBRETRANSLATE_CODES[target],
      format: "text",
    };
    if (this.options.apiKey) body.api_key = this.options.apiKey;
    // Anything a message or an error could quote that must not reach a log.
    const secrets = this.options.apiKey ? [this.options.apiKey, ...texts] : texts;

    let response: Awaited<ReturnType<typeof postWithTimeout>>;
    try {
      response = await postWithTimeout(
        `${this.options.url.replace(/\/+$/, "")}/translate`,
        { headers: { accept: "application/json", "content-type": "application/json" }, body: JSON.stringify(body) },
        this.timeoutMs,
      );
    } catch (error) {
      throw new TranslationProviderError(`libretranslate: ${describeRequestError(error)}`, true);
    }

    const answer = parseJson(response.text) as TranslateAnswer | undefined;
    if (response.status === 429 || response.status >= 500) {
      const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), new Date());
      throw new TranslationProviderError(`libretranslate: HTTP ${response.status}`, true, retryAfterMs);
    }
    if (response.status < 200 || response.status >= 300) {
      const detail = typeof answer?.error === "string" ? `: ${redactSecrets(answer.error, secrets)}` : "";
      throw new TranslationProviderError(`libretranslate: HTTP ${response.status}${detail}`, false);
    }

    const translated = answer?.translatedText;
    // An array q is answered with an array; a server that flattened a single text answers a string.
    const results = typeof translated === "string" && texts.length === 1 ? [translated] : translated;
    if (!Array.isArray(results) || results.length !== texts.length || !results.every((t) => typeof t === "string")) {
      throw new TranslationProviderError(
        `libretranslate: unexpected answer (expected translatedText with ${texts.length} strings)`,
        false,
      );
    }
    const detected = answer?.detectedLanguage;
    /** The language detected for text `index`: one entry per text for an array q, one object for a string. */
    const detectedFor = (index: number): Language | null => {
      const entry: unknown = Array.isArray(detected) ? detected[index] : detected;
      return typeof entry === "object" && entry !== null
        ? fromLibreTranslateCode((entry as { language?: unknown }).language)
        : null;
    };
    return results.map((text: string, index) => ({
      text,
      detectedSource: source === null ? detectedFor(index) : null,
    }));
  }

  async close(): Promise<void> {
    // fetch keeps no connection of ours open that needs closing.
  }
}
