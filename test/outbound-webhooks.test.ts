// Outbound webhooks (docs/outbound-webhooks.md): owners and admins point a workspace's events at
// a URL; the dispatcher turns the events of the durable stream into deliveries, the
// outbound-webhooks queue POSTs them signed, retries them with backoff (driven here by the
// server's clock seam, not sleeps), logs every attempt, and switches off a webhook that has
// failed for a day. A local receiver plays the other system and checks signatures as it would.
import { eq, sql } from "drizzle-orm";
import { rowsOf } from "../db/client.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboundDeliveries, outboundDeliveryAttempts, outboundWebhooks } from "../db/schema/index.ts";
import { retryDelayMs } from "../server/jobs/backoff.ts";
import { DELIVERY_BACKOFF, deliverMany, recordAttempts } from "../server/services/outbound-webhooks/deliver.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { world } from "./helpers/live.ts";
import { startReceiver, verify, type Receiver } from "./helpers/receiver.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { startTestServer, useTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";
import { statementScope } from "../db/statement-count.ts";
import { statementsOf } from "./helpers/statements.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver?.stop());

type Hook = {
  id: string;
  workspace_id: string;
  url: string;
  events: string[];
  is_active: boolean;
  secret: string;
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
};
type Attempt = {
  attempt: number;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  response_body: string | null;
  created_at: string;
};
type Delivery = {
  id: string;
  webhook_id: string;
  event: string;
  status: "pending" | "succeeded" | "failed";
  attempt_count: number;
  next_attempt_at: string | null;
  payload: { id: string; event: string; created_at: string; workspace_id: string; data: any };
  attempts: Attempt[];
  created_at: string;
  completed_at: string | null;
};
type Team = { owner: RegisteredUser; workspaceId: string; channelId: string };

let pathCounter = 0;
/** A receiver path of its own per webhook, so tests sharing the receiver never read each other's requests. */
const freshPath = () => `/hook-${++pathCounter}-${Math.random().toString(36).slice(2, 8)}`;

async function team(api: RestClient = ctx.api): Promise<Team> {
  const owner = await registerUser(api, { name: "Odile" });
  return { owner, ...(await createWorkspaceWithGeneral(api, owner)) };
}

const base = (t: Team) => `/api/v1/workspaces/${t.workspaceId}/outbound-webhooks`;

async function createHook(
  t: Team,
  fields: Record<string, unknown> = {},
  api = ctx.api,
): Promise<Hook & { path: string }> {
  const path = freshPath();
  const response = await api.post(
    base(t),
    { url: `${receiver.url}${path}`, events: ["message.created"], ...fields },
    { token: t.owner.token },
  );
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return { ...(response.body.data as Hook), path };
}

async function post(t: Team, content: string, channelId = t.channelId) {
  const response = await ctx.api.post(
    `/api/v1/workspaces/${t.workspaceId}/channels/${channelId}/messages`,
    { content },
    { token: t.owner.token },
  );
  expect(response.status).toBe(201);
  return response.body.data as { id: string; content: string };
}

async function deliveriesOf(
  t: Team,
  hook: Hook,
  query = "",
): Promise<{ data: Delivery[]; meta: { next_cursor: string | null } }> {
  const response = await ctx.api.get(`${base(t)}/${hook.id}/deliveries${query}`, { token: t.owner.token });
  expect(response.status).toBe(200);
  return response.body;
}

/** Moves the server's clock on and hands over the jobs that became due. */
async function advance(ms: number, server: TestServer = ctx.server) {
  server.clock.advance(ms);
  await server.app.deps.jobOutbox.flush();
}

/** Everything committed so far is positioned, dispatched and handed to the queue. */
async function settle(server: TestServer = ctx.server) {
  await server.app.deps.relay.flush();
  await server.app.deps.jobOutbox.flush();
}

describe("management", () => {
  it("creates, lists, updates and deletes; the record carries the secret; members 403, others 404", async () => {
    const t = await team();
    const hook = await createHook(t, { events: ["message.created", "member.joined"] });
    expect(hook).toMatchObject({
      workspace_id: t.workspaceId,
      url: `${receiver.url}${hook.path}`,
      events: ["message.created", "member.joined"],
      is_active: true,
      disabled_reason: null,
    });
    expect(hook.id).toMatch(/^owh_[0-9A-Z]{26}$/);
    expect(hook.secret).toMatch(/^owhs_[A-Za-z0-9_-]{43}$/);

    const list = await ctx.api.get(base(t), { token: t.owner.token });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [hook].map(({ path: _, ...record }) => record), meta: { total: 1 } });

    const updated = await ctx.api.put(
      `${base(t)}/${hook.id}`,
      { events: ["channel.created"], regenerate_secret: true, is_active: false },
      { token: t.owner.token },
    );
    expect(updated.status).toBe(200);
    expect(updated.body.data).toMatchObject({ events: ["channel.created"], is_active: false, url: hook.url });
    expect(updated.body.data.secret).not.toBe(hook.secret);

    const member = await registerUser(ctx.api, { name: "Mona" });
    const invite = await ctx.api.post(`/api/v1/workspaces/${t.workspaceId}/invites`, {}, { token: t.owner.token });
    expect(
      (await ctx.api.post(`/api/v1/invites/${invite.body.data.token}/accept`, {}, { token: member.token })).status,
    ).toBe(200);
    const asMember = await ctx.api.get(base(t), { token: member.token });
    expect(asMember.status).toBe(403);
    expect(JSON.stringify(asMember.body)).not.toContain(hook.secret);
    const stranger = await registerUser(ctx.api, { name: "Stan" });
    expect((await ctx.api.get(base(t), { token: stranger.token })).status).toBe(404);
    expect((await ctx.api.get(base(t))).status).toBe(401);

    expect((await ctx.api.delete(`${base(t)}/${hook.id}`, { token: t.owner.token })).status).toBe(204);
    expect((await ctx.api.delete(`${base(t)}/${hook.id}`, { token: t.owner.token })).status).toBe(404);
    expect((await ctx.api.get(`${base(t)}/${hook.id}/deliveries`, { token: t.owner.token })).status).toBe(404);
  });

  it("refuses a url that is not http(s) and events outside the contract's list (422 url / events)", async () => {
    const t = await team();
    const create = (body: Record<string, unknown>) => ctx.api.post(base(t), body, { token: t.owner.token });
    for (const url of ["ftp://example.com/hook", "not a url", "", "javascript:alert(1)"]) {
      const response = await create({ url, events: ["message.created"] });
      expect(response.status, url).toBe(422);
      expect(Object.keys(response.body.errors)).toEqual(["url"]);
    }
    for (const events of [[], ["message.created", "message.exploded"], "message.created", undefined]) {
      const response = await create({ url: `${receiver.url}/x`, events });
      expect(response.status, JSON.stringify(events)).toBe(422);
      expect(Object.keys(response.body.errors)).toEqual(["events"]);
    }
    const hook = await createHook(t);
    const bad = await ctx.api.put(`${base(t)}/${hook.id}`, { events: ["typing"] }, { token: t.owner.token });
    expect(bad.status).toBe(422);
    expect(bad.body.errors.events).toEqual(["The selected events are invalid."]);
  });
});

describe("the same procedures over typed RPC, and in the OpenAPI document", () => {
  it("creates, tests and reads the log through the typed client; a member is FORBIDDEN", async () => {
    const t = await team();
    const client = live.chat(t.owner.token);
    const path = freshPath();
    const created = await client.outboundWebhooks.create.mutate({
      workspace_id: t.workspaceId,
      url: `${receiver.url}${path}`,
      events: ["channel.created"],
    });
    expect(created.data).toMatchObject({ events: ["channel.created"], is_active: true });
    const sent = await client.outboundWebhooks.test.mutate({
      workspace_id: t.workspaceId,
      webhook_id: created.data.id,
    });
    expect(sent.data).toMatchObject({ event: "webhook.test", status: "succeeded" });
    const log = await client.outboundWebhooks.deliveries.query({ workspace_id: t.workspaceId, id: created.data.id });
    expect(log.data.map((delivery) => delivery.id)).toEqual([sent.data.id]);
    const bad = await rejectionOf(
      client.outboundWebhooks.create.mutate({ workspace_id: t.workspaceId, url: "ftp://x", events: ["nope"] }),
    );
    expect(bad.data?.code).toBe("UNPROCESSABLE_CONTENT");

    const member = await registerUser(ctx.api, { name: "Milo" });
    const invite = await ctx.api.post(`/api/v1/workspaces/${t.workspaceId}/invites`, {}, { token: t.owner.token });
    await ctx.api.post(`/api/v1/invites/${invite.body.data.token}/accept`, {}, { token: member.token });
    const refused = await rejectionOf(
      live.chat(member.token).outboundWebhooks.list.query({ workspace_id: t.workspaceId }),
    );
    expect(refused.data?.code).toBe("FORBIDDEN");
  });

  it("lists every operation in /api/v1/openapi.json", async () => {
    const document = await ctx.api.get("/api/v1/openapi.json");
    const paths = document.body.paths as Record<string, Record<string, unknown>>;
    const base = "/api/v1/workspaces/{workspace_id}/outbound-webhooks";
    expect(Object.keys(paths[base]!).sort()).toEqual(["get", "post"]);
    expect(Object.keys(paths[`${base}/{id}`]!).sort()).toEqual(["delete", "put"]);
    expect(paths[`${base}/{id}/deliveries`]!.get).toBeDefined();
    expect(paths[`${base}/{webhook_id}/test`]!.post).toBeDefined();
  });
});

describe("delivery", () => {
  it("sends each event type of the workspace, signed with the webhook's secret", async () => {
    const owner = await registerUser(ctx.api, { name: "Odile" });
    const created = await ctx.api.post(
      "/api/v1/workspaces",
      { name: `Public ${pathCounter}`, visibility: "public" },
      { token: owner.token },
    );
    const channels = await ctx.api.get(`/api/v1/workspaces/${created.body.data.id}/channels`, { token: owner.token });
    const t: Team = {
      owner,
      workspaceId: created.body.data.id,
      channelId: (channels.body.data as { id: string; slug: string }[]).find((c) => c.slug === "general")!.id,
    };
    const hook = await createHook(t, {
      events: [
        "message.created",
        "member.joined",
        "member.left",
        "channel.created",
        "channel.updated",
        "channel.deleted",
      ],
    });

    const channel = await ctx.api.post(
      `/api/v1/workspaces/${t.workspaceId}/channels`,
      { name: `ops-${pathCounter}` },
      { token: t.owner.token },
    );
    expect(channel.status).toBe(201);
    const channelId = channel.body.data.id as string;
    await ctx.api.put(
      `/api/v1/workspaces/${t.workspaceId}/channels/${channelId}`,
      { name: "ops-renamed" },
      {
        token: t.owner.token,
      },
    );
    const message = await post(t, "Deploy finished");
    const joiner = await registerUser(ctx.api, { name: "Jules" });
    expect((await ctx.api.post(`/api/v1/workspaces/${t.workspaceId}/join`, {}, { token: joiner.token })).status).toBe(
      200,
    );
    const members = await ctx.api.get(`/api/v1/workspaces/${t.workspaceId}/members`, { token: t.owner.token });
    const joinerMember = (members.body.data as { id: string; user_id: number }[]).find((m) => m.user_id === joiner.id)!;
    expect(
      (await ctx.api.delete(`/api/v1/workspaces/${t.workspaceId}/members/${joinerMember.id}`, { token: t.owner.token }))
        .status,
    ).toBe(204);
    expect(
      (await ctx.api.delete(`/api/v1/workspaces/${t.workspaceId}/channels/${channelId}`, { token: t.owner.token }))
        .status,
    ).toBe(204);

    // Deliveries go out side by side, so they may arrive in any order; their ids follow the events'.
    const received = (await receiver.waitFor(6, hook.path)).sort((a, b) => (a.json.id < b.json.id ? -1 : 1));
    expect(received.map((request) => request.json.event)).toEqual([
      "channel.created",
      "channel.updated",
      "message.created",
      "member.joined",
      "member.left",
      "channel.deleted",
    ]);
    for (const request of received) {
      expect(verify(request, hook.secret), "the signature verifies with the webhook's secret").toBe(true);
      expect(verify(request, "some other secret")).toBe(false);
      expect(request.headers["content-type"]).toBe("application/json");
      expect(request.headers["x-service-event"]).toBe(request.json.event);
      expect(request.headers["x-service-delivery"]).toBe(request.json.id);
      expect(request.json).toEqual({
        id: expect.stringMatching(/^dlv_/),
        event: request.json.event,
        created_at: expect.stringMatching(/\+00:00$/),
        workspace_id: t.workspaceId,
        data: expect.any(Object),
      });
    }
    const byEvent = Object.fromEntries(received.map((request) => [request.json.event, request.json.data]));
    expect(byEvent["message.created"].message).toMatchObject({
      id: message.id,
      content: "Deploy finished",
      channel_id: t.channelId,
      translation: null,
    });
    expect(byEvent["channel.created"].channel).toMatchObject({ id: channelId });
    expect(byEvent["channel.updated"].channel).toMatchObject({ id: channelId, name: "ops-renamed" });
    expect(byEvent["channel.deleted"]).toEqual({ channel_id: channelId });
    expect(byEvent["member.joined"].member).toMatchObject({ user_id: joiner.id });
    expect(byEvent["member.left"]).toEqual({ member_id: joinerMember.id, user_id: joiner.id });

    // The log has each, succeeded at the first attempt. The outcome is written after the receiver
    // answered, so the last one may still be on its way.
    const log = await until(async () => {
      const page = await deliveriesOf(t, hook);
      return page.data.every((delivery) => delivery.status !== "pending") ? page : undefined;
    });
    expect(log.data).toHaveLength(6);
    for (const delivery of log.data) {
      expect(delivery).toMatchObject({
        webhook_id: hook.id,
        status: "succeeded",
        attempt_count: 1,
        next_attempt_at: null,
      });
      expect(delivery.attempts).toEqual([
        expect.objectContaining({ attempt: 1, status_code: 200, error: null, response_body: '{"ok":true}' }),
      ]);
    }
  });

  it("sends a private channel's messages to the workspace's webhooks only, and only the events asked for", async () => {
    const t = await team();
    const other = await team();
    const hook = await createHook(t);
    const joinsOnly = await createHook(t, { events: ["member.joined"] });
    const otherHook = await createHook(other);
    const secret = await ctx.api.post(
      `/api/v1/workspaces/${t.workspaceId}/channels`,
      { name: `secret-${pathCounter}`, visibility: "private" },
      { token: t.owner.token },
    );
    const inPrivate = await post(t, "Quarterly numbers", secret.body.data.id);
    const [request] = await receiver.waitFor(1, hook.path);
    expect(request!.json.data.message).toMatchObject({ id: inPrivate.id, content: "Quarterly numbers" });
    await settle();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(receiver.requests.filter((r) => r.path === joinsOnly.path || r.path === otherHook.path)).toEqual([]);
    expect((await deliveriesOf(t, joinsOnly)).data).toEqual([]);
    expect((await deliveriesOf(other, otherHook)).data).toEqual([]);
  });

  it("sends nothing to an inactive webhook, nor events from before it existed", async () => {
    const t = await team();
    await post(t, "Before any webhook");
    await settle();
    const hook = await createHook(t, { is_active: false });
    await post(t, "While inactive");
    await settle();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(receiver.requests.filter((r) => r.path === hook.path)).toEqual([]);
    expect((await deliveriesOf(t, hook)).data).toEqual([]);

    await ctx.api.put(`${base(t)}/${hook.id}`, { is_active: true }, { token: t.owner.token });
    await post(t, "Now active");
    const [request] = await receiver.waitFor(1, hook.path);
    expect(request!.json.data.message.content).toBe("Now active");
  });

  it("follows a change of its events from the next event on, and sends nothing once deleted", async () => {
    const t = await team();
    const hook = await createHook(t, { events: ["message.created"] });
    const first = await post(t, "Before the change");
    await receiver.waitFor(1, hook.path);

    const changed = await ctx.api.put(`${base(t)}/${hook.id}`, { events: ["message.updated"] }, { token: t.owner.token });
    expect(changed.status).toBe(200);
    expect(changed.body.data.events).toEqual(["message.updated"]);
    const second = await post(t, "After the change");
    const edited = await ctx.api.patch(
      `/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages/${second.id}`,
      { content: "After the change, edited" },
      { token: t.owner.token },
    );
    expect(edited.status).toBe(200);
    await receiver.waitFor(2, hook.path);
    await settle();
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The event it no longer asks for is not sent; the one it asks for now is.
    const sent = receiver.requests.filter((r) => r.path === hook.path);
    expect(sent.map((r) => [r.json.event, r.json.data.message.id])).toEqual([
      ["message.created", first.id],
      ["message.updated", second.id],
    ]);
    expect((await deliveriesOf(t, hook)).data.map((d: Delivery) => d.event)).toEqual([
      "message.updated",
      "message.created",
    ]);

    expect((await ctx.api.delete(`${base(t)}/${hook.id}`, { token: t.owner.token })).status).toBe(204);
    await ctx.api.patch(
      `/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages/${second.id}`,
      { content: "After the delete" },
      { token: t.owner.token },
    );
    await settle();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(receiver.requests.filter((r) => r.path === hook.path)).toHaveLength(2);
  });

  it("retries after 500s with backoff, logging every attempt, and delivers once the receiver is back", async () => {
    const t = await team();
    const hook = await createHook(t);
    receiver.fail(500, { times: 2, body: "x".repeat(3000) });
    const message = await post(t, "Will need three tries");
    await receiver.waitFor(1, hook.path);
    const first = await until(async () => {
      const [delivery] = (await deliveriesOf(t, hook)).data;
      return delivery?.attempts.length === 1 ? delivery : undefined;
    }, "the first attempt logged");
    expect(first).toMatchObject({ status: "pending", attempt_count: 1 });
    expect(first.attempts[0]).toMatchObject({ attempt: 1, status_code: 500, error: null });
    expect(first.attempts[0]!.response_body).toHaveLength(1024);
    expect(Date.parse(first.next_attempt_at!) - Date.parse(first.attempts[0]!.created_at)).toBe(30_000);
    // The failure started the webhook's failing streak (the success below ends it).
    const failingSince = async () =>
      (await ctx.server.app.deps.db.select().from(outboundWebhooks).where(eq(outboundWebhooks.id, hook.id)))[0]!
        .failingSince;
    expect(await failingSince()).not.toBeNull();

    // Not due yet: nothing is sent.
    await advance(29_000);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(receiver.requests.filter((r) => r.path === hook.path)).toHaveLength(1);
    await advance(1_000);
    await receiver.waitFor(2, hook.path);
    await until(async () => ((await deliveriesOf(t, hook)).data[0]!.attempts.length === 2 ? true : undefined));
    await advance(retryDelayMs(DELIVERY_BACKOFF, 3));
    const requests = await receiver.waitFor(3, hook.path);
    expect(new Set(requests.map((r) => r.json.id)).size).toBe(1); // one delivery, three tries
    expect(requests.every((r) => r.body === requests[0]!.body)).toBe(true); // the same bytes
    expect(requests.every((r) => verify(r, hook.secret))).toBe(true);
    const done = await until(async () => {
      const [delivery] = (await deliveriesOf(t, hook)).data;
      return delivery?.status === "succeeded" ? delivery : undefined;
    }, "the delivery to succeed");
    expect(done.attempts.map((a) => a.status_code)).toEqual([500, 500, 200]);
    expect(done).toMatchObject({
      attempt_count: 3,
      next_attempt_at: null,
      payload: { data: { message: { id: message.id } } },
    });
    expect(done.completed_at).not.toBeNull();
    expect(await failingSince()).toBeNull();
  });

  it("retries after a timeout (10 s), logged as such", { timeout: 40_000 }, async () => {
    const t = await team();
    const hook = await createHook(t);
    receiver.hang();
    await post(t, "The receiver is stuck");
    await receiver.waitFor(1, hook.path);
    receiver.recover();
    const first = await until(
      async () => {
        const [delivery] = (await deliveriesOf(t, hook)).data;
        return delivery?.attempts.length === 1 ? delivery : undefined;
      },
      "the timed-out attempt",
      20_000,
    );
    expect(first.attempts[0]).toMatchObject({ attempt: 1, status_code: null, error: "timeout", response_body: null });
    expect(first.attempts[0]!.duration_ms).toBeGreaterThanOrEqual(9_900);
    await advance(retryDelayMs(DELIVERY_BACKOFF, 2));
    await receiver.waitFor(2, hook.path);
    await until(async () => ((await deliveriesOf(t, hook)).data[0]!.status === "succeeded" ? true : undefined));
  });

  it("fails a delivery after 8 attempts over about a day, and switches off a webhook that failed for a day", async () => {
    const server = await startTestServer();
    const api = restClient(server.url);
    const own = await startReceiver();
    try {
      const owner = await registerUser(api, { name: "Fay" });
      const t = { owner, ...(await createWorkspaceWithGeneral(api, owner)) };
      const created = await api.post(
        base(t),
        { url: `${own.url}/down`, events: ["message.created"] },
        { token: owner.token },
      );
      const hook = created.body.data as Hook;
      const log = async () =>
        (await api.get(`${base(t)}/${hook.id}/deliveries`, { token: owner.token })).body.data as Delivery[];
      own.fail(503);
      const postHere = (content: string) =>
        api.post(
          `/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`,
          { content },
          {
            token: owner.token,
          },
        );
      await postHere("Nobody is listening");
      await own.waitFor(1);
      for (let attempt = 2; attempt <= 8; attempt++) {
        await until(async () => ((await log())[0]?.attempt_count === attempt - 1 ? true : undefined));
        await advance(retryDelayMs(DELIVERY_BACKOFF, attempt), server);
        await own.waitFor(attempt);
      }
      const failed = await until(async () => {
        const [delivery] = await log();
        return delivery?.status === "failed" ? delivery : undefined;
      }, "the delivery to fail for good");
      expect(failed.attempts.map((a) => a.status_code)).toEqual(Array(8).fill(503));
      expect(failed.next_attempt_at).toBeNull();
      const span = Date.parse(failed.attempts[7]!.created_at) - Date.parse(failed.attempts[0]!.created_at);
      // The backoff's sum (23 h 23 min), and the little real time the test itself took.
      const backoff = [2, 3, 4, 5, 6, 7, 8].reduce((sum, n) => sum + retryDelayMs(DELIVERY_BACKOFF, n), 0);
      expect(backoff).toBe(23 * 3600_000 + 22.5 * 60_000);
      expect(span).toBeGreaterThanOrEqual(backoff);
      expect(span).toBeLessThan(backoff + 30_000);
      // Not yet a day of failures: still active; no ninth attempt.
      await advance(24 * 3600_000 - span - 60_000, server);
      expect(own.requests).toHaveLength(8);
      let [listed] = (await api.get(base(t), { token: owner.token })).body.data as Hook[];
      expect(listed).toMatchObject({ is_active: true, disabled_reason: null });

      // The next failure, a day after the first: switched off, and the owner sees why.
      await advance(120_000, server);
      await postHere("Still nobody");
      await own.waitFor(9);
      listed = await until(async () => {
        const [row] = (await api.get(base(t), { token: owner.token })).body.data as Hook[];
        return row && !row.is_active ? row : undefined;
      }, "the webhook to be switched off");
      expect(listed.disabled_reason).toBe("Every delivery failed for 24 hours; the last error: HTTP 503.");
      // Its pending retry is not sent: it fails as inactive.
      await advance(retryDelayMs(DELIVERY_BACKOFF, 2), server);
      const second = await until(async () => {
        const delivery = (await log()).find((d) => d.payload.data.message.content === "Still nobody");
        return delivery?.status === "failed" ? delivery : undefined;
      }, "the switched-off webhook's pending delivery to fail");
      expect(second.attempts.at(-1)).toMatchObject({ attempt: 2, status_code: null, error: "the webhook is inactive" });
      expect(own.requests).toHaveLength(9);
      await postHere("Switched off");
      await settle(server);
      expect((await log()).some((d) => d.payload.data.message.content === "Switched off")).toBe(false);

      // Switched back on by a manager: the reason goes, deliveries resume.
      own.recover();
      const on = await api.put(`${base(t)}/${hook.id}`, { is_active: true }, { token: owner.token });
      expect(on.body.data).toMatchObject({ is_active: true, disabled_reason: null });
      await postHere("Back");
      const requests = await own.waitFor(10);
      expect(requests.at(-1)!.json.data.message.content).toBe("Back");
    } finally {
      await own.stop();
      await server.close();
    }
  });

  it("records and sends an attempt once when its job runs twice", async () => {
    const t = await team();
    const hook = await createHook(t);
    await post(t, "Exactly once");
    await receiver.waitFor(1, hook.path);
    const [delivery] = await until(async () => {
      const rows = await ctx.server.app.deps.db
        .select()
        .from(outboundDeliveries)
        .where(eq(outboundDeliveries.webhookId, hook.id));
      return rows[0]?.status === "succeeded" ? rows : undefined;
    });
    await deliverMany(ctx.server.app.deps, [{ deliveryId: delivery!.id, attempt: 1 }]);
    const attempts = await ctx.server.app.deps.db
      .select()
      .from(outboundDeliveryAttempts)
      .where(eq(outboundDeliveryAttempts.deliveryId, delivery!.id));
    expect(attempts).toHaveLength(1);
    expect(receiver.requests.filter((r) => r.path === hook.path)).toHaveLength(1);
  });

  it("records a batch of attempts in one statement: logged, settled, the next attempt's job written", async () => {
    const t = await team();
    const hook = await createHook(t);
    await post(t, "One");
    await post(t, "Two");
    await receiver.waitFor(2, hook.path);
    const { deps } = ctx.server.app;
    const deliveries = await until(async () => {
      const rows = await deps.db.select().from(outboundDeliveries).where(eq(outboundDeliveries.webhookId, hook.id));
      return rows.length === 2 && rows.every((row) => row.status === "succeeded") ? rows : undefined;
    });
    const ok = { statusCode: 200, durationMs: 3, error: null, responseBody: "ok" };
    const failed = { statusCode: 500, durationMs: 3, error: null, responseBody: "no" };
    // A made-up second and third attempt: a success, and a failure to retry (a streak starts: a transaction).
    const counter = statementsOf(ctx.server);
    const scope = `record-attempts-${Math.random()}`;
    const mark = counter.total();
    await statementScope(scope, () =>
      recordAttempts(deps, [
        { delivery: deliveries[0]!, attempt: 2, result: ok, retry: true, health: true, webhookFailing: false },
        { delivery: deliveries[1]!, attempt: 2, result: ok, retry: true, health: true, webhookFailing: false },
      ]),
    );
    expect(counter.inScope(scope, mark).count).toBe(1);
    const before = deps.clock.now().getTime();
    await recordAttempts(deps, [{ delivery: deliveries[0]!, attempt: 3, result: failed, retry: true, health: false }]);
    const after = deps.clock.now().getTime();
    const [first] = await deps.db.select().from(outboundDeliveries).where(eq(outboundDeliveries.id, deliveries[0]!.id));
    expect(first).toMatchObject({ attempts: 3, status: "pending", completedAt: null });
    const wait = retryDelayMs(DELIVERY_BACKOFF, 4);
    expect(first!.nextAttemptAt!.getTime()).toBeGreaterThanOrEqual(before + wait);
    expect(first!.nextAttemptAt!.getTime()).toBeLessThanOrEqual(after + wait);
    const [second] = await deps.db
      .select()
      .from(outboundDeliveries)
      .where(eq(outboundDeliveries.id, deliveries[1]!.id));
    expect(second).toMatchObject({ attempts: 2, status: "succeeded" });
    const logged = await deps.db
      .select()
      .from(outboundDeliveryAttempts)
      .where(eq(outboundDeliveryAttempts.deliveryId, deliveries[0]!.id));
    expect(logged.map((attempt) => [attempt.attempt, attempt.statusCode]).sort()).toEqual([
      [1, 200],
      [2, 200],
      [3, 500],
    ]);
    const [job] = rowsOf<{ job_id: string }>(
      await deps.db.execute(sql`select job_id from job_outbox where job_id = ${`deliver-${deliveries[0]!.id}-4`}`),
    );
    expect(job?.job_id).toBe(`deliver-${deliveries[0]!.id}-4`);
  });

  it("records the attempts of a batch even when one delivery was deleted (with its webhook) meanwhile", async () => {
    const t = await team();
    const hook = await createHook(t);
    await post(t, "Kept");
    await receiver.waitFor(1, hook.path);
    // The worker logs its attempt after the answer arrives: wait for it, so the read below sees it.
    await until(async () => ((await deliveriesOf(t, hook)).data[0]?.attempts.length === 1 ? true : undefined));
    const [kept] = await ctx.server.app.deps.db
      .select()
      .from(outboundDeliveries)
      .where(eq(outboundDeliveries.webhookId, hook.id));
    const result = { statusCode: 200, durationMs: 3, error: null, responseBody: "ok" };
    await recordAttempts(ctx.server.app.deps, [
      { delivery: { id: "dlv_gone", webhookId: hook.id }, attempt: 1, result, retry: true, health: true },
      { delivery: kept!, attempt: 2, result, retry: true, health: true },
    ]);
    const attempts = await ctx.server.app.deps.db
      .select()
      .from(outboundDeliveryAttempts)
      .where(eq(outboundDeliveryAttempts.deliveryId, kept!.id));
    expect(attempts.map((attempt) => attempt.attempt).sort()).toEqual([1, 2]);
  });

  it("pages the delivery log newest first", async () => {
    const t = await team();
    const hook = await createHook(t);
    for (const n of [1, 2, 3]) await post(t, `Page ${n}`);
    await receiver.waitFor(3, hook.path);
    const page1 = await deliveriesOf(t, hook, "?limit=2");
    expect(page1.data.map((d) => d.payload.data.message.content)).toEqual(["Page 3", "Page 2"]);
    expect(page1.meta.next_cursor).toBe(page1.data[1]!.id);
    const page2 = await deliveriesOf(t, hook, `?limit=2&before=${page1.meta.next_cursor}`);
    expect(page2.data.map((d) => d.payload.data.message.content)).toEqual(["Page 1"]);
    expect(page2.meta.next_cursor).toBeNull();
    const bad = await ctx.api.get(`${base(t)}/${hook.id}/deliveries?before=nope`, { token: t.owner.token });
    expect(bad.status).toBe(422);
    expect(Object.keys(bad.body.errors)).toEqual(["before"]);
  });
});

describe("test send", () => {
  it("delivers webhook.test at once and answers 200 with the result, success or not, without retrying", async () => {
    const t = await team();
    const hook = await createHook(t);
    const sent = await ctx.api.post(`${base(t)}/${hook.id}/test`, {}, { token: t.owner.token });
    expect(sent.status).toBe(200);
    expect(sent.body.data).toMatchObject({
      webhook_id: hook.id,
      event: "webhook.test",
      status: "succeeded",
      attempt_count: 1,
      attempts: [{ attempt: 1, status_code: 200, error: null }],
    });
    const [request] = receiver.requests.filter((r) => r.path === hook.path);
    expect(request!.json).toMatchObject({ id: sent.body.data.id, event: "webhook.test", workspace_id: t.workspaceId });
    expect(request!.headers["x-service-event"]).toBe("webhook.test");
    expect(verify(request!, hook.secret)).toBe(true);

    // An answer that is not text (a NUL byte) is logged all the same.
    receiver.answerWith("binary\u0000answer");
    const binary = await ctx.api.post(`${base(t)}/${hook.id}/test`, {}, { token: t.owner.token });
    receiver.answerWith('{"ok":true}');
    expect(binary.status).toBe(200);
    expect(binary.body.data.attempts[0]).toMatchObject({ status_code: 200, response_body: "binary\uFFFDanswer" });

    receiver.fail(500, { times: 1 });
    const failing = await ctx.api.post(`${base(t)}/${hook.id}/test`, {}, { token: t.owner.token });
    expect(failing.status).toBe(200);
    expect(failing.body.data).toMatchObject({ status: "failed", attempts: [{ status_code: 500 }] });
    await advance(retryDelayMs(DELIVERY_BACKOFF, 2));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(receiver.requests.filter((r) => r.path === hook.path)).toHaveLength(3);
    // A test failure is no failing streak.
    const [row] = await ctx.server.app.deps.db.select().from(outboundWebhooks).where(eq(outboundWebhooks.id, hook.id));
    expect(row!.failingSince).toBeNull();
  });
});

describe("with the SSRF guard on (OUTBOUND_ALLOW_PRIVATE=false)", () => {
  let guarded: TestServer;
  let api: RestClient;
  beforeAll(async () => {
    guarded = await startTestServer({ OUTBOUND_ALLOW_PRIVATE: "false" });
    api = restClient(guarded.url);
  });
  afterAll(() => guarded?.close());

  it("refuses loopback, private, link-local and metadata targets on create and update (422 url)", async () => {
    const t = await team(api);
    for (const url of [
      "http://127.0.0.1/hook",
      `${receiver.url}/hook`,
      "http://10.1.2.3/hook",
      "http://192.168.0.10:8080/hook",
      "http://169.254.169.254/latest/meta-data/",
      "http://[::1]/hook",
      "http://[fd00:ec2::254]/",
      "http://localhost:3000/hook",
    ]) {
      const response = await api.post(base(t), { url, events: ["message.created"] }, { token: t.owner.token });
      expect(response.status, url).toBe(422);
      expect(Object.keys(response.body.errors), url).toEqual(["url"]);
    }
    const ok = await api.post(
      base(t),
      { url: "http://93.184.216.34/hook", events: ["message.created"] },
      {
        token: t.owner.token,
      },
    );
    expect(ok.status).toBe(201);
    const moved = await api.put(
      `${base(t)}/${ok.body.data.id}`,
      { url: "http://127.0.0.1:8080/" },
      {
        token: t.owner.token,
      },
    );
    expect(moved.status).toBe(422);
    expect(Object.keys(moved.body.errors)).toEqual(["url"]);
  });

  it("refuses a target that became private after it was saved, at send time (a failed attempt, nothing sent)", async () => {
    const t = await team(api);
    const created = await api.post(
      base(t),
      { url: "http://93.184.216.34/hook", events: ["message.created"] },
      {
        token: t.owner.token,
      },
    );
    const path = freshPath();
    // As if its DNS name now answered with a loopback address.
    await guarded.app.deps.db
      .update(outboundWebhooks)
      .set({ url: `${receiver.url}${path}` })
      .where(eq(outboundWebhooks.id, created.body.data.id));
    const sent = await api.post(`${base(t)}/${created.body.data.id}/test`, {}, { token: t.owner.token });
    expect(sent.status).toBe(200);
    expect(sent.body.data).toMatchObject({ status: "failed", attempts: [{ status_code: null }] });
    expect(sent.body.data.attempts[0].error).toMatch(/^refused target: /);
    expect(receiver.requests.filter((r) => r.path === path)).toEqual([]);
  });
});
