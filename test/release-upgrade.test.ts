// Upgrading is itself a rotation (docs/operations.md, "Rotating APP_KEY"): a database written by
// the first release (test/fixtures/release-055fbe8: no key ids, AES-GCM under
// sha256("seal:" + APP_KEY), HMACs keyed with the raw APP_KEY) is opened by this release with the
// same APP_KEY, and every secret-bearing record still works: push devices, inbound and outbound
// webhook secrets, a mailed sign-in code and verification link, mail jobs still queued with their
// sealed secrets, and the tokens people hold. Read values move to the new format, keys:rotate
// moves the rest, and nothing is deleted.
import { readFileSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf } from "../db/client.ts";
import { createLogger } from "../server/logger.ts";
import { runAdminCommand } from "../server/services/accounts/admin-commands.ts";
import { signWebhookBody } from "../server/services/webhooks/signature.ts";
import { loadReleaseFixture, RELEASE_FIXTURE_SECRETS } from "./fixtures/release-055fbe8/load.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { startFakeExpo, type FakeExpo } from "./helpers/push.ts";
import { startReceiver, verify, type Receiver } from "./helpers/receiver.ts";
import { storedSealedValues } from "./helpers/sealed.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { startFakeSmtp, type FakeSmtp } from "./helpers/smtp.ts";
import { until } from "./helpers/wait.ts";

type Hook = { id: string; signature_required: boolean; posting_path: string; secret: string; signing_secret: string };
type Fixture = {
  app_key: string;
  users: Record<string, { id: number; email: string; tokens: { login: { token: string } } }>;
  workspace: { id: string };
  default_channel_of_webhooks: string;
  inbound_webhooks: Hook[];
  outbound_webhook: { id: string; secret: string };
  push_devices: { id: string; user: string; provider: string; push_token: string }[];
  pending_sign_in_code: { email: string; code: string };
  pending_password_reset: { email: string; token: string };
  email_verification: { user: string; path_and_query: string; expires_unix: number };
  queued_jobs: { name: string; email?: string; plaintext: string | null }[];
};

const fixture = JSON.parse(readFileSync(RELEASE_FIXTURE_SECRETS, "utf8")) as Fixture;
const tokenOf = (user: string) => fixture.users[user]!.tokens.login.token;

const logLines: string[] = [];
const logger = createLogger("info", { write: (line: string) => void logLines.push(line) });

let smtp: FakeSmtp;
let expo: FakeExpo;
let receiver: Receiver;
let server: TestServer;
let api: RestClient;

beforeAll(async () => {
  [smtp, expo, receiver] = await Promise.all([startFakeSmtp(), startFakeExpo(), startReceiver()]);
  server = await startTestServer(
    { APP_KEY: fixture.app_key, SMTP_URL: smtp.url, PUSH_EXPO_URL: expo.url },
    {
      logger,
      // The codes and links of the fixture were made with short lifetimes: they are moved to
      // now, as if the upgrade happened minutes after they were mailed.
      seed: (target) =>
        loadReleaseFixture(target, {
          then: `
            update public.one_time_codes set expires_at = now() + interval '10 minutes';
            update public.password_reset_tokens set expires_at = now() + interval '60 minutes';`,
        }),
    },
  );
  api = restClient(server.url);
}, 120_000);

afterAll(async () => {
  await server?.close();
  await Promise.all([smtp?.stop(), expo?.stop(), receiver?.stop()]);
});

describe("a database of the first release, opened with the same APP_KEY", () => {
  it("the start says which values are in the earlier format, and none is unreadable", async () => {
    const line = await until(
      () => logLines.find((entry) => entry.includes("are sealed under an earlier key")),
      "the start's key report",
    );
    const entry = JSON.parse(line);
    expect(entry["push device tokens"]).toBe(fixture.push_devices.length);
    expect(entry["inbound webhook secrets"]).toBe(fixture.inbound_webhooks.length);
    expect(entry["outbound webhook secrets"]).toBe(1);
    expect(logLines.some((entry) => entry.includes("cannot be opened"))).toBe(false);
  });

  it("the tokens people hold still sign them in", async () => {
    for (const user of Object.keys(fixture.users)) {
      expect((await api.get("/api/v1/me", { token: tokenOf(user) })).status).toBe(200);
    }
  });

  it("inbound webhooks show their secrets and accept posts with them, by secret and by signature", async () => {
    const listed = await api.get(`/api/v1/workspaces/${fixture.workspace.id}/webhooks`, { token: tokenOf("alice") });
    expect(listed.status).toBe(200);
    for (const hook of fixture.inbound_webhooks) {
      expect(listed.body.data.find((row: { id: string }) => row.id === hook.id)).toMatchObject({
        secret: hook.secret,
        signing_secret: hook.signing_secret,
      });
      const raw = JSON.stringify({ content: `after the upgrade (${hook.id})` });
      const t = Math.floor(server.clock.now().getTime() / 1000);
      const headers: Record<string, string> = hook.signature_required
        ? { "X-Service-Signature": `t=${t},v1=${signWebhookBody(hook.signing_secret, t, raw)}` }
        : { "X-Service-Webhook-Secret": hook.secret };
      const response = await fetch(`${server.url}${hook.posting_path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body: raw,
      });
      expect(response.status).toBe(201);
    }
  });

  it("the outbound webhook signs deliveries with the secret it showed", async () => {
    const base = `/api/v1/workspaces/${fixture.workspace.id}/outbound-webhooks/${fixture.outbound_webhook.id}`;
    const shown = await api.get(`/api/v1/workspaces/${fixture.workspace.id}/outbound-webhooks`, {
      token: tokenOf("alice"),
    });
    expect(shown.body.data.find((row: { id: string }) => row.id === fixture.outbound_webhook.id)?.secret).toBe(
      fixture.outbound_webhook.secret,
    );
    const moved = await api.put(base, { url: `${receiver.url}/upgrade` }, { token: tokenOf("alice") });
    expect(moved.status).toBe(200);
    const sent = await api.post(
      `/api/v1/workspaces/${fixture.workspace.id}/channels/${fixture.default_channel_of_webhooks}/messages`,
      { content: "delivered after the upgrade" },
      { token: tokenOf("alice") },
    );
    expect(sent.status).toBe(201);
    await server.app.deps.relay.flush();
    await server.app.deps.jobOutbox.flush();
    const delivery = await receiver.waitForBody("/upgrade", "delivered after the upgrade");
    expect(verify(delivery, fixture.outbound_webhook.secret)).toBe(true);
  });

  it("a push reaches a device registered by the first release, which is kept", async () => {
    const device = fixture.push_devices.find((row) => row.user === "bob" && row.provider === "expo")!;
    const opened = await api.post(
      "/api/v1/direct-conversations",
      { participant_user_id: fixture.users.bob!.id },
      { token: tokenOf("alice") },
    );
    const sent = await api.post(
      `/api/v1/direct-conversations/${opened.body.data.id}/messages`,
      { content: "pushed after the upgrade" },
      { token: tokenOf("alice") },
    );
    expect(sent.status).toBe(201);
    await server.app.deps.relay.flush();
    await server.app.deps.jobOutbox.flush();
    await until(
      () => (expo.received.some((push) => push.to === device.push_token) ? true : undefined),
      "the push to Bob's device",
    );
    // Registering the same token again finds the first release's row (its look-up hash).
    const again = await api.post(
      "/api/v1/devices",
      { platform: "android", provider: "expo", push_token: device.push_token },
      { token: tokenOf("bob") },
    );
    expect(again.status).toBe(201);
    expect(again.body.data.id).toBe(device.id);
    const rows = await server.app.deps.db.execute(sql`select id from push_devices`);
    expect(rowsOf(rows)).toHaveLength(fixture.push_devices.length);
  });

  it("the sign-in code, the verification link and the reset token mailed by the first release work", async () => {
    const code = await api.post("/api/v1/auth/app/otp/verify", {
      email: fixture.pending_sign_in_code.email,
      token: fixture.pending_sign_in_code.code,
    });
    expect(code.status).toBe(200);
    // The link carries its own expiry: it is opened as if within its hour.
    const { expires_unix, path_and_query } = fixture.email_verification;
    const shift = expires_unix * 1000 - 10 * 60_000 - server.clock.now().getTime();
    server.clock.advance(shift);
    try {
      expect((await api.get(path_and_query)).status).toBe(200);
    } finally {
      server.clock.advance(-shift);
    }
    const password = "a-password-after-the-upgrade";
    const reset = await api.post("/api/v1/auth/app/reset-password", {
      email: fixture.pending_password_reset.email,
      token: fixture.pending_password_reset.token,
      password,
      password_confirmation: password,
    });
    expect(reset.status).toBe(200);
  });

  it("mail jobs queued by the first release go out with the secrets they sealed", async () => {
    for (const job of fixture.queued_jobs.filter((row) => row.plaintext !== null)) {
      const mail = await smtp.waitForMail(job.email!, { timeoutMs: 30_000 });
      expect(mail.text).toContain(job.plaintext);
    }
  }, 60_000);

  it("keys:rotate moves every remaining value to the new format; all still work after it", async () => {
    const { db, clock, keys } = server.app.deps;
    const report = await runAdminCommand({ db, clock, keys, logger: createLogger("silent") }, ["keys:rotate"]);
    expect(report).toContain("Every stored secret is sealed under the current APP_KEY.");
    const sealed = await storedSealedValues(db);
    expect(sealed.length).toBe(fixture.push_devices.length + 2 * fixture.inbound_webhooks.length + 1);
    for (const value of sealed) expect(keys.isCurrent(value)).toBe(true);
    const listed = await api.get(`/api/v1/workspaces/${fixture.workspace.id}/webhooks`, { token: tokenOf("alice") });
    expect(listed.body.data.map((row: { secret: string }) => row.secret).sort()).toEqual(
      fixture.inbound_webhooks.map((hook) => hook.secret).sort(),
    );
  });
});
