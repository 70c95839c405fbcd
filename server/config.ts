// Configuration is parsed once, at boot, from the environment (contract.md, "Running it").
// Nothing else in the code reads process.env: everything takes a Config.
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";
import { z } from "zod";

const optionalString = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === "" ? undefined : value.trim()));

const optionalUrl = (protocols: RegExp) =>
  optionalString.pipe(z.url({ protocol: protocols, message: `must be a URL (${protocols.source})` }).optional());

const flag = (defaultValue: boolean) =>
  z
    .enum(["true", "false", "1", "0", "on", "off", "yes", "no"], {
      message: "must be true/false, on/off, yes/no or 1/0",
    })
    .optional()
    .transform((value) => (value === undefined ? defaultValue : ["true", "1", "on", "yes"].includes(value)));

const positiveInt = (defaultValue: number) =>
  z.coerce.number({ message: "must be a whole number" }).int().positive().optional().default(defaultValue);

const envSchema = z.object({
  PORT: z.coerce.number({ message: "must be a port number" }).int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default("0.0.0.0"),
  DATA_DIR: z.string().min(1).default("./.data"),
  DATABASE_URL: optionalUrl(/^postgres(ql)?$/),
  REDIS_URL: optionalUrl(/^rediss?$/),
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:_-]+$/, "letters, digits, : _ - only")
    .default("chat"),
  WORKERS: flag(true),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  APP_URL: optionalUrl(/^https?$/),
  APP_KEY: optionalString.pipe(z.string().min(32, "must be at least 32 characters").optional()),
  FRONTEND_URL: optionalUrl(/^https?$/),
  SMTP_URL: optionalUrl(/^smtps?$/),
  MAIL_FROM: z.string().min(3).default("Chat Service <no-reply@localhost>"),
  SOCIAL_PROVIDERS: optionalString,
  TRANSLATION_PROVIDER: z.enum(["none", "libretranslate", "deepl"]).default("none"),
  TRANSLATION_URL: optionalUrl(/^https?$/),
  TRANSLATION_API_KEY: optionalString,
  PUSH_FCM_URL: optionalUrl(/^https?$/),
  PUSH_EXPO_URL: optionalUrl(/^https?$/),
  PUSH_APNS_URL: optionalUrl(/^https?$/),
  PUSH_FCM_CREDENTIALS: optionalString,
  PUSH_EXPO_ACCESS_TOKEN: optionalString,
  PUSH_APNS_KEY: optionalString,
  PUSH_APNS_KEY_ID: optionalString,
  PUSH_APNS_TEAM_ID: optionalString,
  PUSH_APNS_TOPIC: optionalString,
  PUSH_APNS_CA: optionalString,
  WEBHOOK_QUOTA_PER_HOUR: positiveInt(1000),
  OUTBOUND_ALLOW_PRIVATE: flag(false),
  STORAGE_DRIVER: z.enum(["local", "s3"]).default("local"),
  S3_ENDPOINT: optionalUrl(/^https?$/),
  S3_BUCKET: optionalString,
  S3_ACCESS_KEY_ID: optionalString,
  S3_SECRET_ACCESS_KEY: optionalString,
  S3_REGION: optionalString,
  MAX_UPLOAD_BYTES: positiveInt(25 * 1024 * 1024),
});

const socialProviderSchema = z.object({
  CLIENT_ID: z.string().min(1, "is required for an enabled provider"),
  CLIENT_SECRET: optionalString,
  REDIRECT_URI: optionalUrl(/^https?$|^[a-z][a-z0-9+.-]*$/),
  ISSUER: optionalUrl(/^https?$/),
  AUTHORIZATION_URL: optionalUrl(/^https?$/),
  TOKEN_URL: optionalUrl(/^https?$/),
  USERINFO_URL: optionalUrl(/^https?$/),
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

export type Config = {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  redisPrefix: string;
  runWorkers: boolean;
  logLevel: z.infer<typeof envSchema>["LOG_LEVEL"];
  appUrl: string;
  appKey: string;
  frontendUrl: string | undefined;
  mail: { smtpUrl: string | undefined; from: string };
  socialProviders: SocialProviderConfig[];
  translation: { provider: "none" | "libretranslate" | "deepl"; url: string | undefined; apiKey: string | undefined };
  push: {
    fcmUrl: string | undefined;
    expoUrl: string | undefined;
    apnsUrl: string | undefined;
    fcmCredentials: string | undefined;
    expoAccessToken: string | undefined;
    apnsKey: string | undefined;
    apnsKeyId: string | undefined;
    apnsTeamId: string | undefined;
    apnsTopic: string | undefined;
    /** A PEM file of certificate authorities trusted for PUSH_APNS_URL besides the system's. */
    apnsCa: string | undefined;
  };
  webhookQuotaPerHour: number;
  outboundAllowPrivate: boolean;
  storage: {
    driver: "local" | "s3";
    s3: {
      endpoint: string | undefined;
      bucket: string | undefined;
      accessKeyId: string | undefined;
      secretAccessKey: string | undefined;
      region: string | undefined;
    };
  };
  maxUploadBytes: number;
};

export class ConfigError extends Error {
  override name = "ConfigError";
}

function describeIssues(error: z.ZodError, prefix = ""): string {
  return error.issues.map((issue) => `${prefix}${issue.path.join(".")}: ${issue.message}`).join("; ");
}

function parseSocialProviders(env: NodeJS.ProcessEnv, list: string | undefined): SocialProviderConfig[] {
  if (!list) return [];
  const names = list
    .split(",")
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  return names.map((name) => {
    if (!/^[a-z0-9_-]+$/.test(name)) {
      throw new ConfigError(`Invalid configuration: SOCIAL_PROVIDERS: "${name}" is not a valid provider name`);
    }
    const prefix = `SOCIAL_${name.toUpperCase().replace(/-/g, "_")}_`;
    const raw = Object.fromEntries(Object.keys(socialProviderSchema.shape).map((key) => [key, env[`${prefix}${key}`]]));
    const parsed = socialProviderSchema.safeParse(raw);
    if (!parsed.success) {
      throw new ConfigError(`Invalid configuration: ${describeIssues(parsed.error, prefix)}`);
    }
    const values = parsed.data;
    const issuer = values.ISSUER ?? (values.AUTHORIZATION_URL ? undefined : DEFAULT_ISSUERS[name]);
    if (!issuer && !(values.AUTHORIZATION_URL && values.TOKEN_URL)) {
      throw new ConfigError(
        `Invalid configuration: ${prefix}ISSUER, or ${prefix}AUTHORIZATION_URL and ${prefix}TOKEN_URL, must be set`,
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

/** Parses and validates the environment; throws ConfigError naming the bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(`Invalid configuration: ${describeIssues(parsed.error)}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.DATA_DIR);
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir,
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    runWorkers: e.WORKERS,
    logLevel: e.LOG_LEVEL,
    appUrl: (e.APP_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ""),
    appKey: e.APP_KEY ?? loadOrCreateAppKey(dataDir),
    frontendUrl: e.FRONTEND_URL,
    mail: { smtpUrl: e.SMTP_URL, from: e.MAIL_FROM },
    socialProviders: parseSocialProviders(env, e.SOCIAL_PROVIDERS),
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
      apnsCa: e.PUSH_APNS_CA,
    },
    webhookQuotaPerHour: e.WEBHOOK_QUOTA_PER_HOUR,
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
  };
}
