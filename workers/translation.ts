// Translation queue processor: one job per batch of the translation consumer (its messages), per
// message and language a reader asked for, and per retry;
// server/services/translation/translate-message.ts does the work, for the jobs that arrive
// together in one batch. Without a provider (TRANSLATION_PROVIDER=none) no translation job is
// ever written.
import type { Deps } from "../server/deps.ts";
import { jobHandler, PermanentJobError, type JobHandlers } from "../server/jobs/definition.ts";
import { translationJobs, type TranslationJobPayload } from "../server/services/translation/jobs.ts";
import type { TranslationProvider } from "../server/services/translation/provider.ts";
import { Batcher } from "../server/jobs/batcher.ts";
import {
  TRANSLATION_BATCH,
  pruneTranslationCache,
  translateMessages,
} from "../server/services/translation/translate-message.ts";

export function translationHandlers(deps: Deps, provider: TranslationProvider | null): JobHandlers {
  const batcher =
    provider &&
    new Batcher<TranslationJobPayload>((payloads) => translateMessages(deps, provider, payloads), TRANSLATION_BATCH);
  // Jobs written while a provider was configured, run by a process without one, fail for good.
  const translating = () => {
    if (!batcher) throw new PermanentJobError("TRANSLATION_PROVIDER is none in this process");
    return batcher;
  };
  return new Map([
    jobHandler(translationJobs.message, (payload) => translating().add(payload)),
    // A batch of the translation consumer: its messages go to the worker's batches together.
    jobHandler(translationJobs.messages, ({ messageIds }) =>
      translating().addAll(messageIds.map((messageId) => ({ messageId }))),
    ),
    jobHandler(translationJobs.pruneCache, () => pruneTranslationCache(deps)),
  ]);
}
