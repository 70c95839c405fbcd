// Rotating APP_KEY (contract.md, APP_KEY_PREVIOUS; docs/operations.md, "Rotating APP_KEY"): a
// server writes one of every secret-bearing record under one key, restarts under a new key with
// the old one in APP_KEY_PREVIOUS, and each still works; values read are sealed again under the
// new key, and keys:rotate does the rest. Without the old key nothing is deleted: webhooks show
// `secret: null`, pushes are skipped, the start says what to set, and the old key brings it all back.
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf } from "../db/client.ts";
import { Keyring } from "../server/keyring.ts";
import { createLogger } from "../server/logger.ts";
import { runAdminCommand } from "../server/services/accounts/admin-commands.ts";
import { signWebhookBody } from "../server/services/webhooks/signature.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { startFakeExpo, type FakeExpo } from "./helpers/push.ts";
import { startReceiver, verify, type Receiver } from "./helpers/receiver.ts";
import { storedSealedValues } from "./helpers/sealed.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { startFakeSmtp, type CapturedMail, type FakeSmtp } from "./helpers/smtp.ts";
import { until } from "./helpers/wait.ts";

const newKey = () => randomBytes(32).toString("base64url");
const KEY_A = newKey();
const KEY_B = newKey();
const KEY_C = newKey();

const logLines: string[] = [];
const logger = createLogger("info", { write: (line: string) => void logLines.push(line) });

let smtp: FakeSmtp;
let expo: FakeExpo;
let receiver: Receiver;
let server: TestServer;
let api: RestClient;

type Webhook = { id: string; secret: string | null; signing_secret: string | null };

/** Everything written under KEY_A, with the secrets as they were shown or mailed then. */
const before = {} as {
  alice: RegisteredUser;
  bob: RegisteredUser;
  workspaceId: string;
  channelId: string;
  conversationId: string;
  deviceId: string;
  pushToken: string;
  staticHook: Webhook;
  signedHook: Webhook;
  outbound: { id: string; secret: string; path: string };
  signInCode: { email: string; code: string };
  verification: { user: RegisteredUser; path: string };
  queuedReset: { user: RegisteredUser };
};

const codeIn = (mail: CapturedMail) => /\b(\d{6})\b/.exec(mail.text)![1]!;
const verificationPathIn = (mail: CapturedMail) =>
  /\/api\/v1\/auth\/email\/verify\/\d+\/[0-9a-f]{40}\?expires=\d+&signature=[0-9a-f]+/.exec(mail.text)![0];
const resetTokenIn = (mail: CapturedMail) => /token=([A-Za-z0-9_-]{20,})/.exec(mail.text)?.[1] ?? "";

async function postThrough(hook: Webhook, content: string, secrets: { secret: string; signing?: string }) {
  const raw = JSON.stringify({ content });
  const t = Math.floor(server.clock.now().getTime() / 1000);
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (secrets.signing) headers["X-Service-Signature"] = `t=${t},v1=${signWebhookBody(secrets.signing, t, raw)}`;
  else headers["X-Service-Webhook-Secret"] = secrets.secret;
  const response = await fetch(`${server.url}/webhooks/${hook.id}/messages`, { method: "POST", headers, body: raw });
  return response.status;
}

async function webhooksListed(): Promise<Webhook[]> {
  const response = await api.get(`/api/v1/workspaces/${before.workspaceId}/webhooks`, { token: before.alice.token });
  expect(response.status).toBe(200);
  return response.body.data;
}

async function outboundListed(): Promise<{ id: string; secret: string | null }[]> {
  const response = await api.get(`/api/v1/workspaces/${before.workspaceId}/outbound-webhooks`, {
    token: before.alice.token,
  });
  expect(response.status).toBe(200);
  return response.body.data;
}

async function directMessage(content: string) {
  const sent = await api.post(
    `/api/v1/direct-conversations/${before.conversationId}/messages`,
    { content },
    { token: before.alice.token },
  );
  expect(sent.status).toBe(201);
  await server.app.deps.relay.flush();
  await server.app.deps.jobOutbox.flush();
}

const pushesToBob = () => expo.received.filter((push) => push.to === before.pushToken);

beforeAll(async () => {
  [smtp, expo, receiver] = await Promise.all([startFakeSmtp(), startFakeExpo(), startReceiver()]);
  server = await startTestServer({ APP_KEY: KEY_A, SMTP_URL: smtp.url, PUSH_EXPO_URL: expo.url }, { logger });
  api = restClient(server.url);

  const [alice, bob, carol, dave, erin] = await Promise.all(
    ["Alice", "Bob", "Carol", "Dave", "Erin"].map((name) => registerUser(api, { name })),
  );
  // Every verification mail is out before SMTP is stopped below.
  await Promise.all([alice, bob, carol, dave, erin].map((user) => smtp.waitForMail(user!.email)));
  Object.assign(before, { alice, bob });
  Object.assign(before, await createWorkspaceWithGeneral(api, alice!));

  before.pushToken = `ExponentPushToken[rotation-${randomBytes(6).toString("hex")}]`;
  const device = await api.post(
    "/api/v1/devices",
    { platform: "ios", provider: "expo", push_token: before.pushToken },
    { token: bob!.token },
  );
  expect(device.status).toBe(201);
  before.deviceId = device.body.data.id;
  const opened = await api.post(
    "/api/v1/direct-conversations",
    { participant_user_id: bob!.id },
    { token: alice!.token },
  );
  before.conversationId = opened.body.data.id;

  for (const [name, signature_required] of [
    ["static", false],
    ["signed", true],
  ] as const) {
    const created = await api.post(
      `/api/v1/workspaces/${before.workspaceId}/webhooks`,
      { name, default_channel_id: before.channelId, signature_required },
      { token: alice!.token },
    );
    expect(created.status).toBe(201);
    if (signature_required) before.signedHook = created.body.data;
    else before.staticHook = created.body.data;
  }
  const path = `/rotation-${randomBytes(4).toString("hex")}`;
  const outbound = await api.post(
    `/api/v1/workspaces/${before.workspaceId}/outbound-webhooks`,
    { url: `${receiver.url}${path}`, events: ["message.created"] },
    { token: alice!.token },
  );
  expect(outbound.status).toBe(201);
  before.outbound = { id: outbound.body.data.id, secret: outbound.body.data.secret, path };

  // A sign-in code mailed, not used yet.
  expect((await api.post("/api/v1/auth/app/otp", { email: carol!.email })).status).toBe(200);
  before.signInCode = { email: carol!.email, code: codeIn(await smtp.waitForMail(carol!.email, { after: 1 })) };
  // A verification link mailed, not opened yet.
  before.verification = { user: dave!, path: verificationPathIn(smtp.mailsTo(dave!.email)[0]!) };
  // A reset mail still queued when the key changes: SMTP is down, so its job waits to be retried.
  await smtp.stop();
  expect((await api.post("/api/v1/auth/app/forgot-password", { email: erin!.email })).status).toBe(200);
  before.queuedReset = { user: erin! };
  await server.app.deps.jobOutbox.flush();
}, 60_000);

afterAll(async () => {
  await server?.close();
  await Promise.all([smtp?.stop(), expo?.stop(), receiver?.stop()]);
});

describe("APP_KEY rotated, the old key in APP_KEY_PREVIOUS", () => {
  beforeAll(async () => {
    server = await server.restart({ APP_KEY: KEY_B, APP_KEY_PREVIOUS: KEY_A });
    api = restClient(server.url);
    await smtp.start();
  }, 60_000);

  it("webhooks keep their secrets: listed as before, and posting with them works", async () => {
    const listed = await webhooksListed();
    expect(listed.find((hook) => hook.id === before.staticHook.id)).toMatchObject({
      secret: before.staticHook.secret,
      signing_secret: before.staticHook.signing_secret,
    });
    expect(await postThrough(before.staticHook, "static, after rotation", { secret: before.staticHook.secret! })).toBe(
      201,
    );
    expect(
      await postThrough(before.signedHook, "signed, after rotation", {
        secret: "",
        signing: before.signedHook.signing_secret!,
      }),
    ).toBe(201);
    expect((await outboundListed()).find((hook) => hook.id === before.outbound.id)?.secret).toBe(
      before.outbound.secret,
    );
  });

  it("an outbound delivery is signed with the secret shown before the rotation", async () => {
    const sent = await api.post(
      `/api/v1/workspaces/${before.workspaceId}/channels/${before.channelId}/messages`,
      { content: "delivered after rotation" },
      { token: before.alice.token },
    );
    expect(sent.status).toBe(201);
    await server.app.deps.relay.flush();
    await server.app.deps.jobOutbox.flush();
    // Posts through the inbound webhooks (the test before) reach this receiver too: wait for this one.
    const delivery = await receiver.waitForBody(before.outbound.path, "delivered after rotation");
    expect(verify(delivery, before.outbound.secret)).toBe(true);
  });

  it("a push reaches the device registered before, and registering it again keeps one device", async () => {
    await directMessage("push after rotation");
    await until(() => (pushesToBob().length >= 1 ? true : undefined), "Bob's push");
    const again = await api.post(
      "/api/v1/devices",
      { platform: "ios", provider: "expo", push_token: before.pushToken },
      { token: before.bob.token },
    );
    expect(again.status).toBe(201);
    expect(again.body.data.id).toBe(before.deviceId);
    const rows = await server.app.deps.db.execute<{ id: string }>(
      sql`select id from push_devices where user_id = ${before.bob.id}`,
    );
    expect(rowsOf<{ id: string }>(rows).map((row) => row.id)).toEqual([before.deviceId]);
  });

  it("a sign-in code and a verification link mailed before the rotation still work", async () => {
    const signedIn = await api.post("/api/v1/auth/app/otp/verify", {
      email: before.signInCode.email,
      token: before.signInCode.code,
    });
    expect(signedIn.status).toBe(200);
    expect((await api.get(before.verification.path)).status).toBe(200);
    const me = await api.get("/api/v1/me", { token: before.verification.user.token });
    expect(me.body.email_verified_at).not.toBeNull();
  });

  it("a mail job queued under the old key is sent after the rotation, and its token resets the password", async () => {
    const { user } = before.queuedReset;
    // The job failed while SMTP was down; its retry (or the outbox handing it over again) runs now.
    server.clock.advance(60_000);
    await server.app.deps.jobOutbox.flush();
    const mail = await smtp.waitForMail(user.email, { after: 1, timeoutMs: 60_000 });
    const token = resetTokenIn(mail);
    expect(token).not.toBe("");
    const password = "a-new-password-after-rotation";
    const reset = await api.post("/api/v1/auth/app/reset-password", {
      email: user.email,
      token,
      password,
      password_confirmation: password,
    });
    expect(reset.status).toBe(200);
  }, 90_000);

  it("values read were sealed again under the new key; keys:rotate seals the rest and reports counts", async () => {
    const newKeys = new Keyring(KEY_B);
    const { db, clock, keys } = server.app.deps;
    const report = await runAdminCommand({ db, clock, keys, logger: createLogger("silent") }, ["keys:rotate"]);
    expect(report).toContain("push device tokens: ");
    expect(report).toContain("Every stored secret is sealed under the current APP_KEY.");
    const values = await storedSealedValues(server.app.deps.db);
    expect(values.length).toBeGreaterThanOrEqual(4);
    for (const value of values) expect(newKeys.isCurrent(value)).toBe(true);
    // Nothing is left for a second run.
    const second = await runAdminCommand({ db, clock, keys, logger: createLogger("silent") }, ["keys:rotate"]);
    expect(second).toMatch(/push device tokens: 0 sealed again/);
  });
});

describe("APP_KEY changed without the key that sealed the values", () => {
  beforeAll(async () => {
    logLines.length = 0;
    server = await server.restart({ APP_KEY: KEY_C, APP_KEY_PREVIOUS: "" });
    api = restClient(server.url);
  }, 60_000);

  it("the start says how many values of which kind no key opens, and what to set", async () => {
    const line = await until(
      () => logLines.find((entry) => entry.includes("cannot be opened with APP_KEY or APP_KEY_PREVIOUS")),
      "the start's key report",
    );
    const entry = JSON.parse(line);
    expect(entry.level).toBe(50);
    expect(entry.msg).toContain("1 push device tokens");
    expect(entry.msg).toContain("set APP_KEY_PREVIOUS");
    expect(entry["inbound webhook secrets"]).toBe(2);
    expect(entry["outbound webhook secrets"]).toBe(1);
    expect(line).not.toContain(KEY_B);
    expect(logLines.filter((entry) => entry.includes("cannot be opened with APP_KEY"))).toHaveLength(1);
  });

  it("webhooks are listed with secret null and refuse their old secret; nothing is deleted", async () => {
    const listed = await webhooksListed();
    expect(listed.find((hook) => hook.id === before.staticHook.id)).toMatchObject({
      secret: null,
      signing_secret: null,
    });
    expect((await outboundListed()).find((hook) => hook.id === before.outbound.id)?.secret).toBeNull();
    expect(await postThrough(before.staticHook, "refused", { secret: before.staticHook.secret! })).toBe(401);
  });

  it("a push to a device whose token no key opens is skipped, and the device is kept", async () => {
    const pushed = pushesToBob().length;
    await directMessage("not pushed: no key opens the token");
    await until(
      () => (logLines.some((entry) => entry.includes("no configured key opens")) ? true : undefined),
      "the skipped push's log line",
    );
    expect(pushesToBob()).toHaveLength(pushed);
    const rows = await server.app.deps.db.execute(sql`select id from push_devices where id = ${before.deviceId}`);
    expect(rowsOf(rows)).toHaveLength(1);
  });

  it("putting the old key in APP_KEY_PREVIOUS brings every value back", async () => {
    server = await server.restart({ APP_KEY: KEY_C, APP_KEY_PREVIOUS: KEY_B });
    api = restClient(server.url);
    const listed = await webhooksListed();
    expect(listed.find((hook) => hook.id === before.staticHook.id)?.secret).toBe(before.staticHook.secret);
    expect(await postThrough(before.staticHook, "back again", { secret: before.staticHook.secret! })).toBe(201);
    const pushed = pushesToBob().length;
    await directMessage("pushed again");
    await until(() => (pushesToBob().length > pushed ? true : undefined), "Bob's push with the key back");
  }, 60_000);
});
