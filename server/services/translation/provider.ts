// The seam between the translation worker and the translation services (LibreTranslate, DeepL).
// The worker (translate-message.ts) decides what to translate into which languages, protects
// code, URLs and @mentions, caches, stores and retries; a provider only turns a batch of plain
// texts into one target language and says, when it fails, whether trying again may help.
import type { Language } from "../../../db/schema/index.ts";

export const TRANSLATION_PROVIDERS = ["libretranslate", "deepl"] as const;
export type TranslationProviderName = (typeof TRANSLATION_PROVIDERS)[number];

export type TranslateRequest = {
  /** Plain texts, each translated on its own; at most the provider's `batchSize`. */
  texts: string[];
  target: Language;
  /** The texts' language; null: the provider detects it. */
  source: Language | null;
};

export type Translated = {
  text: string;
  /** The language the provider detected, when it was asked to (source null) and it said; else null. */
  detectedSource: Language | null;
};

export interface TranslationProvider {
  readonly name: TranslationProviderName;
  /** The most texts one `translate` call takes (one request). */
  readonly batchSize: number;
  /** One result per text, in the same order. Rejects with TranslationProviderError. */
  translate(request: TranslateRequest): Promise<Translated[]>;
  close(): Promise<void>;
}

/** A request the provider did not answer with translations. */
export class TranslationProviderError extends Error {
  override name = "TranslationProviderError";
  constructor(
    message: string,
    /** 429, 5xx, a timeout or a connection error: trying again later may succeed. */
    readonly retryable: boolean,
    /** From the provider's Retry-After, when it sent one. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}
