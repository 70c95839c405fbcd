// Inbound webhooks (docs/webhooks.md): owners and admins manage them; a bot posts through
// POST /webhooks/{id}/messages with the static secret or, when required, a Stripe-style
// signature over the raw body bytes; Idempotency-Key replays; a per-workspace hourly quota;
// and a request log of everything that reached a webhook. Driven over HTTP, as a CI system or
// a monitoring tool would post.
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inboundWebhooks, messages, webhookIdempotencyKeys, webhookRequests } from "../db/schema/index.ts";
import { startApp, type App } from "../server/app.ts";
import { loadConfig } from "../server/config.ts";
import { pruneWebhookRecords } from "../server/services/webhooks/jobs.ts";
import { signWebhookBody } from "../server/services/webhooks/signature.ts";
import { restClient, type ApiResponse } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { collect, world } from "./helpers/live.ts";
import { startTestServer, useTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

type Webhook = {
  id: string;
  workspace_id: string;
  name: string;
  default_channel_id: string | null;
  bot_name: string | null;
  bot_avatar_url: string | null;
  signature_required: boolean;
  is_active: boolean;
  url: string;
  secret: string;
  signing_secret: string;
  created_at: string;
  updated_at: string;
};

type Team = { owner: RegisteredUser; workspaceId: string; channelId: string };

async function team(): Promise<Team> {
  const owner = await registerUser(ctx.api, { name: "Olga" });
  return { owner, ...(await createWorkspaceWithGeneral(ctx.api, owner)) };
}

async function createWebhook(t: Team, fields: Record<string, unknown> = {}): Promise<Webhook> {
  const response = await ctx.api.post(
    `/api/v1/workspaces/${t.workspaceId}/webhooks`,
    { name: "CI", default_channel_id: t.channelId, bot_name: "CI bot", ...fields },
    { token: t.owner.token },
  );
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body.data as Webhook;
}

/** A POST to the posting URL with the exact bytes given. */
async function postRaw(
  webhookId: string,
  raw: string | Buffer,
  headers: Record<string, string> = {},
  base = ctx.server.url,
): Promise<ApiResponse> {
  const response = await fetch(`${base}/webhooks/${webhookId}/messages`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: raw,
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

const withSecret = (hook: Webhook, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  postRaw(hook.id, JSON.stringify(body), { "X-Service-Webhook-Secret": hook.secret, ...headers });

const nowSeconds = () => Math.floor(ctx.server.clock.now().getTime() / 1000);
const signature = (hook: Webhook, raw: string, t = nowSeconds()) =>
  `t=${t},v1=${signWebhookBody(hook.signing_secret, t, raw)}`;

async function logOf(t: Team, hook: Webhook, query = "") {
  const response = await ctx.api.get(`/api/v1/workspaces/${t.workspaceId}/webhooks/${hook.id}/requests${query}`, {
    token: t.owner.token,
  });
  expect(response.status).toBe(200);
  return response.body as {
    data: {
      id: string;
      webhook_id: string;
      status: number;
      outcome: string;
      reason: string | null;
      idempotency_key: string | null;
      ip: string;
      created_at: string;
    }[];
    meta: { next_cursor: string | null };
  };
}

async function channelContents(t: Team): Promise<string[]> {
  const response = await ctx.api.get(`/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`, {
    token: t.owner.token,
  });
  return (response.body.data as { content: string }[]).map((message) => message.content);
}

/** Waits until the wall clock is early in its second, so a test at a timestamp edge has 800 ms. */
async function startOfSecond() {
  while (Date.now() % 1000 > 200) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe("inbound webhook management", () => {
  it("lets an owner create a webhook: 201 with the posting URL and two random secrets, and list it", async () => {
    const t = await team();
    const hook = await createWebhook(t, { bot_avatar_url: "https://example.test/bot.png" });
    expect(Object.keys(hook).sort()).toEqual(
      [
        "bot_avatar_url",
        "bot_name",
        "created_at",
        "default_channel_id",
        "id",
        "is_active",
        "name",
        "secret",
        "signature_required",
        "signing_secret",
        "updated_at",
        "url",
        "workspace_id",
      ].sort(),
    );
    expect(hook).toMatchObject({
      workspace_id: t.workspaceId,
      name: "CI",
      default_channel_id: t.channelId,
      bot_name: "CI bot",
      bot_avatar_url: "https://example.test/bot.png",
      signature_required: false,
      is_active: true,
      url: `${ctx.server.url}/webhooks/${hook.id}/messages`,
    });
    expect(hook.id).toMatch(/^whk_[0-9A-Z]{26}$/);
    // 32 random bytes each, base64url: 43 characters after the prefix.
    expect(hook.secret).toMatch(/^whs_[A-Za-z0-9_-]{43}$/);
    expect(hook.signing_secret).toMatch(/^whsign_[A-Za-z0-9_-]{43}$/);
    expect(hook.secret).not.toBe(hook.signing_secret);

    const list = await ctx.api.get(`/api/v1/workspaces/${t.workspaceId}/webhooks`, { token: t.owner.token });
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([hook]);
    expect(list.body.meta).toEqual({ total: 1 });

    // Stored sealed: the table holds neither secret as sent.
    const [row] = await ctx.server.app.deps.db.select().from(inboundWebhooks).where(eq(inboundWebhooks.id, hook.id));
    expect(JSON.stringify(row)).not.toContain(hook.secret.slice(4));
    expect(JSON.stringify(row)).not.toContain(hook.signing_secret.slice(7));
  });

  it("lets an admin manage webhooks; a member gets 403 and a stranger 404 everywhere", async () => {
    const t = await team();
    const hook = await createWebhook(t);
    const [admin, member, stranger] = await Promise.all([
      registerUser(ctx.api, { name: "Ada" }),
      registerUser(ctx.api, { name: "Mo" }),
      registerUser(ctx.api, { name: "Sam" }),
    ]);
    for (const user of [admin, member]) {
      const invite = await ctx.api.post(`/api/v1/workspaces/${t.workspaceId}/invites`, {}, { token: t.owner.token });
      expect(
        (await ctx.api.post(`/api/v1/invites/${invite.body.data.token}/accept`, {}, { token: user.token })).status,
      ).toBe(200);
    }
    const members = await ctx.api.get(`/api/v1/workspaces/${t.workspaceId}/members`, { token: t.owner.token });
    const adminMember = (members.body.data as { id: string; user_id: number }[]).find((m) => m.user_id === admin.id)!;
    expect(
      (
        await ctx.api.put(
          `/api/v1/workspaces/${t.workspaceId}/members/${adminMember.id}`,
          { role: "admin" },
          { token: t.owner.token },
        )
      ).status,
    ).toBe(200);

    const base = `/api/v1/workspaces/${t.workspaceId}/webhooks`;
    const adminList = await ctx.api.get(base, { token: admin.token });
    expect(adminList.status).toBe(200);
    expect(adminList.body.data[0].secret).toBe(hook.secret);
    const byAdmin = await ctx.api.post(base, { name: "Monitoring" }, { token: admin.token });
    expect(byAdmin.status).toBe(201);

    for (const [user, status] of [
      [member, 403],
      [stranger, 404],
    ] as const) {
      expect((await ctx.api.get(base, { token: user.token })).status).toBe(status);
      expect((await ctx.api.post(base, { name: "X" }, { token: user.token })).status).toBe(status);
      expect((await ctx.api.put(`${base}/${hook.id}`, { name: "X" }, { token: user.token })).status).toBe(status);
      expect((await ctx.api.delete(`${base}/${hook.id}`, { token: user.token })).status).toBe(status);
      expect((await ctx.api.get(`${base}/${hook.id}/requests`, { token: user.token })).status).toBe(status);
    }
    expect((await ctx.api.get(base, {})).status).toBe(401);
    // Nothing changed by the refused calls.
    const after = await ctx.api.get(base, { token: t.owner.token });
    expect(after.body.data.map((w: Webhook) => w.name).sort()).toEqual(["CI", "Monitoring"]);
  });

  it("validates every field at its limits (422 keyed by the field)", async () => {
    const t = await team();
    const other = await team();
    const base = `/api/v1/workspaces/${t.workspaceId}/webhooks`;
    const create = (body: Record<string, unknown>) => ctx.api.post(base, body, { token: t.owner.token });
    const fieldOf = (response: ApiResponse) => Object.keys(response.body.errors ?? {});

    expect(fieldOf(await create({}))).toEqual(["name"]);
    expect(fieldOf(await create({ name: "   " }))).toEqual(["name"]);
    expect((await create({ name: "n".repeat(120) })).status).toBe(201);
    expect(fieldOf(await create({ name: "n".repeat(121) }))).toEqual(["name"]);
    expect((await create({ name: "b", bot_name: "b".repeat(120) })).status).toBe(201);
    expect(fieldOf(await create({ name: "b", bot_name: "b".repeat(121) }))).toEqual(["bot_name"]);
    const url = (length: number) => `https://example.test/${"a".repeat(length - "https://example.test/".length)}`;
    expect((await create({ name: "u", bot_avatar_url: url(2048) })).status).toBe(201);
    expect(fieldOf(await create({ name: "u", bot_avatar_url: url(2049) }))).toEqual(["bot_avatar_url"]);
    expect(fieldOf(await create({ name: "u", bot_avatar_url: "not a url" }))).toEqual(["bot_avatar_url"]);
    const foreign = await create({ name: "c", default_channel_id: other.channelId });
    expect(foreign.status).toBe(422);
    expect(fieldOf(foreign)).toEqual(["default_channel_id"]);
    expect(fieldOf(await create({ name: "s", signature_required: "maybe" }))).toEqual(["signature_required"]);
    expect(foreign.body.message).toBe("The given data was invalid.");
  });

  it("updates fields, regenerates each secret (the old one stops working) and deletes (204, then 404)", async () => {
    const t = await team();
    const hook = await createWebhook(t);
    const path = `/api/v1/workspaces/${t.workspaceId}/webhooks/${hook.id}`;
    const renamed = await ctx.api.put(
      path,
      { name: "Deploys", bot_name: null, default_channel_id: null },
      { token: t.owner.token },
    );
    expect(renamed.status).toBe(200);
    expect(renamed.body.data).toMatchObject({ name: "Deploys", bot_name: null, default_channel_id: null });
    expect(renamed.body.data.secret).toBe(hook.secret);

    const regenerated = await ctx.api.put(path, { regenerate_secret: true }, { token: t.owner.token });
    expect(regenerated.body.data.secret).not.toBe(hook.secret);
    expect(regenerated.body.data.signing_secret).toBe(hook.signing_secret);
    const fresh = regenerated.body.data as Webhook;
    expect((await withSecret(hook, { content: "old", channel_id: t.channelId })).status).toBe(401);
    expect((await withSecret(fresh, { content: "new", channel_id: t.channelId })).status).toBe(201);

    const resigned = await ctx.api.put(path, { regenerate_signing_secret: true }, { token: t.owner.token });
    expect(resigned.body.data.signing_secret).not.toBe(hook.signing_secret);
    expect(resigned.body.data.secret).toBe(fresh.secret);

    const other = await team();
    expect(
      (await ctx.api.put(path.replace(t.workspaceId, other.workspaceId), { name: "x" }, { token: other.owner.token }))
        .status,
    ).toBe(404);
    expect(
      (
        await ctx.api.put(
          `/api/v1/workspaces/${t.workspaceId}/webhooks/whk_nope`,
          { name: "x" },
          { token: t.owner.token },
        )
      ).status,
    ).toBe(404);

    expect((await ctx.api.delete(path, { token: t.owner.token })).status).toBe(204);
    expect((await ctx.api.delete(path, { token: t.owner.token })).status).toBe(404);
    expect((await withSecret(fresh, { content: "gone", channel_id: t.channelId })).status).toBe(404);
  });

  it("is in the OpenAPI document: the management paths and the plain posting route", async () => {
    const document = await ctx.api.get("/api/v1/openapi.json");
    const paths = document.body.paths as Record<string, Record<string, { security?: unknown[] }>>;
    expect(Object.keys(paths["/api/v1/workspaces/{workspace_id}/webhooks"]!).sort()).toEqual(["get", "post"]);
    expect(paths["/api/v1/workspaces/{workspace_id}/webhooks/{id}/requests"]!.get).toBeDefined();
    expect(paths["/webhooks/{webhook}/messages"]!.post!.security).toEqual([]);
  });

  it("is the same procedure over typed RPC", async () => {
    const t = await team();
    const client = live.chat(t.owner.token);
    const created = await client.webhooks.create.mutate({ workspace_id: t.workspaceId, name: "RPC" });
    expect(created.data.name).toBe("RPC");
    const listed = await client.webhooks.list.query({ workspace_id: t.workspaceId });
    expect(listed.data.map((hook) => hook.id)).toEqual([created.data.id]);
  });
});

describe("posting through a webhook", () => {
  it("posts as the bot with the secret header: 201 {data: message}, in history and live, logged", async () => {
    const t = await team();
    const hook = await createWebhook(t, { bot_avatar_url: "https://example.test/ci.png" });
    const feed = collect((handlers) =>
      live
        .chat(t.owner.token)
        .messages.onChannel.subscribe({ workspace_id: t.workspaceId, channel_id: t.channelId }, handlers),
    );
    await until(() => feed.isStarted(), "the subscription to start");
    const posted = await withSecret(hook, { content: "Build 42 passed" }, { "X-Forwarded-For": "203.0.113.9" });
    expect(posted.status, JSON.stringify(posted.body)).toBe(201);
    expect(posted.body.data).toMatchObject({
      workspace_id: t.workspaceId,
      channel_id: t.channelId,
      content: "Build 42 passed",
      type: "text",
      author: { type: "bot", webhook_id: hook.id, name: "CI bot", avatar_url: "https://example.test/ci.png" },
    });
    expect(await channelContents(t)).toContain("Build 42 passed");
    await until(() => feed.messages().some((m) => m.messageId === posted.body.data.id), "the live message.created");

    const log = await logOf(t, hook);
    expect(log.data).toHaveLength(1);
    expect(log.data[0]).toMatchObject({
      webhook_id: hook.id,
      status: 201,
      outcome: "accepted",
      reason: null,
      idempotency_key: null,
      ip: "127.0.0.1",
    });
    expect(Object.keys(log.data[0]!).sort()).toEqual(
      ["created_at", "id", "idempotency_key", "ip", "outcome", "reason", "status", "webhook_id"].sort(),
    );
  });

  it("takes the secret from the body field `secret`, and the name of the webhook when there is no bot_name", async () => {
    const t = await team();
    const hook = await createWebhook(t, { bot_name: null });
    const posted = await postRaw(hook.id, JSON.stringify({ content: "from the body", secret: hook.secret }));
    expect(posted.status).toBe(201);
    expect(posted.body.data.author).toEqual({ type: "bot", webhook_id: hook.id, name: "CI", avatar_url: null });
    expect(JSON.stringify(posted.body)).not.toContain(hook.secret);
  });

  it("refuses a missing or wrong secret (401), an inactive webhook (403), an unknown one (404), and logs each", async () => {
    const t = await team();
    const hook = await createWebhook(t);
    const missing = await postRaw(hook.id, JSON.stringify({ content: "x" }));
    expect(missing.status).toBe(401);
    expect(missing.body).toEqual({ message: expect.any(String) });
    const wrong = await postRaw(hook.id, JSON.stringify({ content: "x" }), {
      "X-Service-Webhook-Secret": `${hook.secret}x`,
    });
    expect(wrong.status).toBe(401);
    const wrongInBody = await postRaw(hook.id, JSON.stringify({ content: "x", secret: "nope" }));
    expect(wrongInBody.status).toBe(401);
    expect((await postRaw("whk_01J00000000000000000000000", JSON.stringify({ content: "x" }))).status).toBe(404);
    expect((await postRaw("anything", JSON.stringify({ content: "x" }))).status).toBe(404);

    await ctx.api.put(
      `/api/v1/workspaces/${t.workspaceId}/webhooks/${hook.id}`,
      { is_active: false },
      { token: t.owner.token },
    );
    const inactive = await withSecret(hook, { content: "x" });
    expect(inactive.status).toBe(403);
    expect(inactive.body).toEqual({ message: "This webhook is inactive." });
    expect(await channelContents(t)).not.toContain("x");

    const log = await logOf(t, hook);
    expect(log.data.map((entry) => [entry.status, entry.outcome, entry.reason])).toEqual([
      [403, "rejected", "inactive"],
      [401, "rejected", "secret_invalid"],
      [401, "rejected", "secret_invalid"],
      [401, "rejected", "secret_missing"],
    ]);
    // The log never holds what was sent as a secret.
    const rows = await ctx.server.app.deps.db
      .select()
      .from(webhookRequests)
      .where(eq(webhookRequests.webhookId, hook.id));
    expect(JSON.stringify(rows)).not.toContain(hook.secret);
  });

  it("validates the body: content (422), channel_id (422: none and no default, or not of this workspace), malformed JSON (400)", async () => {
    const t = await team();
    const other = await team();
    const hook = await createWebhook(t, { default_channel_id: null });
    const noChannel = await withSecret(hook, { content: "where?" });
    expect(noChannel.status).toBe(422);
    expect(noChannel.body).toEqual({
      message: "The given data was invalid.",
      errors: { channel_id: [expect.any(String)] },
    });
    const foreign = await withSecret(hook, { content: "there", channel_id: other.channelId });
    expect(foreign.status).toBe(422);
    expect(Object.keys(foreign.body.errors)).toEqual(["channel_id"]);
    const empty = await withSecret(hook, { content: "  ", channel_id: t.channelId });
    expect(Object.keys(empty.body.errors)).toEqual(["content"]);
    const tooLong = await withSecret(hook, { content: "x".repeat(40_001), channel_id: t.channelId });
    expect(Object.keys(tooLong.body.errors)).toEqual(["content"]);
    expect((await withSecret(hook, { content: "y".repeat(40_000), channel_id: t.channelId })).status).toBe(201);
    const withFiles = await withSecret(hook, { content: "f", channel_id: t.channelId, attachment_ids: ["att_x"] });
    expect(Object.keys(withFiles.body.errors)).toEqual(["attachment_ids"]);

    const malformed = await postRaw(hook.id, "{not json", { "X-Service-Webhook-Secret": hook.secret });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ message: expect.any(String) });
    // Without the header, a body that does not parse cannot prove the secret: 401.
    expect((await postRaw(hook.id, "{not json")).status).toBe(401);
    expect(await channelContents(other)).not.toContain("there");

    const log = await logOf(t, hook);
    expect(log.data.map((entry) => entry.status)).toEqual([401, 400, 422, 201, 422, 422, 422, 422]);
  });

  it("goes through the one message service: skip_translation, and a private channel of the workspace", async () => {
    const t = await team();
    const hook = await createWebhook(t);
    const skipped = await withSecret(hook, { content: "as is", skip_translation: true });
    expect(skipped.body.data.skip_translation).toBe(true);
    const privateChannel = await ctx.api.post(
      `/api/v1/workspaces/${t.workspaceId}/channels`,
      { name: `ops ${randomBytes(3).toString("hex")}`, visibility: "private" },
      { token: t.owner.token },
    );
    const posted = await withSecret(hook, { content: "to ops", channel_id: privateChannel.body.data.id });
    expect(posted.status).toBe(201);
    const [row] = await ctx.server.app.deps.db.select().from(messages).where(eq(messages.id, posted.body.data.id));
    expect(row).toMatchObject({ authorWebhookId: hook.id, authorUserId: null, channelId: privateChannel.body.data.id });
  });
});

describe("signed webhooks", () => {
  async function signedHook(t: Team) {
    const hook = await createWebhook(t, { signature_required: true });
    expect(hook.signature_required).toBe(true);
    return hook;
  }

  it("accepts a signature over the exact bytes sent, which a re-serialization of the JSON would not match", async () => {
    const t = await team();
    const hook = await signedHook(t);
    // Key order, spaces and a unicode escape that JSON.stringify(JSON.parse(raw)) would all change.
    const raw = `{ "skip_translation" : false,\n  "content": "Caf\\u00e9 d\\u00e9ploy\\u00e9 \\ud83d\\ude80" }`;
    expect(JSON.stringify(JSON.parse(raw))).not.toBe(raw);
    const posted = await postRaw(hook.id, raw, { "X-Service-Signature": signature(hook, raw) });
    expect(posted.status, JSON.stringify(posted.body)).toBe(201);
    expect(posted.body.data.content).toBe("Café déployé 🚀");

    const reserialized = JSON.stringify(JSON.parse(raw));
    const mismatch = await postRaw(hook.id, raw, { "X-Service-Signature": signature(hook, reserialized) });
    expect(mismatch.status).toBe(401);
    // The same bytes as Latin-1 would be other bytes: the signature is over what was received.
    const bytes = Buffer.from(`{"content":"naïve"}`, "utf8");
    const t0 = nowSeconds();
    const overBytes = `t=${t0},v1=${signWebhookBody(hook.signing_secret, t0, bytes)}`;
    expect((await postRaw(hook.id, bytes, { "X-Service-Signature": overBytes })).status).toBe(201);
  });

  it("refuses the static secret alone, a missing, malformed or wrong signature (401), and logs why", async () => {
    const t = await team();
    const hook = await signedHook(t);
    const raw = JSON.stringify({ content: "signed" });
    expect((await postRaw(hook.id, raw, { "X-Service-Webhook-Secret": hook.secret })).status).toBe(401);
    expect((await postRaw(hook.id, raw, { "X-Service-Signature": "garbage" })).status).toBe(401);
    expect(
      (await postRaw(hook.id, raw, { "X-Service-Signature": `t=${nowSeconds()},v1=${"0".repeat(64)}` })).status,
    ).toBe(401);
    const log = await logOf(t, hook);
    expect(log.data.map((entry) => entry.reason)).toEqual([
      "signature_invalid",
      "signature_malformed",
      "signature_missing",
    ]);
    expect(JSON.stringify(log)).not.toContain("v1=");
  });

  it("accepts timestamps up to 300 s away either way and refuses 301", async () => {
    const t = await team();
    const hook = await signedHook(t);
    const attempt = async (offset: number) => {
      await startOfSecond();
      const raw = JSON.stringify({ content: `offset ${offset} ${randomBytes(2).toString("hex")}` });
      return (await postRaw(hook.id, raw, { "X-Service-Signature": signature(hook, raw, nowSeconds() + offset) }))
        .status;
    };
    expect(await attempt(-300)).toBe(201);
    expect(await attempt(300)).toBe(201);
    expect(await attempt(-301)).toBe(401);
    expect(await attempt(301)).toBe(401);
    const log = await logOf(t, hook);
    expect(log.data.slice(0, 2).map((entry) => entry.reason)).toEqual([
      "timestamp_out_of_window",
      "timestamp_out_of_window",
    ]);
  });

  it("accepts any of several v1 values (key rotation), and the old key stops working once replaced", async () => {
    const t = await team();
    const hook = await signedHook(t);
    const raw = JSON.stringify({ content: "rotating" });
    const ts = nowSeconds();
    const wrong = signWebhookBody("not-the-key", ts, raw);
    const right = signWebhookBody(hook.signing_secret, ts, raw);
    expect((await postRaw(hook.id, raw, { "X-Service-Signature": `t=${ts},v1=${wrong},v1=${right}` })).status).toBe(
      201,
    );

    const rotated = await ctx.api.put(
      `/api/v1/workspaces/${t.workspaceId}/webhooks/${hook.id}`,
      { regenerate_signing_secret: true },
      { token: t.owner.token },
    );
    const fresh = rotated.body.data as Webhook;
    const oldOnly = `t=${ts},v1=${right}`;
    expect((await postRaw(hook.id, raw, { "X-Service-Signature": oldOnly })).status).toBe(401);
    const both = `t=${ts},v1=${right},v1=${signWebhookBody(fresh.signing_secret, ts, raw)}`;
    expect((await postRaw(hook.id, raw, { "X-Service-Signature": both })).status).toBe(201);
  });
});

describe("Idempotency-Key", () => {
  it("replays the first result with Idempotent-Replayed: true and posts nothing more", async () => {
    const t = await team();
    const hook = await createWebhook(t);
    const key = `deploy-${randomBytes(4).toString("hex")}`;
    const first = await withSecret(hook, { content: "Deployed v1" }, { "Idempotency-Key": key });
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    // The secret moved to the body: the same request all the same.
    const again = await postRaw(hook.id, JSON.stringify({ content: "Deployed v1", secret: hook.secret }), {
      "Idempotency-Key": key,
    });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect((await channelContents(t)).filter((content) => content === "Deployed v1")).toHaveLength(1);

    const different = await withSecret(hook, { content: "Deployed v2" }, { "Idempotency-Key": key });
    expect(different.status).toBe(422);
    expect(Object.keys(different.body.errors)).toEqual(["idempotency_key"]);

    const log = await logOf(t, hook);
    expect(log.data.map((entry) => [entry.status, entry.outcome, entry.reason, entry.idempotency_key])).toEqual([
      [422, "rejected", "idempotency_key_reused", key],
      [201, "accepted", "idempotent_replay", key],
      [201, "accepted", null, key],
    ]);
  });

  it("takes keys of up to 255 characters (256: 422), and forgets a key after 24 hours", async () => {
    const t = await team();
    const hook = await createWebhook(t);
    const longest = "k".repeat(255);
    expect((await withSecret(hook, { content: "long key" }, { "Idempotency-Key": longest })).status).toBe(201);
    const tooLong = await withSecret(hook, { content: "longer key" }, { "Idempotency-Key": "k".repeat(256) });
    expect(tooLong.status).toBe(422);
    expect(Object.keys(tooLong.body.errors)).toEqual(["idempotency_key"]);

    const key = randomBytes(8).toString("hex");
    await withSecret(hook, { content: "daily" }, { "Idempotency-Key": key });
    ctx.server.clock.advance(24 * 3600_000 + 1000);
    const nextDay = await withSecret(hook, { content: "daily" }, { "Idempotency-Key": key });
    expect(nextDay.status).toBe(201);
    expect(nextDay.headers.get("idempotent-replayed")).toBeNull();
    expect((await channelContents(t)).filter((content) => content === "daily")).toHaveLength(2);
  });

  it("posts once when identical requests arrive at the same moment", async () => {
    const t = await team();
    const hook = await createWebhook(t);
    const key = randomBytes(8).toString("hex");
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => withSecret(hook, { content: "at once" }, { "Idempotency-Key": key })),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(6).fill(201));
    expect(new Set(answers.map((answer) => answer.body.data.id)).size).toBe(1);
    expect(answers.filter((answer) => answer.headers.get("idempotent-replayed") === "true")).toHaveLength(5);
    expect((await channelContents(t)).filter((content) => content === "at once")).toHaveLength(1);
  });
});

describe("the request log", () => {
  it("pages newest first with next_cursor, and entries older than 30 days are pruned", async () => {
    const t = await team();
    const hook = await createWebhook(t);
    for (let index = 0; index < 3; index++) await withSecret(hook, { content: `entry ${index}` });
    await postRaw(hook.id, JSON.stringify({ content: "no secret" }));
    const first = await logOf(t, hook, "?limit=3");
    expect(first.data.map((entry) => entry.status)).toEqual([401, 201, 201]);
    expect(first.meta.next_cursor).toBe(first.data[2]!.id);
    const second = await logOf(t, hook, `?limit=3&before=${first.meta.next_cursor}`);
    expect(second.data.map((entry) => entry.status)).toEqual([201]);
    expect(second.meta.next_cursor).toBeNull();
    const bad = await ctx.api.get(`/api/v1/workspaces/${t.workspaceId}/webhooks/${hook.id}/requests?limit=101`, {
      token: t.owner.token,
    });
    expect(bad.status).toBe(422);

    const key = randomBytes(4).toString("hex");
    await withSecret(hook, { content: "kept key" }, { "Idempotency-Key": key });
    ctx.server.clock.advance(31 * 24 * 3600_000);
    await withSecret(hook, { content: "recent" });
    await pruneWebhookRecords(ctx.server.app.deps);
    const after = await logOf(t, hook);
    expect(after.data).toHaveLength(1);
    const keys = await ctx.server.app.deps.db
      .select()
      .from(webhookIdempotencyKeys)
      .where(eq(webhookIdempotencyKeys.webhookId, hook.id));
    expect(keys).toHaveLength(0);
  });
});

describe("the workspace quota (WEBHOOK_QUOTA_PER_HOUR)", () => {
  let limited: TestServer;
  beforeAll(async () => {
    limited = await startTestServer({ WEBHOOK_QUOTA_PER_HOUR: "4" });
  });
  afterAll(() => limited?.close());

  it("counts every request of the workspace, rejected ones too, then answers 429 with Retry-After", async () => {
    const on = restClient(limited.url);
    const owner = await registerUser(on, { name: "Quinn" });
    const { workspaceId, channelId } = await createWorkspaceWithGeneral(on, owner);
    const make = async (name: string) =>
      (
        await on.post(
          `/api/v1/workspaces/${workspaceId}/webhooks`,
          { name, default_channel_id: channelId },
          { token: owner.token },
        )
      ).body.data as Webhook;
    const [a, b] = [await make("a"), await make("b")];
    const post = (hook: Webhook, secret = hook.secret) =>
      postRaw(
        hook.id,
        JSON.stringify({ content: `q ${randomBytes(2).toString("hex")}` }),
        { "X-Service-Webhook-Secret": secret },
        limited.url,
      );
    expect((await post(a)).status).toBe(201);
    expect((await post(b, "wrong")).status).toBe(401);
    expect((await post(b)).status).toBe(201);
    expect((await post(a)).status).toBe(201);
    const over = await post(b);
    expect(over.status).toBe(429);
    expect(over.body).toEqual({ message: "Too Many Attempts." });
    expect(Number(over.headers.get("retry-after"))).toBeGreaterThan(3000);
    const log = await on.get(`/api/v1/workspaces/${workspaceId}/webhooks/${b.id}/requests`, { token: owner.token });
    expect(log.body.data[0]).toMatchObject({ status: 429, outcome: "rejected", reason: "quota_exceeded" });
  });
});

describe.runIf(process.env.DATABASE_URL && process.env.REDIS_URL)("two server processes", () => {
  let first: TestServer;
  let second: App;
  beforeAll(async () => {
    first = await startTestServer({ WEBHOOK_QUOTA_PER_HOUR: "6" });
    second = await startApp(loadConfig({ ...first.env, PORT: "0" }));
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  async function setup() {
    const on = restClient(first.url);
    const owner = await registerUser(on, { name: "Pat" });
    const { workspaceId, channelId } = await createWorkspaceWithGeneral(on, owner);
    const created = await on.post(
      `/api/v1/workspaces/${workspaceId}/webhooks`,
      { name: "twin", default_channel_id: channelId },
      { token: owner.token },
    );
    return { on, owner, workspaceId, channelId, hook: created.body.data as Webhook };
  }

  it("posts once when the same Idempotency-Key arrives on both at the same moment", async () => {
    const { on, owner, workspaceId, channelId, hook } = await setup();
    for (let round = 0; round < 2; round++) {
      const key = `${round}-${randomBytes(6).toString("hex")}`;
      const raw = JSON.stringify({ content: `twice ${key}` });
      const headers = { "X-Service-Webhook-Secret": hook.secret, "Idempotency-Key": key };
      const answers = await Promise.all([
        postRaw(hook.id, raw, headers, first.url),
        postRaw(hook.id, raw, headers, second.url),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
      expect(answers[0]!.body).toEqual(answers[1]!.body);
      expect(answers.filter((answer) => answer.headers.get("idempotent-replayed") === "true")).toHaveLength(1);
      const history = await on.get(`/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`, {
        token: owner.token,
      });
      expect((history.body.data as { content: string }[]).filter((m) => m.content === `twice ${key}`)).toHaveLength(1);
    }
  });

  it("shares the quota between them (Redis)", async () => {
    const { hook } = await setup();
    const statuses: number[] = [];
    for (let index = 0; index < 7; index++) {
      const base = index % 2 === 0 ? first.url : second.url;
      const answer = await postRaw(
        hook.id,
        JSON.stringify({ content: `share ${index}` }),
        { "X-Service-Webhook-Secret": hook.secret },
        base,
      );
      statuses.push(answer.status);
    }
    expect(statuses).toEqual([201, 201, 201, 201, 201, 201, 429]);
  });
});
