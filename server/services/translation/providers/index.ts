// Builds the translation client the configuration names (TRANSLATION_PROVIDER): none, LibreTranslate
// (TRANSLATION_URL required, TRANSLATION_API_KEY when the server wants one) or DeepL
// (TRANSLATION_API_KEY required, TRANSLATION_URL optional). A missing setting is a ConfigError
// naming the variable, thrown at start rather than at the first message.
import { ConfigError, type Config } from "../../../config.ts";
import type { TranslationProvider } from "../provider.ts";
import { DeepLProvider } from "./deepl.ts";
import { LibreTranslateProvider } from "./libretranslate.ts";

export { DeepLProvider, LibreTranslateProvider };

export type TranslationProviderOptions = {
  /** Per-request timeout; only tests change it (the default is 10 s). */
  timeoutMs?: number;
};

/** The configured provider, or null when translation is off ("none"). */
export function createTranslationProvider(
  config: Config["translation"],
  options: TranslationProviderOptions = {},
): TranslationProvider | null {
  switch (config.provider) {
    case "none":
      return null;
    case "libretranslate":
      if (!config.url) throw missing("TRANSLATION_URL", "libretranslate");
      return new LibreTranslateProvider({ url: config.url, apiKey: config.apiKey, timeoutMs: options.timeoutMs });
    case "deepl":
      if (!config.apiKey) throw missing("TRANSLATION_API_KEY", "deepl");
      // Without a URL deepl-node picks the API by the key: api-free.deepl.com for keys ending
      // ":fx", api.deepl.com for the others.
      return new DeepLProvider({ url: config.url, apiKey: config.apiKey, timeoutMs: options.timeoutMs });
  }
}

function missing(variable: string, provider: string): ConfigError {
  return new ConfigError(`Invalid configuration: ${variable} must be set when TRANSLATION_PROVIDER is ${provider}`);
}
