// Builds the push clients the configuration allows: Expo always, FCM with a service account,
// APNs with its key, key id, team id and topic. A file that cannot be read or a key that cannot
// be used is a ConfigError naming the variable (never quoting the file's content).
import { createPrivateKey, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Clock } from "../../../clock.ts";
import { ConfigError, type Config } from "../../../config.ts";
import type { Logger } from "../../../logger.ts";
import type { PushProvider, PushProviderName } from "../provider.ts";
import { APNS_DEFAULT_URL, ApnsProvider } from "./apns.ts";
import { EXPO_DEFAULT_URL, ExpoProvider } from "./expo.ts";
import { FCM_DEFAULT_URL, FcmProvider, type FcmServiceAccount } from "./fcm.ts";

export { ApnsProvider, ExpoProvider, FcmProvider };

export type PushProviderDeps = {
  clock: Clock;
  logger: Logger;
  /** Per-request timeout; only tests change it (the default is 10 s). */
  timeoutMs?: number;
};

export function createPushProviders(
  config: Config["push"],
  deps: PushProviderDeps,
): {
  providers: Map<PushProviderName, PushProvider>;
  /** Providers not configured, with why (logged once at start by the caller). */
  skipped: { name: PushProviderName; reason: string }[];
} {
  const providers = new Map<PushProviderName, PushProvider>();
  const skipped: { name: PushProviderName; reason: string }[] = [];
  const common = { clock: deps.clock, logger: deps.logger, timeoutMs: deps.timeoutMs };

  providers.set(
    "expo",
    new ExpoProvider({ ...common, url: config.expoUrl ?? EXPO_DEFAULT_URL, accessToken: config.expoAccessToken }),
  );

  if (config.fcmCredentials) {
    const account = loadFcmServiceAccount(config.fcmCredentials);
    providers.set("fcm", new FcmProvider({ ...common, url: config.fcmUrl ?? FCM_DEFAULT_URL, account }));
  } else {
    skipped.push({ name: "fcm", reason: "PUSH_FCM_CREDENTIALS is not set" });
  }

  const apnsSettings = {
    PUSH_APNS_KEY: config.apnsKey,
    PUSH_APNS_KEY_ID: config.apnsKeyId,
    PUSH_APNS_TEAM_ID: config.apnsTeamId,
    PUSH_APNS_TOPIC: config.apnsTopic,
  };
  const missing = Object.entries(apnsSettings)
    .filter(([, value]) => !value)
    .map(([name]) => name);
  if (missing.length === 0) {
    providers.set(
      "apns",
      new ApnsProvider({
        ...common,
        url: config.apnsUrl ?? APNS_DEFAULT_URL,
        key: loadApnsKey(config.apnsKey!),
        keyId: config.apnsKeyId!,
        teamId: config.apnsTeamId!,
        topic: config.apnsTopic!,
        ca: config.apnsCa ? loadCa(config.apnsCa) : undefined,
      }),
    );
  } else {
    skipped.push({ name: "apns", reason: `${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} not set` });
  }

  return { providers, skipped };
}

function invalid(variable: string, problem: string): ConfigError {
  return new ConfigError(`Invalid configuration: ${variable}: ${problem}`);
}

function readFor(variable: string, file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw invalid(variable, `cannot read ${file}${typeof code === "string" ? ` (${code})` : ""}`);
  }
}

/** A private key in PEM, or undefined when it is not one (the parser's message is not kept: it may quote the key). */
function parsePrivateKey(pem: string): KeyObject | undefined {
  try {
    return createPrivateKey(pem);
  } catch {
    return undefined;
  }
}

/** Reads and checks a Google service-account JSON file (project_id, client_email, private_key, token_uri). */
export function loadFcmServiceAccount(file: string): FcmServiceAccount {
  const variable = "PUSH_FCM_CREDENTIALS";
  const text = readFor(variable, file);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // JSON.parse's message quotes the text, which holds the private key.
    throw invalid(variable, `${file} is not a JSON file`);
  }
  if (typeof json !== "object" || json === null) throw invalid(variable, `${file} is not a service-account JSON file`);
  const fields = ["project_id", "client_email", "private_key", "token_uri"] as const;
  const absent = fields.filter((field) => typeof json[field] !== "string" || json[field] === "");
  if (absent.length > 0) {
    throw invalid(variable, `${file} is not a service-account JSON file (missing ${absent.join(", ")})`);
  }
  const tokenUri = json.token_uri as string;
  if (!URL.canParse(tokenUri) || !/^https?:$/.test(new URL(tokenUri).protocol)) {
    throw invalid(variable, `${file}: token_uri is not an http(s) URL`);
  }
  const privateKey = parsePrivateKey(json.private_key as string);
  if (privateKey?.asymmetricKeyType !== "rsa")
    throw invalid(variable, `${file}: private_key is not an RSA private key`);
  return {
    projectId: json.project_id as string,
    clientEmail: json.client_email as string,
    privateKey,
    tokenUri,
  };
}

/** The APNs .p8 key: PUSH_APNS_KEY is its PEM text (starting with -----BEGIN) or a path to it. */
export function loadApnsKey(value: string): KeyObject {
  const variable = "PUSH_APNS_KEY";
  const inline = value.startsWith("-----BEGIN");
  // A PEM pasted into one environment line often carries "\n" escapes for its line breaks.
  const pem = inline ? (value.includes("\n") ? value : value.replace(/\\n/g, "\n")) : readFor(variable, value);
  const key = parsePrivateKey(pem);
  if (key?.asymmetricKeyType !== "ec" || key.asymmetricKeyDetails?.namedCurve !== "prime256v1") {
    throw invalid(variable, `${inline ? "the key" : value} is not a P-256 private key (.p8)`);
  }
  return key;
}

function loadCa(file: string): string {
  const pem = readFor("PUSH_APNS_CA", file);
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw invalid("PUSH_APNS_CA", `${file} holds no PEM certificate`);
  return pem;
}
