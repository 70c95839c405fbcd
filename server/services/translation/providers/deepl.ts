// DeepL through its official client, deepl-node (https://github.com/DeepLcom/deepl-node): one
// POST /v2/translate per batch (form-encoded, `text` repeated, `Authorization: DeepL-Auth-Key`),
// answered with one translation per text in order. deepl-node's own retries are off: the
// translation worker retries with backoff and must see every failure to count it.
import {
  AuthorizationError,
  ConnectionError,
  DeepLError,
  QuotaExceededError,
  TooManyRequestsError,
  Translator,
  type SourceLanguageCode,
  type TargetLanguageCode,
  type TextResult,
} from "deepl-node";
import type { Language } from "../../../../db/schema/index.ts";
import { DEFAULT_REQUEST_TIMEOUT_MS, describeRequestError, redactSecrets } from "../../../provider-http.ts";
import {
  TranslationProviderError,
  type TranslateRequest,
  type Translated,
  type TranslationProvider,
} from "../provider.ts";

export type DeepLOptions = {
  /** The API's base URL; unset: deepl-node picks api-free.deepl.com for keys ending ":fx", else api.deepl.com. */
  url?: string;
  apiKey: string;
  /** Per-request timeout (default 10 s; a timeout is retryable). */
  timeoutMs?: number;
};

/**
 * Target codes. DeepL refuses a bare "en" (and deepl-node throws before sending it): English
 * is "en-US". Chinese is "zh-HANS", the explicit Simplified variant DeepL added beside "zh"
 * (which also means Simplified today) so the answer cannot change if DeepL's default does.
 */
const DEEPL_TARGETS: Record<Language, TargetLanguageCode> = {
  en: "en-US",
  "zh-CN": "zh-HANS",
  ja: "ja",
  th: "th",
  id: "id",
};

/** Source codes carry no variant: DeepL takes "zh" for Chinese in either script. */
const DEEPL_SOURCES: Record<Language, SourceLanguageCode> = {
  en: "en",
  "zh-CN": "zh",
  ja: "ja",
  th: "th",
  id: "id",
};

/**
 * A detected source language back to ours (DeepL answers "EN", "ZH", …; deepl-node lowercases
 * them). "zh" becomes zh-CN: DeepL does not tell Simplified from Traditional when it detects.
 */
export function fromDeepLCode(code: string | undefined): Language | null {
  switch (code?.split("-")[0]?.toLowerCase()) {
    case "en":
      return "en";
    case "zh":
      return "zh-CN";
    case "ja":
      return "ja";
    case "th":
      return "th";
    case "id":
      return "id";
    default:
      return null;
  }
}

export class DeepLProvider implements TranslationProvider {
  readonly name = "deepl" as const;
  /** DeepL takes at most 50 texts per request. */
  readonly batchSize = 50;
  private readonly translator: Translator;

  constructor(private readonly options: DeepLOptions) {
    this.translator = new Translator(options.apiKey, {
      serverUrl: options.url,
      maxRetries: 0,
      // deepl-node waits max(minTimeout, its first backoff of about 1 s) per attempt, so a
      // timeout under a second is served as about one second.
      minTimeout: options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
      sendPlatformInfo: false,
    });
  }

  async translate({ texts, target, source }: TranslateRequest): Promise<Translated[]> {
    // deepl-node refuses empty strings before sending; an empty text translates to itself.
    const toSend = texts.filter((text) => text !== "");
    if (toSend.length === 0) return texts.map(() => ({ text: "", detectedSource: null }));

    let results: TextResult[];
    try {
      results = await this.translator.translateText(
        toSend,
        source === null ? null : DEEPL_SOURCES[source],
        DEEPL_TARGETS[target],
      );
    } catch (error) {
      throw this.providerError(error, toSend);
    }
    if (!Array.isArray(results) || results.length !== toSend.length) {
      throw new TranslationProviderError(`deepl: unexpected answer (expected ${toSend.length} translations)`, false);
    }

    const translated = results.map((result): Translated => ({
      text: result.text,
      detectedSource: source === null ? fromDeepLCode(result.detectedSourceLang) : null,
    }));
    let next = 0;
    return texts.map((text) => (text === "" ? { text: "", detectedSource: null } : translated[next++]!));
  }

  async close(): Promise<void> {
    // deepl-node keeps idle keep-alive sockets in a module-wide agent that it never closes;
    // they are unref'd by Node and do not hold the process open.
  }

  /**
   * deepl-node's error as ours. Its messages can quote the response body (which may echo the
   * texts), so only a redacted, shortened detail is kept. It hides status codes and headers:
   * 5xx other than 503 are read from "Unexpected status code: NNN", and 429's Retry-After is
   * not available (the worker's own backoff applies).
   */
  private providerError(error: unknown, texts: string[]): TranslationProviderError {
    const secrets = [this.options.apiKey, ...texts];
    if (error instanceof ConnectionError) {
      // Axios's codes: ECONNABORTED / ETIMEDOUT are its timeouts; every connection error is
      // retryable for us, whatever deepl-node's own shouldRetry says (ECONNREFUSED: false).
      const code = (error.error as { code?: unknown } | undefined)?.code;
      const reason =
        code === "ECONNABORTED" || code === "ETIMEDOUT" ? "timeout" : describeRequestError(error.error ?? error);
      return new TranslationProviderError(`deepl: ${reason}`, true);
    }
    if (error instanceof TooManyRequestsError) return new TranslationProviderError("deepl: HTTP 429", true);
    if (error instanceof QuotaExceededError) {
      // 456: the character quota of the billing period is spent. It comes back at the next
      // period (up to a month away), far past any retry of the worker: retrying only burns
      // attempts and requests, so it fails now and says why.
      return new TranslationProviderError("deepl: HTTP 456 (quota for this billing period exceeded)", false);
    }
    if (error instanceof AuthorizationError) {
      return new TranslationProviderError("deepl: HTTP 403 (authorization failed, check TRANSLATION_API_KEY)", false);
    }
    if (error instanceof DeepLError) {
      const status = statusOf(error.message);
      const detail = redactSecrets(error.message, secrets);
      if (status !== undefined && status >= 500) {
        return new TranslationProviderError(`deepl: HTTP ${status}`, true);
      }
      return new TranslationProviderError(`deepl: ${status === undefined ? "" : `HTTP ${status}: `}${detail}`, false);
    }
    return new TranslationProviderError(`deepl: ${describeRequestError(error)}`, true);
  }
}

/** The HTTP status in a deepl-node error message, from its fixed wording for each status. */
function statusOf(message: string): number | undefined {
  if (message.startsWith("Service unavailable")) return 503;
  if (message.startsWith("Bad request")) return 400;
  if (message.startsWith("Not found")) return 404;
  const match = /^Unexpected status code: (\d{3})/.exec(message);
  return match ? Number(match[1]) : undefined;
}
