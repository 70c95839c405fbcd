// The translation clients (LibreTranslate over fetch, DeepL through deepl-node) against fake
// services on 127.0.0.1 (test/helpers/translation.ts): what each sends (one request per batch,
// our language codes as each service spells them, the key), how each answer or failure becomes
// translations or a TranslationProviderError (retryable or not, never quoting the key or the
// texts), and the factory that picks one from the configuration.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LANGUAGES, type Language } from "../db/schema/index.ts";
import { ConfigError, loadConfig } from "../server/config.ts";
import { TranslationProviderError, type TranslationProvider } from "../server/services/translation/provider.ts";
import {
  createTranslationProvider,
  DeepLProvider,
  LibreTranslateProvider,
} from "../server/services/translation/providers/index.ts";
import type { LibreTranslateOptions } from "../server/services/translation/providers/libretranslate.ts";
import {
  startFakeDeepL,
  startFakeLibreTranslate,
  type FakeTranslator,
  type FakeTranslatorOptions,
} from "./helpers/translation.ts";

const LIBRE_KEY = "lt-key-5f2c9a71e0";
const DEEPL_KEY = "d7e1a0c4-2b9f-4c1e-9a0d-5e3f7b2c8a61:fx";
/** Short enough for a test, long enough for a loaded machine to answer a request that is answered. */
const TEST_TIMEOUT_MS = 1_500;

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(path.join(tmpdir(), "translation-providers-"));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A config from an environment with nothing but an APP_KEY and the given variables. */
const translationConfig = (variables: Record<string, string> = {}) =>
  loadConfig({ DATA_DIR: scratch, APP_KEY: "k".repeat(40), ...variables }).translation;

/** The error `promise` rejects with; fails the test when it resolves or rejects with something else. */
async function rejection(promise: Promise<unknown>): Promise<TranslationProviderError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(TranslationProviderError);
    return error as TranslationProviderError;
  }
  throw new Error("expected the translation to fail");
}

/** A URL on which nothing listens: a fake's, after it stopped. */
async function deadUrl(start: () => Promise<FakeTranslator>): Promise<string> {
  const fake = await start();
  await fake.stop();
  return fake.url;
}

const fakes: FakeTranslator[] = [];
const providers: TranslationProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((provider) => provider.close()));
  await Promise.all(fakes.splice(0).map((fake) => fake.stop()));
});

async function libre(fakeOptions: FakeTranslatorOptions = {}, client: Partial<LibreTranslateOptions> = {}) {
  const fake = await startFakeLibreTranslate(fakeOptions);
  fakes.push(fake);
  const provider = new LibreTranslateProvider({
    url: fake.url,
    apiKey: LIBRE_KEY,
    timeoutMs: TEST_TIMEOUT_MS,
    ...client,
  });
  providers.push(provider);
  return { fake, provider };
}

async function deepl(fakeOptions: FakeTranslatorOptions = {}, timeoutMs = TEST_TIMEOUT_MS) {
  const fake = await startFakeDeepL(fakeOptions);
  fakes.push(fake);
  const provider = new DeepLProvider({ url: fake.url, apiKey: DEEPL_KEY, timeoutMs });
  providers.push(provider);
  return { fake, provider };
}

describe("LibreTranslateProvider", () => {
  it("translates a batch in one JSON request, in order, Simplified Chinese as zh, with the key", async () => {
    const { fake, provider } = await libre({ apiKey: LIBRE_KEY });
    const results = await provider.translate({
      texts: ["hello", "good night", "see you"],
      target: "zh-CN",
      source: "en",
    });

    expect(results).toEqual([
      { text: "[zh-CN] hello", detectedSource: null },
      { text: "[zh-CN] good night", detectedSource: null },
      { text: "[zh-CN] see you", detectedSource: null },
    ]);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]).toMatchObject({
      texts: ["hello", "good night", "see you"],
      target: "zh",
      source: "en",
      apiKey: LIBRE_KEY,
      contentType: "application/json",
    });
  });

  it("maps every language both ways", async () => {
    const { fake, provider } = await libre();
    for (const target of LANGUAGES) {
      const [result] = await provider.translate({ texts: ["hi"], target, source: "zh-CN" });
      expect(result!.text).toBe(`[${target}] hi`);
    }
    expect(fake.requests.map((request) => request.target)).toEqual(["en", "zh", "ja", "th", "id"]);
    expect(new Set(fake.requests.map((request) => request.source))).toEqual(new Set(["zh"]));
  });

  it("sends no api_key when none is configured", async () => {
    const { fake, provider } = await libre({}, { apiKey: undefined });
    await provider.translate({ texts: ["hi"], target: "ja", source: "en" });
    expect(fake.requests[0]!.apiKey).toBeUndefined();
  });

  it("asks for detection with source auto and reports the detected language per text", async () => {
    const { fake, provider } = await libre();
    const results = await provider.translate({ texts: ["hello", "world"], target: "th", source: null });
    expect(fake.requests[0]!.source).toBeNull();
    expect(results).toEqual([
      { text: "[th] hello", detectedSource: "en" },
      { text: "[th] world", detectedSource: "en" },
    ]);
  });

  it.each([
    ["zh-Hans", "zh-CN"],
    ["zh", "zh-CN"],
    ["ID", "id"],
    ["zh-Hant", null],
    ["fr", null],
  ] as const)("reads the detected language %s as %s", async (detected, expected) => {
    const { provider } = await libre({ detected });
    const [result] = await provider.translate({ texts: ["text"], target: "en", source: null });
    expect(result!.detectedSource).toBe(expected);
  });

  it("takes a single-string translatedText for a single text", async () => {
    const { fake, provider } = await libre();
    fake.fail(200, { body: { translatedText: "bonjour", detectedLanguage: { language: "en", confidence: 90 } } });
    expect(await provider.translate({ texts: ["hello"], target: "ja", source: null })).toEqual([
      { text: "bonjour", detectedSource: "en" },
    ]);
  });

  it("answers 429 with Retry-After as retryable after that delay", async () => {
    const { fake, provider } = await libre();
    fake.fail(429, { retryAfter: 7 });
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: true, retryAfterMs: 7_000 });
    expect(error.message).toBe("libretranslate: HTTP 429");
  });

  it.each([500, 502, 503])("answers %i as retryable", async (status) => {
    const { fake, provider } = await libre();
    fake.fail(status);
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: true, retryAfterMs: undefined });
  });

  it("answers 400 as not retryable, with the server's reason", async () => {
    const { fake, provider } = await libre();
    fake.fail(400, { body: { error: "xx is not supported" } });
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: false, message: "libretranslate: HTTP 400: xx is not supported" });
  });

  it("answers a wrong key (403) as not retryable, without the key", async () => {
    const { provider } = await libre({ apiKey: "the-right-key" });
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: false, message: "libretranslate: HTTP 403: Invalid API key" });
  });

  it("keeps the key and the texts out of a reason the server echoed them in", async () => {
    const { fake, provider } = await libre();
    const text = "my secret plans for tuesday";
    fake.fail(400, { body: { error: `Cannot translate text: ${text} (api_key=${LIBRE_KEY})` } });
    const error = await rejection(provider.translate({ texts: [text], target: "ja", source: "en" }));
    expect(error.retryable).toBe(false);
    expect(error.message).not.toContain(LIBRE_KEY);
    expect(error.message).not.toContain(text);
    expect(error.message).toContain("[redacted]");
  });

  it.each([
    ["a body that is not JSON", "<html>It works!</html>"],
    ["no translatedText", { result: ["a", "b"] }],
    ["fewer translations than texts", { translatedText: ["only one"] }],
    ["a translation that is not a string", { translatedText: ["a", 2] }],
  ])("refuses a 200 with %s, not retryable", async (_, body) => {
    const { fake, provider } = await libre();
    fake.fail(200, { body });
    const error = await rejection(provider.translate({ texts: ["one", "two"], target: "ja", source: "en" }));
    expect(error).toMatchObject({
      retryable: false,
      message: "libretranslate: unexpected answer (expected translatedText with 2 strings)",
    });
  });

  it("gives up on a server that does not answer within timeoutMs, retryable", async () => {
    const { fake, provider } = await libre({}, { timeoutMs: 300 });
    fake.hang();
    const started = Date.now();
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: true, message: "libretranslate: timeout" });
    expect(Date.now() - started).toBeLessThan(TEST_TIMEOUT_MS);
  });

  it("answers a refused connection as retryable", async () => {
    const provider = new LibreTranslateProvider({ url: await deadUrl(startFakeLibreTranslate), apiKey: LIBRE_KEY });
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: true, message: "libretranslate: connection error (ECONNREFUSED)" });
  });
});

describe("DeepLProvider", () => {
  it("translates a batch in one form request as deepl-node sends it, Simplified Chinese as zh-HANS", async () => {
    const { fake, provider } = await deepl({ apiKey: DEEPL_KEY });
    const results = await provider.translate({
      texts: ["hello", "good night", "see you"],
      target: "zh-CN",
      source: "en",
    });

    expect(results).toEqual([
      { text: "[zh-CN] hello", detectedSource: null },
      { text: "[zh-CN] good night", detectedSource: null },
      { text: "[zh-CN] see you", detectedSource: null },
    ]);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]).toMatchObject({
      texts: ["hello", "good night", "see you"],
      target: "zh-HANS",
      source: "en",
      apiKey: DEEPL_KEY,
      contentType: expect.stringMatching(/^application\/x-www-form-urlencoded/),
    });
    expect(fake.requests[0]!.headers.authorization).toBe(`DeepL-Auth-Key ${DEEPL_KEY}`);
  });

  it("maps every language both ways (English as en-US, Chinese sources as zh)", async () => {
    const { fake, provider } = await deepl();
    for (const target of LANGUAGES) {
      const [result] = await provider.translate({ texts: ["hi"], target, source: "zh-CN" });
      expect(result!.text).toBe(`[${target}] hi`);
    }
    expect(fake.requests.map((request) => request.target)).toEqual(["en-US", "zh-HANS", "ja", "th", "id"]);
    expect(new Set(fake.requests.map((request) => request.source))).toEqual(new Set(["zh"]));
  });

  it("leaves source_lang out to detect and reports the detected language per text", async () => {
    const { fake, provider } = await deepl();
    const results = await provider.translate({ texts: ["hello", "world"], target: "id", source: null });
    expect(fake.requests[0]!.source).toBeNull();
    expect(results).toEqual([
      { text: "[id] hello", detectedSource: "en" },
      { text: "[id] world", detectedSource: "en" },
    ]);
  });

  it.each([
    ["ZH", "zh-CN"],
    ["JA", "ja"],
    ["TH", "th"],
    ["FR", null],
  ] as const)("reads the detected language %s as %s", async (detected, expected) => {
    const { provider } = await deepl({ detected });
    const [result] = await provider.translate({ texts: ["text"], target: "en", source: null });
    expect(result!.detectedSource).toBe(expected);
  });

  it("keeps empty texts in place without sending them (DeepL refuses empty text)", async () => {
    const { fake, provider } = await deepl();
    const results = await provider.translate({ texts: ["", "hello", ""], target: "ja", source: "en" });
    expect(results.map((result) => result.text)).toEqual(["", "[ja] hello", ""]);
    expect(fake.requests[0]!.texts).toEqual(["hello"]);
  });

  it("answers 429 as retryable after one request (deepl-node's own retries are off)", async () => {
    const { fake, provider } = await deepl();
    fake.fail(429, { retryAfter: 7 });
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    // deepl-node does not expose response headers: the worker's own backoff applies.
    expect(error).toMatchObject({ retryable: true, retryAfterMs: undefined, message: "deepl: HTTP 429" });
    expect(fake.requests).toHaveLength(1);
  });

  it.each([500, 502, 503])("answers %i as retryable after one request", async (status) => {
    const { fake, provider } = await deepl();
    fake.fail(status);
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: true, message: `deepl: HTTP ${status}` });
    expect(fake.requests).toHaveLength(1);
  });

  it("answers 456 (quota exceeded) as not retryable", async () => {
    const { fake, provider } = await deepl();
    fake.fail(456);
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: false });
    expect(error.message).toContain("456");
  });

  it("answers a wrong key (403) as not retryable, without the key", async () => {
    const { provider } = await deepl({ apiKey: "the-right-key" });
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/^deepl: HTTP 403/);
    expect(error.message).not.toContain(DEEPL_KEY);
  });

  it("answers 400 as not retryable, keeping the key and the texts out of the reason", async () => {
    const { fake, provider } = await deepl();
    const text = "my secret plans for tuesday";
    fake.fail(400, { body: { message: `Cannot translate ${text} with ${DEEPL_KEY}` } });
    const error = await rejection(provider.translate({ texts: [text], target: "ja", source: "en" }));
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/^deepl: HTTP 400: /);
    expect(error.message).not.toContain(DEEPL_KEY);
    expect(error.message).not.toContain(text);
  });

  it("refuses a 200 that is not a translation answer, not retryable", async () => {
    const { fake, provider } = await deepl();
    fake.fail(200, { body: { translations: [{ text: "only one", detected_source_language: "EN" }] } });
    const error = await rejection(provider.translate({ texts: ["one", "two"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: false, message: "deepl: unexpected answer (expected 2 translations)" });
  });

  it("gives up on a server that does not answer, retryable", async () => {
    // deepl-node waits at least about a second whatever the timeout (its first backoff step).
    const { fake, provider } = await deepl({}, 300);
    fake.hang();
    const started = Date.now();
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: true, message: "deepl: timeout" });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(fake.requests).toHaveLength(1);
  });

  it("answers a refused connection as retryable", async () => {
    const provider = new DeepLProvider({ url: await deadUrl(startFakeDeepL), apiKey: DEEPL_KEY });
    const error = await rejection(provider.translate({ texts: ["hi"], target: "ja", source: "en" }));
    expect(error).toMatchObject({ retryable: true, message: "deepl: connection error (ECONNREFUSED)" });
  });
});

describe("createTranslationProvider", () => {
  it("answers null when translation is off", () => {
    expect(createTranslationProvider(translationConfig())).toBeNull();
    expect(createTranslationProvider(translationConfig({ TRANSLATION_PROVIDER: "none" }))).toBeNull();
  });

  it("wants TRANSLATION_URL for LibreTranslate", () => {
    const config = translationConfig({ TRANSLATION_PROVIDER: "libretranslate" });
    expect(() => createTranslationProvider(config)).toThrow(ConfigError);
    expect(() => createTranslationProvider(config)).toThrow(/TRANSLATION_URL/);
  });

  it("wants TRANSLATION_API_KEY for DeepL", () => {
    const config = translationConfig({ TRANSLATION_PROVIDER: "deepl", TRANSLATION_URL: "https://deepl.example" });
    expect(() => createTranslationProvider(config)).toThrow(ConfigError);
    expect(() => createTranslationProvider(config)).toThrow(/TRANSLATION_API_KEY/);
  });

  it("builds DeepL without a URL (deepl-node picks the API by the key)", () => {
    const config = translationConfig({ TRANSLATION_PROVIDER: "deepl", TRANSLATION_API_KEY: DEEPL_KEY });
    expect(createTranslationProvider(config)).toBeInstanceOf(DeepLProvider);
  });

  it.each([
    ["libretranslate", startFakeLibreTranslate, LIBRE_KEY],
    ["deepl", startFakeDeepL, DEEPL_KEY],
  ] as const)("builds a working %s client from the configuration", async (name, start, apiKey) => {
    const fake = await start({ apiKey });
    fakes.push(fake);
    const provider = createTranslationProvider(
      translationConfig({ TRANSLATION_PROVIDER: name, TRANSLATION_URL: fake.url, TRANSLATION_API_KEY: apiKey }),
      { timeoutMs: TEST_TIMEOUT_MS },
    )!;
    providers.push(provider);
    expect(provider.name).toBe(name);
    const target: Language = "ja";
    expect(await provider.translate({ texts: ["hello"], target, source: "en" })).toEqual([
      { text: "[ja] hello", detectedSource: null },
    ]);
    expect(fake.requests[0]!.apiKey).toBe(apiKey);
  });
});
