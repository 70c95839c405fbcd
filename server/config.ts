// Configuration is parsed once, at boot, from the environment (contract.md, "Running it").
// Nothing else in the code reads process.env: everything takes a Config.
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";
import { z } from "zod";

const optionalString = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === "" ? undefined : value.trim()));

// Every schema below carries its own message, written to follow the variable's name
// ("PORT must be ..."): the process-wide zod messages (server/validation.ts) are for request
// fields, and a regex's source is no help to someone editing an env file.

/** A URL whose scheme is one of `schemes` (written without "://"). */
const optionalUrl = (schemes: string[]) => {
  const error = `must be a URL starting with ${orList(schemes.map((scheme) => `${scheme}://`))}`;
  return optionalString.pipe(z.url({ protocol: new RegExp(`^(${schemes.join("|")})$`), error }).optional());
};
const httpUrl = () => optionalUrl(["http", "https"]);

function orList(items: string[]): string {
  return items.length < 2 ? items.join("") : `${items.slice(0, -1).join(", ")} or ${items.at(-1)}`;
}

const oneOf = <const Values extends readonly [string, ...string[]]>(values: Values) =>
  z.enum(values, { error: `must be ${values.length > 2 ? "one of " : ""}${orList([...values])}` });

const flag = (defaultValue: boolean) =>
  z
    .enum(["true", "false", "1", "0", "on", "off", "yes", "no"], {
      error: "must be on or off (true/false, yes/no and 1/0 work too)",
    })
    .optional()
    .transform((value) => (value === undefined ? defaultValue : ["true", "1", "on", "yes"].includes(value)));

const positiveInt = (defaultValue: number) => {
  const error = "must be a whole number greater than 0";
  return z.coerce.number({ error }).int({ error }).positive({ error }).optional().default(defaultValue);
};

const notEmpty = (what: string) => z.string().min(1, { error: `must be ${what}` });

const APP_KEY_EXPECTED = "must be at least 32 characters long";

/** "a, b" → ["a", "b"]; blanks dropped. */
const commaList = (value: string | undefined) =>
  (value ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);

const TRUST_PROXY_EXPECTED =
  "must be loopback, or a comma list of IP addresses and CIDR ranges such as 10.0.0.0/8 or fd00::/8";

/** `127.0.0.1` → `127.0.0.1/32`, `10.0.0.0/8` as it is; undefined when the entry is no address or range. */
function addressRange(entry: string): string | undefined {
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return undefined;
  const bits = family === 4 ? 32 : 128;
  if (prefix === undefined) return `${address}/${bits}`;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > bits) return undefined;
  return `${address}/${Number(prefix)}`;
}

/**
 * TRUST_PROXY (contract.md): the peers whose X-Forwarded-For is believed, as CIDR ranges;
 * `loopback` is 127.0.0.0/8 and ::1. Unset: an empty list, and the header is ignored.
 */
const trustProxy = optionalString.transform((value, ctx) => {
  const ranges: string[] = [];
  for (const entry of commaList(value)) {
    const found = entry.toLowerCase() === "loopback" ? ["127.0.0.0/8", "::1/128"] : [addressRange(entry)];
    if (found.includes(undefined)) {
      ctx.addIssue({ code: "custom", message: `${TRUST_PROXY_EXPECTED} (got ${JSON.stringify(entry)})` });
      return z.NEVER;
    }
    ranges.push(...(found as string[]));
  }
  return ranges;
});

/** APP_KEY_PREVIOUS: earlier APP_KEYs, newest first, each as long as an APP_KEY must be. */
const previousAppKeys = optionalString.transform((value, ctx) => {
  const keys = commaList(value);
  if (keys.some((key) => key.length < 32)) {
    ctx.addIssue({
      code: "custom",
      message: "must be a comma list of earlier APP_KEYs, each at least 32 characters long",
    });
    return z.NEVER;
  }
  return keys;
});

const PORT_EXPECTED = "must be a port number: a whole number from 0 to 65535";

/** More server processes than this on one machine is a typo, not a plan (each holds its own connections). */
export const MAX_WEB_CONCURRENCY = 64;
const WEB_CONCURRENCY_EXPECTED = `must be a number of server processes: a whole number from 1 to ${MAX_WEB_CONCURRENCY}`;

const PRESENCE_OFFLINE_EXPECTED = "must be a number of seconds: a whole number from 1 to 600";

const envSchema = z.object({
  PORT: z.coerce
    .number({ error: PORT_EXPECTED })
    .int({ error: PORT_EXPECTED })
    .min(0, { error: PORT_EXPECTED })
    .max(65535, { error: PORT_EXPECTED })
    .default(3000),
  HOST: notEmpty("an address to listen on, such as 0.0.0.0 (every interface) or 127.0.0.1").default("0.0.0.0"),
  DATA_DIR: notEmpty("a folder path").default("./.data"),
  DATABASE_URL: optionalUrl(["postgres", "postgresql"]),
  REDIS_URL: optionalUrl(["redis", "rediss"]),
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:_-]+$/, { error: "must be made of letters, digits, colons, underscores and hyphens" })
    .default("chat"),
  WORKERS: flag(true),
  WEB_CONCURRENCY: z.coerce
    .number({ error: WEB_CONCURRENCY_EXPECTED })
    .int({ error: WEB_CONCURRENCY_EXPECTED })
    .min(1, { error: WEB_CONCURRENCY_EXPECTED })
    .max(MAX_WEB_CONCURRENCY, { error: WEB_CONCURRENCY_EXPECTED })
    .default(1),
  LOG_LEVEL: oneOf(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  APP_URL: httpUrl(),
  APP_KEY: optionalString.pipe(z.string().min(32, { error: APP_KEY_EXPECTED }).optional()),
  APP_KEY_PREVIOUS: previousAppKeys,
  TRUST_PROXY: trustProxy,
  FRONTEND_URL: httpUrl(),
  SMTP_URL: optionalUrl(["smtp", "smtps"]),
  MAIL_FROM: z
    .string()
    .min(3, { error: 'must be a sender address, such as "Chat <no-reply@example.com>"' })
    .default("Chat Service <no-reply@localhost>"),
  SOCIAL_PROVIDERS: optionalString,
  TRANSLATION_PROVIDER: oneOf(["none", "libretranslate", "deepl"]).default("none"),
  TRANSLATION_URL: httpUrl(),
  TRANSLATION_API_KEY: optionalString,
  PUSH_FCM_URL: httpUrl(),
  PUSH_EXPO_URL: httpUrl(),
  PUSH_APNS_URL: httpUrl(),
  PUSH_FCM_CREDENTIALS: optionalString,
  PUSH_EXPO_ACCESS_TOKEN: optionalString,
  PUSH_APNS_KEY: optionalString,
  PUSH_APNS_KEY_ID: optionalString,
  PUSH_APNS_TEAM_ID: optionalString,
  PUSH_APNS_TOPIC: optionalString,
  PUSH_APNS_CA: optionalString,
  WEBHOOK_QUOTA_PER_HOUR: positiveInt(1000),
  PRESENCE_OFFLINE_AFTER_SECONDS: z.coerce
    .number({ error: PRESENCE_OFFLINE_EXPECTED })
    .int({ error: PRESENCE_OFFLINE_EXPECTED })
    .min(1, { error: PRESENCE_OFFLINE_EXPECTED })
    .max(600, { error: PRESENCE_OFFLINE_EXPECTED })
    .default(30),
  OUTBOUND_ALLOW_PRIVATE: flag(false),
  STORAGE_DRIVER: oneOf(["local", "s3"]).default("local"),
  S3_ENDPOINT: httpUrl(),
  S3_BUCKET: optionalString,
  S3_ACCESS_KEY_ID: optionalString,
  S3_SECRET_ACCESS_KEY: optionalString,
  S3_REGION: optionalString,
  MAX_UPLOAD_BYTES: positiveInt(25 * 1024 * 1024),
  METRICS_TOKEN: optionalString,
  QUEUE_DASHBOARD_PASSWORD: optionalString,
});

/** Every variable read from the environment (SOCIAL_<NAME>_* aside). */
export const CONFIG_VARIABLES = Object.keys(envSchema.shape);

const CLIENT_ID_EXPECTED = "must be set for a provider listed in SOCIAL_PROVIDERS";

const socialProviderSchema = z.object({
  CLIENT_ID: z.string({ error: CLIENT_ID_EXPECTED }).min(1, { error: CLIENT_ID_EXPECTED }),
  CLIENT_SECRET: optionalString,
  // An app's own scheme (myapp://callback) is allowed for native clients.
  REDIRECT_URI: optionalString.pipe(
    z
      .url({
        protocol: /^[a-z][a-z0-9+.-]*$/,
        error: "must be a URL, such as https://app.example.com/callback or myapp://callback",
      })
      .optional(),
  ),
  ISSUER: httpUrl(),
  AUTHORIZATION_URL: httpUrl(),
  TOKEN_URL: httpUrl(),
  USERINFO_URL: httpUrl(),
  SCOPES: optionalString,
});

export type SocialProviderConfig = {
  name: string;
  clientId: string;
  clientSecret: string | undefined;
  redirectUri: string | undefined;
  issuer: string | undefined;
  authorizationUrl: string | undefined;
  tokenUrl: string | undefined;
  userinfoUrl: string | undefined;
  /** Space-separated scopes to ask for. */
  scopes: string;
};

/** Issuers used when a well-known provider is enabled without SOCIAL_<NAME>_ISSUER. */
const DEFAULT_ISSUERS: Record<string, string> = {
  google: "https://accounts.google.com",
  apple: "https://appleid.apple.com",
  microsoft: "https://login.microsoftonline.com/common/v2.0",
};

/** Scopes for well-known plain OAuth 2 providers when SOCIAL_<NAME>_SCOPES is unset. */
const DEFAULT_OAUTH2_SCOPES: Record<string, string> = { github: "read:user user:email" };

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Variables whose value is never printed, not even in part. */
const SECRET_VARIABLE = /(_SECRET|_TOKEN|_KEY|_KEY_PREVIOUS|_PASSWORD|_CREDENTIALS)$/;
/** Variables that hold a URL, which may carry a password: only its scheme is printed. */
const URL_VARIABLE = /(_URL|_URI|_ENDPOINT|_ISSUER)$/;

/** What was given, for the message, as far as it can be shown without leaking a secret. */
function describeValue(variable: string, value: unknown): string {
  if (typeof value !== "string") return "";
  if (SECRET_VARIABLE.test(variable)) {
    return value.trim() === "" ? "" : ` (it is ${value.trim().length} characters long)`;
  }
  if (URL_VARIABLE.test(variable)) {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value.trim())?.[1];
    return scheme ? ` (it starts with "${scheme}:")` : " (got something that is not a URL)";
  }
  const shown = value.length > 60 ? `${value.slice(0, 60)}…` : value;
  return ` (got ${JSON.stringify(shown)})`;
}

/** "REDIS_URL must be a URL starting with redis:// or rediss:// (it starts with "http:")"; issues joined by "; ". */
function describeIssues(error: z.ZodError, env: NodeJS.ProcessEnv, prefix = ""): string {
  return error.issues
    .map((issue) => {
      const variable = `${prefix}${issue.path.join(".")}`;
      return `${variable} ${issue.message}${describeValue(variable, env[variable])}`;
    })
    .join("; ");
}

function parseSocialProviders(env: NodeJS.ProcessEnv, list: string | undefined): SocialProviderConfig[] {
  if (!list) return [];
  const names = list
    .split(",")
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  return names.map((name) => {
    if (!/^[a-z0-9_-]+$/.test(name)) {
      throw new ConfigError(
        `Invalid configuration: SOCIAL_PROVIDERS must be a comma-separated list of provider names made of letters, digits, _ and - (got ${JSON.stringify(name)})`,
      );
    }
    const prefix = `SOCIAL_${name.toUpperCase().replace(/-/g, "_")}_`;
    const raw = Object.fromEntries(Object.keys(socialProviderSchema.shape).map((key) => [key, env[`${prefix}${key}`]]));
    const parsed = socialProviderSchema.safeParse(raw);
    if (!parsed.success) {
      throw new ConfigError(`Invalid configuration: ${describeIssues(parsed.error, env, prefix)}`);
    }
    const values = parsed.data;
    const issuer = values.ISSUER ?? (values.AUTHORIZATION_URL ? undefined : DEFAULT_ISSUERS[name]);
    if (!issuer && !(values.AUTHORIZATION_URL && values.TOKEN_URL)) {
      throw new ConfigError(
        `Invalid configuration: ${prefix}ISSUER (an OpenID Connect issuer URL) or both ${prefix}AUTHORIZATION_URL and ${prefix}TOKEN_URL (plain OAuth 2) must be set`,
      );
    }
    return {
      name,
      clientId: values.CLIENT_ID,
      clientSecret: values.CLIENT_SECRET,
      redirectUri: values.REDIRECT_URI,
      issuer,
      authorizationUrl: values.AUTHORIZATION_URL,
      tokenUrl: values.TOKEN_URL,
      userinfoUrl: values.USERINFO_URL,
      scopes: values.SCOPES ?? (issuer ? "openid email profile" : (DEFAULT_OAUTH2_SCOPES[name] ?? "")),
    };
  });
}

/** APP_KEY when unset: generated once into DATA_DIR so signed links survive restarts. */
function loadOrCreateAppKey(dataDir: string): string {
  const keyFile = path.join(dataDir, "app-key");
  if (existsSync(keyFile)) return readFileSync(keyFile, "utf8").trim();
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32).toString("base64url");
  writeFileSync(keyFile, key, { mode: 0o600, flag: "wx" });
  return key;
}

/**
 * Above one process, live events, throttles and presence must be shared between the processes:
 * through PostgreSQL and Redis, never the embedded database or memory.
 */
function requireSharedServices(e: z.infer<typeof envSchema>): void {
  if (e.WEB_CONCURRENCY === 1) return;
  const missing = (["DATABASE_URL", "REDIS_URL"] as const).filter((variable) => e[variable] === undefined);
  if (missing.length === 0) return;
  const why = {
    DATABASE_URL: "the embedded database serves one process only",
    REDIS_URL: "the processes share live events, throttles and presence through Redis",
  };
  const issues = missing.map(
    (variable) => `${variable} must be set when WEB_CONCURRENCY is above 1 (${why[variable]})`,
  );
  throw new ConfigError(`Invalid configuration: ${issues.join("; ")}`);
}

/**
 * The configuration the code reads: the environment parsed, named for the code and grouped.
 * `Config` is this schema's output type; SOCIAL_<NAME>_* variables pass through to their parser.
 */
const configSchema = z.looseObject(envSchema.shape).transform((e) => {
  requireSharedServices(e);
  const dataDir = path.resolve(e.DATA_DIR);
  const appKey = e.APP_KEY ?? loadOrCreateAppKey(dataDir);
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir,
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    runWorkers: e.WORKERS,
    /** Server processes `npm start` runs on the port (server/cluster.ts); 1 is this process alone. */
    webConcurrency: e.WEB_CONCURRENCY,
    logLevel: e.LOG_LEVEL,
    appUrl: (e.APP_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ""),
    appKey,
    /** Earlier APP_KEYs whose values are still opened (and re-sealed under appKey); never appKey itself. */
    previousAppKeys: [...new Set(e.APP_KEY_PREVIOUS)].filter((key) => key !== appKey),
    /** CIDR ranges of the proxies whose X-Forwarded-For is believed; empty: none is. */
    trustProxy: e.TRUST_PROXY,
    frontendUrl: e.FRONTEND_URL,
    mail: { smtpUrl: e.SMTP_URL, from: e.MAIL_FROM },
    socialProviders: parseSocialProviders(e as NodeJS.ProcessEnv, e.SOCIAL_PROVIDERS),
    translation: { provider: e.TRANSLATION_PROVIDER, url: e.TRANSLATION_URL, apiKey: e.TRANSLATION_API_KEY },
    push: {
      fcmUrl: e.PUSH_FCM_URL,
      expoUrl: e.PUSH_EXPO_URL,
      apnsUrl: e.PUSH_APNS_URL,
      fcmCredentials: e.PUSH_FCM_CREDENTIALS,
      expoAccessToken: e.PUSH_EXPO_ACCESS_TOKEN,
      apnsKey: e.PUSH_APNS_KEY,
      apnsKeyId: e.PUSH_APNS_KEY_ID,
      apnsTeamId: e.PUSH_APNS_TEAM_ID,
      apnsTopic: e.PUSH_APNS_TOPIC,
      /** A PEM file of certificate authorities trusted for PUSH_APNS_URL besides the system's. */
      apnsCa: e.PUSH_APNS_CA,
    },
    webhookQuotaPerHour: e.WEBHOOK_QUOTA_PER_HOUR,
    /** How long a user stays `online` after their last live connection closed (docs/presence.md). */
    presenceOfflineAfterSeconds: e.PRESENCE_OFFLINE_AFTER_SECONDS,
    outboundAllowPrivate: e.OUTBOUND_ALLOW_PRIVATE,
    storage: {
      driver: e.STORAGE_DRIVER,
      s3: {
        endpoint: e.S3_ENDPOINT,
        bucket: e.S3_BUCKET,
        accessKeyId: e.S3_ACCESS_KEY_ID,
        secretAccessKey: e.S3_SECRET_ACCESS_KEY,
        region: e.S3_REGION,
      },
    },
    maxUploadBytes: e.MAX_UPLOAD_BYTES,
    /** Bearer token GET /metrics requires; unset, it answers loopback clients only. */
    metricsToken: e.METRICS_TOKEN,
    /** HTTP Basic password of /admin/queues (with Redis); unset, there is no queue dashboard. */
    queueDashboardPassword: e.QUEUE_DASHBOARD_PASSWORD,
  };
});

export type Config = z.output<typeof configSchema>;

/** Parses and validates the environment; throws ConfigError naming the bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(`Invalid configuration: ${describeIssues(parsed.error, env)}`);
  }
  return parsed.data;
}
