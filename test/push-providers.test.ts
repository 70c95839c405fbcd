// The push clients (Expo, FCM HTTP v1, APNs over HTTP/2) against fake services on 127.0.0.1
// (test/helpers/push.ts): what each sends, how each answer becomes an outcome, credentials
// (FCM access tokens, APNs provider tokens) reused and renewed by the clock, and the factory.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ManualClock } from "../server/clock.ts";
import { ConfigError, loadConfig } from "../server/config.ts";
import { createLogger } from "../server/logger.ts";
import type {
  PushNotification,
  PushOutcome,
  PushProvider,
  PushProviderName,
  PushSend,
} from "../server/services/push/provider.ts";
import { parseRetryAfter } from "../server/provider-http.ts";
import { createPushProviders } from "../server/services/push/providers/index.ts";
import {
  startFakeApns,
  startFakeExpo,
  startFakeFcm,
  type FakeApns,
  type FakeExpo,
  type FakeFcm,
} from "./helpers/push.ts";

const logger = createLogger("silent");
const MINUTE = 60_000;
/** Short enough for a test, long enough for a loaded machine to answer a request that is answered. */
const TEST_TIMEOUT_MS = 1_500;

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(path.join(tmpdir(), "push-providers-"));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A config from an environment with nothing but an APP_KEY and the given variables. */
const pushConfig = (variables: Record<string, string> = {}) =>
  loadConfig({ DATA_DIR: scratch, APP_KEY: "k".repeat(40), ...variables }).push;

function build(variables: Record<string, string>, name: PushProviderName, options: { timeoutMs?: number } = {}) {
  const clock = new ManualClock();
  const { providers } = createPushProviders(pushConfig(variables), { clock, logger, ...options });
  const provider = providers.get(name);
  if (!provider) throw new Error(`${name} was not configured`);
  return { provider, clock };
}

/** A send of a notification (not a silent badge update). */
type NotificationSend = PushSend & { notification: PushNotification };

function makeSends(count: number, token: (index: number) => string): NotificationSend[] {
  return Array.from({ length: count }, (_, index) => ({
    target: { deviceId: `device-${index}`, token: token(index), platform: "ios" },
    notification: {
      title: `Title ${index}`,
      body: `Body ${index} — héllo`,
      data: { channel_id: "42", message_id: String(1000 + index) },
      threadId: "channel-42",
    },
  }));
}

/** The same sends with each recipient's badge (7, 8, …), and a silent badge update (badge 0) for a last device. */
function withBadges(sends: NotificationSend[], token: (index: number) => string): PushSend[] {
  const silent: PushSend = {
    target: { deviceId: "device-silent", token: token(sends.length), platform: "ios" },
    badge: 0,
  };
  return [...sends.map((send, index) => ({ ...send, badge: 7 + index })), silent];
}

const byDevice = (outcomes: PushOutcome[]) => new Map(outcomes.map((outcome) => [outcome.deviceId, outcome]));
const results = (outcomes: PushOutcome[]) => outcomes.map((outcome) => outcome.result);

describe("Expo", () => {
  let fake: FakeExpo;
  let provider: PushProvider;
  const expoToken = (index: number) => `ExponentPushToken[${randomBytes(8).toString("hex")}-${index}]`;

  beforeAll(async () => {
    fake = await startFakeExpo();
  });
  afterAll(() => fake.stop());
  beforeEach(() => {
    fake.received.length = 0;
    fake.batchSizes.length = 0;
    provider = build({ PUSH_EXPO_URL: fake.url, PUSH_EXPO_ACCESS_TOKEN: "expo-secret" }, "expo").provider;
  });
  afterEach(async () => {
    fake.recover();
    await provider.close();
  });

  it("sends a batch in one request with title, body and data intact and the access token", async () => {
    const sends = makeSends(3, expoToken);
    const outcomes = await provider.send(sends);
    expect(outcomes).toEqual(sends.map((send) => ({ deviceId: send.target.deviceId, result: "sent" })));
    expect(fake.batchSizes).toEqual([3]);
    expect(fake.received.map(({ headers, ...message }) => message)).toEqual(
      sends.map(({ target, notification }) => ({
        to: target.token,
        title: notification.title,
        body: notification.body,
        data: notification.data,
        sound: "default",
        priority: "high",
      })),
    );
    const headers = fake.received[0]!.headers;
    expect(headers.authorization).toBe("Bearer expo-secret");
    expect(headers.accept).toBe("application/json");
    expect(headers["content-type"]).toBe("application/json");
  });

  it("carries each recipient's badge, and sends a silent update as a badge without title or body", async () => {
    const sends = withBadges(makeSends(2, expoToken), expoToken);
    expect(results(await provider.send(sends))).toEqual(["sent", "sent", "sent"]);
    const received = new Map(fake.received.map(({ headers, ...message }) => [message.to, message]));
    expect(received.get(sends[0]!.target.token)).toMatchObject({ title: "Title 0", badge: 7, priority: "high" });
    expect(received.get(sends[1]!.target.token)).toMatchObject({ title: "Title 1", badge: 8 });
    expect(received.get(sends[2]!.target.token)).toEqual({
      to: sends[2]!.target.token,
      badge: 0,
      data: { type: "badge", badge: "0" },
      priority: "normal",
    });
  });

  it("sends no authorization header without an access token", async () => {
    const { provider: anonymous } = build({ PUSH_EXPO_URL: fake.url }, "expo");
    await anonymous.send(makeSends(1, expoToken));
    expect(fake.received[0]!.headers.authorization).toBeUndefined();
  });

  it("takes 100 messages per send, in one request", async () => {
    expect(provider.batchSize).toBe(100);
    const outcomes = await provider.send(makeSends(100, expoToken));
    expect(results(outcomes)).toEqual(Array(100).fill("sent"));
    expect(fake.batchSizes).toEqual([100]);
    expect(fake.received).toHaveLength(100);
  });

  it("reports a DeviceNotRegistered ticket as unregistered, without the token in the reason", async () => {
    const sends = makeSends(3, expoToken);
    fake.unregister(sends[1]!.target.token);
    const outcomes = byDevice(await provider.send(sends));
    expect(outcomes.get("device-0")!.result).toBe("sent");
    expect(outcomes.get("device-2")!.result).toBe("sent");
    const dead = outcomes.get("device-1")!;
    expect(dead).toMatchObject({ result: "unregistered", reason: expect.stringContaining("DeviceNotRegistered") });
    expect(JSON.stringify(dead)).not.toContain(sends[1]!.target.token);
  });

  it("retries every message of a 503 after its Retry-After", async () => {
    fake.fail(503, { retryAfter: 2, times: 1 });
    const outcomes = await provider.send(makeSends(2, expoToken));
    expect(outcomes).toEqual([
      expect.objectContaining({ result: "retry", retryAfterMs: 2000 }),
      expect.objectContaining({ result: "retry", retryAfterMs: 2000 }),
    ]);
  });

  it("retries a 429", async () => {
    fake.fail(429, { times: 1 });
    const outcomes = await provider.send(makeSends(2, expoToken));
    expect(results(outcomes)).toEqual(["retry", "retry"]);
    expect(outcomes[0]).not.toHaveProperty("retryAfterMs");
  });

  it("fails every message of a 400", async () => {
    fake.fail(400, { times: 1 });
    const outcomes = await provider.send(makeSends(2, expoToken));
    expect(results(outcomes)).toEqual(["failed", "failed"]);
  });

  it("retries when Expo does not answer in time, or cannot be reached", async () => {
    const { provider: impatient } = build({ PUSH_EXPO_URL: fake.url }, "expo", { timeoutMs: 300 });
    fake.hang();
    const outcomes = await impatient.send(makeSends(2, expoToken));
    expect(outcomes).toEqual([
      expect.objectContaining({ result: "retry", reason: "expo: timeout" }),
      expect.objectContaining({ result: "retry", reason: "expo: timeout" }),
    ]);

    const closed = await startFakeExpo();
    await closed.stop();
    const { provider: unreachable } = build({ PUSH_EXPO_URL: closed.url }, "expo");
    const refused = await unreachable.send(makeSends(1, expoToken));
    expect(refused).toEqual([
      expect.objectContaining({ result: "retry", reason: expect.stringContaining("connection") }),
    ]);
  });
});

describe("FCM", () => {
  let fake: FakeFcm;
  let provider: PushProvider;
  let clock: ManualClock;
  const fcmToken = (index: number) => `fcm-${randomBytes(12).toString("base64url")}-${index}`;

  beforeAll(async () => {
    fake = await startFakeFcm();
  });
  afterAll(() => fake.stop());
  beforeEach(() => {
    fake.received.length = 0;
    ({ provider, clock } = build(fake.env, "fcm", { timeoutMs: TEST_TIMEOUT_MS }));
  });
  afterEach(async () => {
    fake.recover();
    await provider.close();
  });

  it("sends one request per device with the notification, data and an issued access token", async () => {
    const sends = makeSends(5, fcmToken);
    const outcomes = await provider.send(sends);
    expect(results(outcomes)).toEqual(Array(5).fill("sent"));
    expect(fake.received).toHaveLength(5);
    const received = new Map(fake.received.map((entry) => [entry.token, entry]));
    for (const { target, notification } of sends) {
      const entry = received.get(target.token)!;
      expect(entry.message).toEqual({
        token: target.token,
        notification: { title: notification.title, body: notification.body },
        data: notification.data,
        android: { priority: "HIGH", notification: { tag: "channel-42" } },
        apns: { payload: { aps: { "thread-id": "channel-42", sound: "default" } } },
        webpush: { headers: { Urgency: "high" } },
      });
      expect(entry.headers.authorization).toMatch(/^Bearer ya29\.fake-/);
    }
  });

  it("carries the badge in data (a string), the Android count and aps; a silent update is a data message", async () => {
    const sends = withBadges(makeSends(1, fcmToken), fcmToken);
    expect(results(await provider.send(sends))).toEqual(["sent", "sent"]);
    const received = new Map(fake.received.map((entry) => [entry.token, entry.message]));
    expect(received.get(sends[0]!.target.token)).toEqual({
      token: sends[0]!.target.token,
      notification: { title: "Title 0", body: "Body 0 — héllo" },
      data: { channel_id: "42", message_id: "1000", badge: "7" },
      android: { priority: "HIGH", notification: { tag: "channel-42", notification_count: 7 } },
      apns: { payload: { aps: { "thread-id": "channel-42", sound: "default", badge: 7 } } },
      webpush: { headers: { Urgency: "high" } },
    });
    const silent = received.get(sends[1]!.target.token)!;
    expect(silent).toEqual({
      token: sends[1]!.target.token,
      data: { type: "badge", badge: "0" },
      android: { priority: "NORMAL" },
      apns: { headers: { "apns-push-type": "alert", "apns-priority": "5" }, payload: { aps: { badge: 0 } } },
    });
    expect(silent).not.toHaveProperty("notification");
  });

  it("reuses its access token and fetches a new one when the clock passes its expiry", async () => {
    const grants = fake.tokenGrants;
    await provider.send(makeSends(3, fcmToken));
    await provider.send(makeSends(3, fcmToken));
    expect(fake.tokenGrants).toBe(grants + 1);
    clock.advance(54 * MINUTE);
    await provider.send(makeSends(1, fcmToken));
    expect(fake.tokenGrants).toBe(grants + 1);
    clock.advance(2 * MINUTE); // 56 minutes: within five minutes of the hour the token lasts
    const outcomes = await provider.send(makeSends(1, fcmToken));
    expect(results(outcomes)).toEqual(["sent"]);
    expect(fake.tokenGrants).toBe(grants + 2);
  });

  it("fetches a new access token once when FCM answers 401", async () => {
    await provider.send(makeSends(1, fcmToken));
    const grants = fake.tokenGrants;
    fake.revokeAccessTokens();
    const outcomes = await provider.send(makeSends(4, fcmToken));
    expect(results(outcomes)).toEqual(Array(4).fill("sent"));
    expect(fake.tokenGrants).toBe(grants + 1);
  });

  it("retries every send when no access token can be had", async () => {
    fake.failTokenEndpoint(503);
    const outcomes = await provider.send(makeSends(3, fcmToken));
    expect(outcomes).toEqual(
      Array(3).fill(expect.objectContaining({ result: "retry", reason: "fcm: no access token" })),
    );
    expect(fake.received).toHaveLength(0);
  });

  it("reports UNREGISTERED (404) as unregistered, without the token in the reason", async () => {
    const sends = makeSends(2, fcmToken);
    fake.unregister(sends[0]!.target.token);
    const outcomes = byDevice(await provider.send(sends));
    expect(outcomes.get("device-0")).toEqual({
      deviceId: "device-0",
      result: "unregistered",
      reason: "fcm: UNREGISTERED",
    });
    expect(outcomes.get("device-1")!.result).toBe("sent");
  });

  it("retries a 503 after its Retry-After, and a 429", async () => {
    fake.fail(503, { retryAfter: 2, times: 1 });
    expect(await provider.send(makeSends(1, fcmToken))).toEqual([
      expect.objectContaining({ result: "retry", retryAfterMs: 2000 }),
    ]);
    fake.fail(429, { times: 1 });
    expect(results(await provider.send(makeSends(1, fcmToken)))).toEqual(["retry"]);
  });

  it("fails a 400 INVALID_ARGUMENT", async () => {
    fake.fail(400, { times: 1 });
    const [outcome] = await provider.send(makeSends(1, fcmToken));
    expect(outcome).toMatchObject({ result: "failed", reason: expect.stringContaining("INVALID_ARGUMENT") });
  });

  it("retries when FCM does not answer in time", async () => {
    await provider.send(makeSends(1, fcmToken)); // an access token first: the token endpoint still answers
    fake.hang();
    const outcomes = await provider.send(makeSends(2, fcmToken));
    expect(outcomes).toEqual(Array(2).fill(expect.objectContaining({ result: "retry", reason: "fcm: timeout" })));
  });
});

describe("APNs", () => {
  let fake: FakeApns;
  let provider: PushProvider;
  let clock: ManualClock;
  const apnsToken = () => randomBytes(32).toString("hex");

  beforeAll(async () => {
    fake = await startFakeApns();
  });
  afterAll(() => fake.stop());
  beforeEach(() => {
    fake.received.length = 0;
    ({ provider, clock } = build(fake.env, "apns", { timeoutMs: TEST_TIMEOUT_MS }));
  });
  afterEach(async () => {
    fake.recover();
    await provider.close();
  });

  it("sends each device its alert on one HTTP/2 session, with a verified provider token", async () => {
    const sessions = fake.sessionsOpened;
    const sends = makeSends(5, apnsToken);
    expect(results(await provider.send(sends))).toEqual(Array(5).fill("sent"));
    expect(results(await provider.send(makeSends(2, apnsToken)))).toEqual(["sent", "sent"]);
    expect(fake.sessionsOpened).toBe(sessions + 1);
    const received = new Map(fake.received.map((entry) => [entry.token, entry]));
    for (const { target, notification } of sends) {
      const entry = received.get(target.token)!;
      expect(entry.payload).toEqual({
        aps: {
          alert: { title: notification.title, body: notification.body },
          sound: "default",
          "thread-id": "channel-42",
        },
        ...notification.data,
      });
      expect(entry.headers["apns-topic"]).toBe(fake.env.PUSH_APNS_TOPIC);
      expect(entry.headers["apns-push-type"]).toBe("alert");
      expect(entry.headers["apns-priority"]).toBe("10");
    }
  });

  it("carries the badge in aps; a silent update is aps.badge alone, push type alert, priority 5", async () => {
    const sends = withBadges(makeSends(1, apnsToken), apnsToken);
    expect(results(await provider.send(sends))).toEqual(["sent", "sent"]);
    const received = new Map(fake.received.map((entry) => [entry.token, entry]));
    const alert = received.get(sends[0]!.target.token)!;
    expect(alert.payload.aps).toEqual({
      alert: { title: "Title 0", body: "Body 0 — héllo" },
      sound: "default",
      "thread-id": "channel-42",
      badge: 7,
    });
    expect(alert.headers["apns-priority"]).toBe("10");
    const silent = received.get(sends[1]!.target.token)!;
    expect(silent.payload).toEqual({ aps: { badge: 0 }, type: "badge", badge: "0" });
    expect(silent.headers["apns-push-type"]).toBe("alert");
    expect(silent.headers["apns-priority"]).toBe("5");
  });

  it("reuses its provider token for 50 minutes, then makes a new one", async () => {
    const tokens = fake.providerTokens;
    await provider.send(makeSends(3, apnsToken));
    clock.advance(49 * MINUTE);
    await provider.send(makeSends(1, apnsToken));
    expect(fake.providerTokens).toBe(tokens + 1);
    clock.advance(2 * MINUTE);
    expect(results(await provider.send(makeSends(1, apnsToken)))).toEqual(["sent"]);
    expect(fake.providerTokens).toBe(tokens + 2);
  });

  it("makes a new provider token and tries once more on ExpiredProviderToken", async () => {
    await provider.send(makeSends(1, apnsToken));
    const tokens = fake.providerTokens;
    fake.fail(403, { reason: "ExpiredProviderToken", times: 1 });
    expect(results(await provider.send(makeSends(1, apnsToken)))).toEqual(["sent"]);
    expect(fake.providerTokens).toBe(tokens + 1);
  });

  it("reports 410 Unregistered and 400 BadDeviceToken as unregistered", async () => {
    const sends = makeSends(2, apnsToken);
    fake.unregister(sends[0]!.target.token);
    const outcomes = byDevice(await provider.send(sends));
    expect(outcomes.get("device-0")).toEqual({
      deviceId: "device-0",
      result: "unregistered",
      reason: "apns: Unregistered",
    });
    expect(outcomes.get("device-1")!.result).toBe("sent");

    fake.fail(400, { reason: "BadDeviceToken", times: 1 });
    expect(await provider.send(makeSends(1, apnsToken))).toEqual([
      { deviceId: "device-0", result: "unregistered", reason: "apns: BadDeviceToken" },
    ]);
  });

  it("retries a 503 after its Retry-After, and a 429", async () => {
    fake.fail(503, { retryAfter: 2, times: 1 });
    expect(await provider.send(makeSends(1, apnsToken))).toEqual([
      expect.objectContaining({ result: "retry", retryAfterMs: 2000 }),
    ]);
    fake.fail(429, { times: 1 });
    expect(results(await provider.send(makeSends(1, apnsToken)))).toEqual(["retry"]);
  });

  it("fails another 400 with APNs' reason", async () => {
    fake.fail(400, { reason: "BadTopic", times: 1 });
    expect(await provider.send(makeSends(1, apnsToken))).toEqual([
      { deviceId: "device-0", result: "failed", reason: "apns: 400 BadTopic" },
    ]);
  });

  it("retries when APNs does not answer in time, then sends on a new session", async () => {
    await provider.send(makeSends(1, apnsToken));
    const sessions = fake.sessionsOpened;
    fake.hang();
    const outcomes = await provider.send(makeSends(2, apnsToken));
    expect(outcomes).toEqual(Array(2).fill(expect.objectContaining({ result: "retry", reason: "apns: timeout" })));
    fake.recover();
    expect(results(await provider.send(makeSends(1, apnsToken)))).toEqual(["sent"]);
    expect(fake.sessionsOpened).toBe(sessions + 1);
  });

  it("trusts the service's certificate only through PUSH_APNS_CA, and retries when it cannot connect", async () => {
    const { PUSH_APNS_CA: _ca, ...withoutCa } = fake.env;
    const { provider: untrusting } = build(withoutCa, "apns");
    expect(await untrusting.send(makeSends(1, apnsToken))).toEqual([
      expect.objectContaining({ result: "retry", reason: expect.stringContaining("connection error") }),
    ]);
    await untrusting.close();
    expect(fake.received).toHaveLength(0);

    const closed = await startFakeApns();
    await closed.stop();
    const { provider: unreachable } = build({ ...fake.env, PUSH_APNS_URL: closed.env.PUSH_APNS_URL }, "apns");
    expect(await unreachable.send(makeSends(2, apnsToken))).toEqual(
      Array(2).fill(expect.objectContaining({ result: "retry", reason: expect.stringContaining("connection error") })),
    );
    await unreachable.close();
  });

  it("accepts the key as PEM text in PUSH_APNS_KEY", async () => {
    const pem = readFileSync(fake.env.PUSH_APNS_KEY, "utf8");
    const { provider: inline } = build({ ...fake.env, PUSH_APNS_KEY: pem }, "apns");
    expect(results(await inline.send(makeSends(1, apnsToken)))).toEqual(["sent"]);
    await inline.close();
  });
});

describe("createPushProviders", () => {
  const factory = (variables: Record<string, string>) =>
    createPushProviders(pushConfig(variables), { clock: new ManualClock(), logger });

  function configErrorOf(variables: Record<string, string>): ConfigError {
    try {
      factory(variables);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return error as ConfigError;
    }
    throw new Error("createPushProviders accepted the configuration");
  }

  it("always has Expo, and skips FCM and APNs when they are not configured", () => {
    const { providers, skipped } = factory({});
    expect([...providers.keys()]).toEqual(["expo"]);
    expect(providers.get("expo")!.batchSize).toBe(100);
    const reasons = new Map(skipped.map((entry) => [entry.name, entry.reason]));
    expect(reasons.get("fcm")).toContain("PUSH_FCM_CREDENTIALS");
    for (const variable of ["PUSH_APNS_KEY", "PUSH_APNS_KEY_ID", "PUSH_APNS_TEAM_ID", "PUSH_APNS_TOPIC"]) {
      expect(reasons.get("apns")).toMatch(new RegExp(`\\b${variable}\\b`));
    }
  });

  it("names only the missing APNs variables when some are set", () => {
    const { providers, skipped } = factory({ PUSH_APNS_KEY: "/nowhere/key.p8", PUSH_APNS_TOPIC: "com.example" });
    expect(providers.has("apns")).toBe(false);
    const reason = skipped.find((entry) => entry.name === "apns")!.reason;
    expect(reason).toMatch(/\bPUSH_APNS_KEY_ID\b/);
    expect(reason).toMatch(/\bPUSH_APNS_TEAM_ID\b/);
    expect(reason).not.toMatch(/\bPUSH_APNS_KEY\b/);
    expect(reason).not.toMatch(/\bPUSH_APNS_TOPIC\b/);
  });

  it("refuses a PUSH_FCM_CREDENTIALS that cannot be read or is not a service account", () => {
    expect(configErrorOf({ PUSH_FCM_CREDENTIALS: path.join(scratch, "missing.json") }).message).toContain(
      "PUSH_FCM_CREDENTIALS",
    );
    const secret = "-----BEGIN PRIVATE KEY-----\nTOP-SECRET-KEY-MATERIAL\n-----END PRIVATE KEY-----\n";
    const partial = path.join(scratch, "partial.json");
    writeFileSync(partial, JSON.stringify({ project_id: "p", client_email: "e@example.test", private_key: secret }));
    const missingField = configErrorOf({ PUSH_FCM_CREDENTIALS: partial });
    expect(missingField.message).toContain("PUSH_FCM_CREDENTIALS");
    expect(missingField.message).toContain("token_uri");
    const badKey = path.join(scratch, "bad-key.json");
    writeFileSync(
      badKey,
      JSON.stringify({ project_id: "p", client_email: "e", private_key: secret, token_uri: "https://t.example/token" }),
    );
    const notJson = path.join(scratch, "not-json.json");
    writeFileSync(notJson, `{"private_key": "${secret}`);
    for (const file of [badKey, notJson]) {
      const error = configErrorOf({ PUSH_FCM_CREDENTIALS: file });
      expect(error.message).toContain("PUSH_FCM_CREDENTIALS");
      expect(error.message).not.toContain("TOP-SECRET");
    }
  });

  it("refuses an APNs key or CA that cannot be read or used", async () => {
    const apns = await startFakeApns();
    try {
      const unreadable = configErrorOf({ ...apns.env, PUSH_APNS_KEY: path.join(scratch, "missing.p8") });
      expect(unreadable.message).toContain("PUSH_APNS_KEY");
      const notAKey = configErrorOf({ ...apns.env, PUSH_APNS_KEY: "-----BEGIN PRIVATE KEY-----\nSECRET\n" });
      expect(notAKey.message).toContain("PUSH_APNS_KEY");
      expect(notAKey.message).not.toContain("SECRET");
      const ca = configErrorOf({ ...apns.env, PUSH_APNS_CA: path.join(scratch, "missing-ca.pem") });
      expect(ca.message).toContain("PUSH_APNS_CA");
    } finally {
      await apns.stop();
    }
  });
});

describe("parseRetryAfter", () => {
  it("reads delay-seconds and HTTP dates", () => {
    const now = new Date("2030-01-01T00:00:00Z");
    expect(parseRetryAfter("2", now)).toBe(2000);
    expect(parseRetryAfter("Tue, 01 Jan 2030 00:00:30 GMT", now)).toBe(30_000);
    expect(parseRetryAfter("Mon, 31 Dec 2029 23:00:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("soon", now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});
