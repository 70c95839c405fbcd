// Fake translation services for tests and benchmarks, real HTTP servers on 127.0.0.1 (random ports):
//
// - startFakeLibreTranslate: POST /translate, JSON (or form) body {q, source, target, format,
//   api_key}; q a string or an array, answered in kind ({translatedText}, plus
//   {detectedLanguage} when source is "auto": one entry per text for an array).
// - startFakeDeepL: POST /v2/translate as deepl-node sends it (form-encoded, `text` repeated,
//   target_lang, source_lang, `Authorization: DeepL-Auth-Key <key>`; a JSON body is read too),
//   answered {translations: [{detected_source_language, text}]}.
//
// Both translate each text to `[<target>] <text>`, <target> being OUR language code mapped back
// from the one on the wire (`[zh-CN] hello` for LibreTranslate's "zh" and DeepL's "ZH-HANS"), so
// a test sees at once that the codes went both ways; a code either service would refuse is
// answered 400 as that service does. Each records every request in `requests` (failed and hung
// ones included), and can be told to `fail(status, {retryAfter, times, body})` (the next
// `times` requests, or until `recover()`), to `hang()` (never answer until `recover()` or
// `stop()`), or, at start, to answer after `delayMs` and to require an API key.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Language } from "../../db/schema/index.ts";
import { until } from "./wait.ts";
import { FakeMode } from "./fake-mode.ts";

export type TranslationFailOptions = {
  /** Retry-After header value (seconds, or an HTTP date). */
  retryAfter?: number | string;
  /** How many requests fail; all of them until recover() when absent. */
  times?: number;
  /** The JSON body to answer with instead of the service's usual error (e.g. a malformed 200). */
  body?: unknown;
};

export type FakeTranslatorOptions = {
  /** Every answer waits this long first (benchmarks, timeouts). */
  delayMs?: number;
  /** When set, a request without this key is refused as the service refuses it. */
  apiKey?: string;
  /** The language reported when asked to detect, in the service's own code (default: English). */
  detected?: string;
};

export type TranslationRequestLog = {
  texts: string[];
  /** The target code as sent ("zh", "ZH-HANS", "en-US", …). */
  target: string | undefined;
  /** The source code as sent; null when absent or "auto" (detect). */
  source: string | null;
  apiKey: string | undefined;
  /** The body's content type: deepl-node sends a form, our LibreTranslate client JSON. */
  contentType: string | undefined;
  headers: IncomingHttpHeaders;
};

export type FakeTranslator = {
  /** The base URL (TRANSLATION_URL). */
  url: string;
  requests: TranslationRequestLog[];
  fail(status: number, options?: TranslationFailOptions): void;
  /** Holds every following request unanswered, until recover() or stop(). */
  hang(): void;
  recover(): void;
  /** Resolves when `requests` has at least `count` entries. */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
};

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

/** A JSON body as an object, or a form body as one (a repeated field becomes an array). */
function parseBody(text: string, contentType: string | undefined): Record<string, unknown> {
  if (contentType?.includes("application/json")) {
    try {
      const json: unknown = JSON.parse(text);
      return typeof json === "object" && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : {};
    } catch {
      return {};
    }
  }
  const fields: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const previous = fields[key];
    fields[key] = previous === undefined ? value : Array.isArray(previous) ? [...previous, value] : [previous, value];
  }
  return fields;
}

const asTexts = (value: unknown): string[] =>
  typeof value === "string" ? [value] : Array.isArray(value) ? value.filter((t) => typeof t === "string") : [];

function answerJson(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}

const retryAfterHeader = (options: TranslationFailOptions): Record<string, string> =>
  options.retryAfter === undefined ? {} : { "retry-after": String(options.retryAfter) };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fake's server, request log and switches; `handle` answers one parsed, recorded request. */
async function startFake(
  path: string,
  options: FakeTranslatorOptions,
  read: (body: Record<string, unknown>, headers: IncomingHttpHeaders) => Omit<TranslationRequestLog, "headers">,
  failure: (status: number) => unknown,
  handle: (
    log: TranslationRequestLog,
    body: Record<string, unknown>,
  ) => { status: number; body: unknown } | Promise<{ status: number; body: unknown }>,
): Promise<FakeTranslator> {
  const mode = new FakeMode<TranslationFailOptions>();
  const requests: TranslationRequestLog[] = [];

  const server = createServer(async (request, response) => {
    if (request.method !== "POST" || request.url?.split("?")[0] !== path) return answerJson(response, 404, {});
    const body = parseBody(await readBody(request), request.headers["content-type"]);
    const log = { ...read(body, request.headers), headers: request.headers };
    requests.push(log);
    const next = mode.next();
    if (next === "hang") return;
    if (options.delayMs) await sleep(options.delayMs);
    if (next) {
      const answer = next.options.body ?? failure(next.status);
      return answerJson(response, next.status, answer, retryAfterHeader(next.options));
    }
    const answer = await handle(log, body);
    answerJson(response, answer.status, answer.body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    fail: (status, failOptions) => mode.fail(status, failOptions),
    hang: () => mode.hang(),
    recover: () => mode.recover(),
    waitFor: async (count, timeoutMs = 5_000) => {
      await until(() => (requests.length >= count ? true : undefined), `${count} translation requests`, timeoutMs);
    },
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ------------------------------------------------------------------------------ LibreTranslate

/** LibreTranslate's codes (model codes, and the ISO aliases of current servers) to ours. */
const FROM_LIBRETRANSLATE: Record<string, Language> = {
  en: "en",
  zh: "zh-CN",
  "zh-hans": "zh-CN",
  ja: "ja",
  th: "th",
  id: "id",
};

export async function startFakeLibreTranslate(options: FakeTranslatorOptions = {}): Promise<FakeTranslator> {
  return startFake(
    "/translate",
    options,
    (body, headers) => ({
      texts: asTexts(body.q),
      target: typeof body.target === "string" ? body.target : undefined,
      source: typeof body.source === "string" && body.source !== "auto" ? body.source : null,
      apiKey: typeof body.api_key === "string" ? body.api_key : undefined,
      contentType: headers["content-type"],
    }),
    (status) => ({ error: status === 429 ? "Slowdown: fake failure" : "fake failure" }),
    (log, body) => {
      if (options.apiKey !== undefined) {
        if (!log.apiKey)
          return { status: 400, body: { error: "Please contact the server operator to get an API key" } };
        if (log.apiKey !== options.apiKey) return { status: 403, body: { error: "Invalid API key" } };
      }
      if (log.texts.length === 0) return { status: 400, body: { error: "Invalid request: missing q parameter" } };
      if (body.source === undefined)
        return { status: 400, body: { error: "Invalid request: missing source parameter" } };
      const target = FROM_LIBRETRANSLATE[log.target?.toLowerCase() ?? ""];
      if (!target) return { status: 400, body: { error: `${log.target} is not supported` } };
      if (log.source !== null && !FROM_LIBRETRANSLATE[log.source.toLowerCase()]) {
        return { status: 400, body: { error: `${log.source} is not supported` } };
      }
      const translated = log.texts.map((text) => `[${target}] ${text}`);
      const batch = Array.isArray(body.q);
      const answer: Record<string, unknown> = { translatedText: batch ? translated : translated[0] };
      if (log.source === null) {
        const detected = { confidence: 90, language: options.detected ?? "en" };
        answer.detectedLanguage = batch ? translated.map(() => detected) : detected;
      }
      return { status: 200, body: answer };
    },
  );
}

// --------------------------------------------------------------------------------------- DeepL

/** DeepL's target codes (case-insensitive) to ours; the deprecated bare "EN" is refused, as deepl-node does. */
const FROM_DEEPL_TARGET: Record<string, Language> = {
  "en-us": "en",
  "en-gb": "en",
  zh: "zh-CN",
  "zh-hans": "zh-CN",
  ja: "ja",
  th: "th",
  id: "id",
};
/** DeepL's source codes carry no variant. */
const DEEPL_SOURCES = new Set(["en", "zh", "ja", "th", "id"]);

export async function startFakeDeepL(options: FakeTranslatorOptions = {}): Promise<FakeTranslator> {
  return startFake(
    "/v2/translate",
    options,
    (body, headers) => ({
      texts: asTexts(body.text),
      target: typeof body.target_lang === "string" ? body.target_lang : undefined,
      source: typeof body.source_lang === "string" ? body.source_lang : null,
      apiKey: /^DeepL-Auth-Key (.+)$/.exec(headers.authorization ?? "")?.[1],
      contentType: headers["content-type"],
    }),
    (status) => ({ message: status === 456 ? "Quota Exceeded" : "fake failure" }),
    (log) => {
      if (options.apiKey !== undefined && log.apiKey !== options.apiKey) {
        return { status: 403, body: { message: "Wrong endpoint or invalid auth key" } };
      }
      if (log.texts.length === 0) return { status: 400, body: { message: "Parameter 'text' not specified." } };
      const target = FROM_DEEPL_TARGET[log.target?.toLowerCase() ?? ""];
      if (!target) return { status: 400, body: { message: "Value for 'target_lang' not supported." } };
      if (log.source !== null && !DEEPL_SOURCES.has(log.source.toLowerCase())) {
        return { status: 400, body: { message: "Value for 'source_lang' not supported." } };
      }
      const detected = (log.source ?? options.detected ?? "EN").toUpperCase();
      const translations = log.texts.map((text) => ({
        detected_source_language: detected,
        text: `[${target}] ${text}`,
      }));
      return { status: 200, body: { translations } };
    },
  );
}
