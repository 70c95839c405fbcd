// Translation queue processor: one job per message (and per language a reader asked for, and
// per retry); server/services/translation/translate-message.ts does the work. Without a
// provider (TRANSLATION_PROVIDER=none) no translation job is ever written.
import type { Deps } from "../server/deps.ts";
import { PermanentJobError, type JobDefinition, type JobHandlers } from "../server/jobs/definition.ts";
import { translationJobs } from "../server/services/translation/jobs.ts";
import type { TranslationProvider } from "../server/services/translation/provider.ts";
import { pruneTranslationCache, translateMessage } from "../server/services/translation/translate-message.ts";

export function translationHandlers(deps: Deps, provider: TranslationProvider | null): JobHandlers {
  return new Map([
    [
      translationJobs.message.name,
      {
        definition: translationJobs.message as JobDefinition<unknown>,
        handle: async (payload: unknown) => {
          // Jobs written while a provider was configured, run by a process without one.
          if (!provider) throw new PermanentJobError("TRANSLATION_PROVIDER is none in this process");
          await translateMessage(deps, provider, translationJobs.message.payload.parse(payload));
        },
      },
    ],
    [
      translationJobs.pruneCache.name,
      {
        definition: translationJobs.pruneCache as JobDefinition<unknown>,
        handle: () => pruneTranslationCache(deps),
      },
    ],
  ]);
}
