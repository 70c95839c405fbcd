// Push delivery (docs/push.md): a new message reaches the devices of the members it is for (at
// the default level, those it mentions; its author aside) through Expo, FCM and APNs, here real
// clients talking to fake providers on 127.0.0.1 (test/helpers/push.ts). Dead devices are
// deleted; 429 and 5xx are retried after Retry-After or a backoff, so an outage delays pushes and
// doubles none. The levels, mutes and badges in detail: test/push-preferences.test.ts.
import { randomBytes } from "node:crypto";
import { eq, inArray, sql, TransactionRollbackError } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { jobOutbox, pushDevices, users } from "../db/schema/index.ts";
import { startWorkers } from "../server/app.ts";
import { loadConfig } from "../server/config.ts";
import { createLogger } from "../server/logger.ts";
import { pushConsumer } from "../server/consumers/push.ts";
import { deliverPushes } from "../server/services/push/delivery.ts";
import type { PushMessagesPayload } from "../server/services/push/jobs.ts";
import { createPushProviders } from "../server/services/push/providers/index.ts";
import type { Database } from "../db/client.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import {
  pushesReceived,
  startFakeApns,
  startFakeExpo,
  startFakeFcm,
  type FakeApns,
  type FakeExpo,
  type FakeFcm,
} from "./helpers/push.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { statementsOf } from "./helpers/statements.ts";
import { until } from "./helpers/wait.ts";

let expo: FakeExpo;
let fcm: FakeFcm;
let apns: FakeApns;
let server: TestServer;
let api: RestClient;
const logLines: string[] = [];
const deps = () => server.app.deps;

beforeAll(async () => {
  [expo, fcm, apns] = await Promise.all([startFakeExpo(), startFakeFcm(), startFakeApns()]);
  const logger = createLogger("info", { write: (line: string) => void logLines.push(line) });
  server = await startTestServer({ PUSH_EXPO_URL: expo.url, ...fcm.env, ...apns.env }, { logger });
  api = restClient(server.url);
});
afterAll(async () => {
  await server?.close();
  await Promise.all([expo?.stop(), fcm?.stop(), apns?.stop()]);
});
beforeEach(() => {
  for (const fake of [expo, fcm, apns]) fake.recover();
});

type Provider = "expo" | "fcm" | "apns";
type Device = { id: string; token: string; provider: Provider };

const tokenFor = (provider: Provider) =>
  provider === "expo"
    ? `ExponentPushToken[${randomBytes(11).toString("base64url")}]`
    : provider === "apns"
      ? randomBytes(32).toString("hex")
      : `fcm-${randomBytes(24).toString("base64url")}`;

async function addDevice(user: RegisteredUser, provider: Provider): Promise<Device> {
  const token = tokenFor(provider);
  const platform = provider === "apns" ? "ios" : provider === "fcm" ? "android" : "ios";
  const response = await api.post("/api/v1/devices", { platform, provider, push_token: token }, { token: user.token });
  expect(response.status).toBe(201);
  return { id: response.body.data.id, token, provider };
}

/** Every notification a device got (silent badge updates aside), with the badge its provider's body carried. */
const pushesTo = (device: Device) =>
  pushesReceived({ expo, fcm, apns }, device).flatMap((push) => {
    if (push.silent) return [];
    const { silent: _, ...notification } = push;
    return [notification];
  });

const pushesOf = (device: Device, messageId: string) =>
  pushesTo(device).filter((push) => push.data.message_id === messageId);

async function joinWorkspace(user: RegisteredUser, workspaceId: string) {
  const response = await api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: user.token });
  expect(response.status).toBe(200);
}

/** Sets the user's default push level for channels (`mentions` unless set). */
async function setChannelPush(user: RegisteredUser, level: "all" | "mentions" | "none", client = api) {
  const response = await client.put(
    "/api/v1/me/notification-preferences",
    { channel_push: level },
    {
      token: user.token,
    },
  );
  expect(response.status).toBe(200);
}

/**
 * A public workspace whose #general has `count` members besides its owner; with `level`, everyone
 * in it pushes at that level (`all`: every message, as the tests of delivery itself want).
 */
async function team(count: number, level?: "all") {
  const owner = await registerUser(api, { name: "Olive" });
  const members = await Promise.all(
    Array.from({ length: count }, (_, n) => registerUser(api, { name: `Member ${n}` })),
  );
  const created = await api.post(
    "/api/v1/workspaces",
    { name: `Push ${randomBytes(3).toString("hex")}`, visibility: "public" },
    { token: owner.token },
  );
  expect(created.status).toBe(201);
  const workspaceId: string = created.body.data.id;
  for (const member of members) await joinWorkspace(member, workspaceId);
  if (level) for (const user of [owner, ...members]) await setChannelPush(user, level);
  const channels = await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
  const channelId: string = channels.body.data.find((channel: { slug: string }) => channel.slug === "general").id;
  return { owner, members, workspaceId, channelId };
}

async function post(user: RegisteredUser, workspaceId: string, channelId: string, body: Record<string, unknown>) {
  const response = await api.post(`/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`, body, {
    token: user.token,
  });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body.data as { id: string };
}

/** Lets whatever was enqueued run (the outbox's hand-over, the worker, a retry that came due). */
async function settle(ms = 300): Promise<void> {
  await deps().jobOutbox.flush();
  await new Promise((resolve) => setTimeout(resolve, ms));
  await deps().jobOutbox.flush();
}

describe("who gets a push", () => {
  it("at the default level a plain channel message pushes nobody; @channel reaches every member's devices on Expo, FCM and APNs, not the author's", async () => {
    const { owner, members, workspaceId, channelId } = await team(3);
    const [ann, ben, cat] = members as [RegisteredUser, RegisteredUser, RegisteredUser];
    const authorsPhone = await addDevice(owner, "expo");
    const devices = [
      await addDevice(ann, "expo"),
      await addDevice(ben, "fcm"),
      await addDevice(cat, "apns"),
      await addDevice(cat, "expo"),
    ];

    const plain = await post(owner, workspaceId, channelId, { content: "Coffee is ready" });
    const message = await post(owner, workspaceId, channelId, { content: "<!channel> Standup in five minutes" });
    await until(
      () => (devices.every((device) => pushesOf(device, message.id).length === 1) ? true : undefined),
      "every device's push",
    );
    for (const device of devices) {
      expect(pushesOf(device, message.id)).toEqual([
        {
          title: "Olive in #general",
          body: "<!channel> Standup in five minutes",
          data: { type: "message", message_id: message.id, workspace_id: workspaceId, channel_id: channelId },
          badge: 1,
        },
      ]);
    }
    await settle();
    expect(pushesTo(authorsPhone)).toEqual([]);
    for (const device of devices) expect(pushesOf(device, plain.id)).toEqual([]);
    for (const device of devices) expect(pushesOf(device, message.id)).toHaveLength(1);

    // What each provider was sent besides: its own auth and addressing.
    const apnsPush = apns.received.find((push) => push.payload.message_id === message.id)!;
    expect(apnsPush.headers["apns-topic"]).toBe(apns.env.PUSH_APNS_TOPIC);
    expect(apnsPush.headers["apns-push-type"]).toBe("alert");
    expect(apnsPush.payload.aps["thread-id"]).toBe(channelId);
    expect(fcm.received.find((push) => push.message.data.message_id === message.id)?.headers.authorization).toMatch(
      /^Bearer /,
    );
  });

  it("an inbound webhook's post reaches every channel member's devices, under the bot's name", async () => {
    const { owner, members, workspaceId, channelId } = await team(1, "all");
    const [ann] = members as [RegisteredUser];
    const [ownersPhone, annsPhone] = [await addDevice(owner, "expo"), await addDevice(ann, "fcm")];
    const hook = await api.post(
      `/api/v1/workspaces/${workspaceId}/webhooks`,
      { name: "Monitoring", bot_name: "Pager", default_channel_id: channelId },
      { token: owner.token },
    );
    expect(hook.status).toBe(201);
    const posted = await fetch(hook.body.data.url as string, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Service-Webhook-Secret": hook.body.data.secret },
      body: JSON.stringify({ content: "Disk 91% full on db-2" }),
    });
    expect(posted.status).toBe(201);
    const messageId = ((await posted.json()) as { data: { id: string } }).data.id;
    await until(
      () => ([ownersPhone, annsPhone].every((device) => pushesOf(device, messageId).length === 1) ? true : undefined),
      "both members' pushes",
    );
    for (const device of [ownersPhone, annsPhone]) {
      expect(pushesOf(device, messageId)[0]).toMatchObject({
        title: "Pager in #general",
        body: "Disk 91% full on db-2",
      });
    }
  });

  it("skips members who have not joined the channel and deactivated accounts", async () => {
    const { owner, members, workspaceId } = await team(3, "all");
    const [joined, away, witness] = members as [RegisteredUser, RegisteredUser, RegisteredUser];
    const created = await api.post(
      `/api/v1/workspaces/${workspaceId}/channels`,
      { name: `side-${randomBytes(3).toString("hex")}` },
      { token: owner.token },
    );
    const channelId: string = created.body.data.id;
    for (const user of [joined, witness]) {
      const response = await api.post(
        `/api/v1/workspaces/${workspaceId}/channels/${channelId}/join`,
        {},
        { token: user.token },
      );
      expect(response.status).toBe(200);
    }
    const lurker = await addDevice(away, "expo"); // in the workspace, not in the channel
    const listener = await addDevice(joined, "expo");
    const witnessPhone = await addDevice(witness, "fcm");

    const first = await post(owner, workspaceId, channelId, { content: "only for the channel" });
    await until(() => (pushesOf(listener, first.id).length === 1 ? true : undefined), "the member's push");
    await settle();
    expect(pushesTo(lurker)).toEqual([]);

    await deps().db.update(users).set({ isActive: false }).where(eq(users.id, joined.id));
    const second = await post(owner, workspaceId, channelId, { content: "while deactivated" });
    // The witness's push says the job for this message has run.
    await until(() => (pushesOf(witnessPhone, second.id).length === 1 ? true : undefined), "the witness's push");
    await deps().db.update(users).set({ isActive: true }).where(eq(users.id, joined.id));
    const third = await post(owner, workspaceId, channelId, { content: "back again" });
    await until(() => (pushesOf(listener, third.id).length === 1 ? true : undefined), "the reactivated member's push");
    expect(pushesOf(listener, second.id)).toEqual([]);
  });

  it("a direct message reaches the other participant only", async () => {
    const [alice, bob] = await Promise.all([registerUser(api, { name: "Alice" }), registerUser(api, { name: "Bob" })]);
    const alicesPhone = await addDevice(alice, "apns");
    const bobsPhone = await addDevice(bob, "fcm");
    const opened = await api.post(
      "/api/v1/direct-conversations",
      { participant_user_id: bob.id },
      { token: alice.token },
    );
    const conversationId: string = opened.body.data.id;
    const sent = await api.post(
      `/api/v1/direct-conversations/${conversationId}/messages`,
      { content: "Lunch?" },
      { token: alice.token },
    );
    expect(sent.status).toBe(201);
    await until(() => (pushesTo(bobsPhone).length === 1 ? true : undefined), "Bob's push");
    expect(pushesTo(bobsPhone)).toEqual([
      {
        title: "Alice (direct message)",
        body: "Lunch?",
        data: { type: "message", message_id: sent.body.data.id, conversation_id: conversationId },
        badge: 1,
      },
    ]);
    await settle();
    expect(pushesTo(alicesPhone)).toEqual([]);
  });

  it("a temporary room's message reaches its other members, titled with the room's name", async () => {
    const [host, guest] = await Promise.all([registerUser(api, { name: "Hana" }), registerUser(api, { name: "Gil" })]);
    await setChannelPush(guest, "all"); // a room's messages push as a channel's, at the member's own level
    const hostsPhone = await addDevice(host, "expo");
    const guestsPhone = await addDevice(guest, "apns");
    const room = await api.post("/api/v1/external/rooms", { name: "Support chat" }, { token: host.token });
    const roomId: string = room.body.data.room_id;
    await api.post(`/api/v1/external/rooms/${roomId}/join`, {}, { token: guest.token });
    const sent = await api.post(
      `/api/v1/external/rooms/${roomId}/messages`,
      { content: "Hi Gil" },
      { token: host.token },
    );
    expect(sent.status).toBe(201);
    await until(() => (pushesTo(guestsPhone).length === 1 ? true : undefined), "Gil's push");
    expect(pushesTo(guestsPhone)).toEqual([
      {
        title: "Hana in Support chat",
        body: "Hi Gil",
        data: { type: "message", message_id: sent.body.data.id, room_id: roomId },
        badge: 0, // a room keeps no read state: nothing in it counts
      },
    ]);
    await settle();
    expect(pushesTo(hostsPhone)).toEqual([]);
  });

  it("a thread reply says so and carries its parent; attachments are named; long text is cut", async () => {
    const { owner, members, workspaceId, channelId } = await team(1, "all");
    const phone = await addDevice(members[0]!, "expo");
    const mark = statementsOf(server).total();
    const parent = await post(owner, workspaceId, channelId, { content: "Release notes" });
    const reply = await post(owner, workspaceId, channelId, { content: "x".repeat(500), parent_message_id: parent.id });

    const form = new FormData();
    form.append("file", new Blob(["%PDF-1.4"], { type: "application/pdf" }), "report.pdf");
    const uploaded = await api.post("/api/v1/files", form, { token: owner.token });
    expect(uploaded.status).toBe(201);
    const withFile = await post(owner, workspaceId, channelId, { attachment_ids: [uploaded.body.data.id] });

    await until(() => (pushesTo(phone).length === 3 ? true : undefined), "three pushes");
    const [replyPush] = pushesOf(phone, reply.id);
    expect(replyPush?.title).toBe("Olive replied in #general");
    expect(replyPush?.data.parent_message_id).toBe(parent.id);
    expect(Array.from(replyPush!.body)).toHaveLength(178);
    expect(replyPush!.body.endsWith("…")).toBe(true);
    expect(pushesOf(phone, withFile.id)[0]?.body).toBe("📎 report.pdf");
    // Each job's one statement (the three messages may share one): its messages' recipients with
    // their devices and badges, and the messages with their files' names.
    const ran = statementsOf(server).since(mark);
    expect(ran.complete).toBe(true);
    const byJob = new Map<string, string[]>();
    for (const { scope, text } of ran.statements.filter(({ scope }) => scope.startsWith("job push-p")))
      byJob.set(scope, [...(byJob.get(scope) ?? []), text.trim().split(/\s+/)[0]!]);
    expect(byJob.size).toBeGreaterThanOrEqual(1);
    expect(byJob.size).toBeLessThanOrEqual(3);
    for (const statements of byJob.values()) expect(statements).toEqual(["with"]);
  });
});

describe("the push job", () => {
  // Cheap on purpose: the consumer asks only whether anyone there but the author has a device; the
  // job applies the preferences (test/push-preferences.test.ts), and a job for nobody sends nothing.
  it("is added with the message only when a member other than the author has a device", async () => {
    const { owner, members, workspaceId, channelId } = await team(1);
    await addDevice(owner, "expo");
    /** Whether the push consumer writes the job row for such a message (in a transaction rolled back afterwards). */
    const pushJobWritten = async (messageId: string) => {
      let written = false;
      await deps()
        .db.transaction(async (tx) => {
          const consumer = pushConsumer({ db: tx as unknown as Database, clock: deps().clock });
          await consumer.refresh?.();
          const event = {
            position: 1,
            createdAt: new Date(),
            payload: {
              type: "message.created",
              scope: { workspace_id: workspaceId, channel_id: channelId },
              data: {
                message: {
                  id: messageId,
                  workspace_id: workspaceId,
                  channel_id: channelId,
                  conversation_id: null,
                  room_id: null,
                  type: "text",
                  author: { type: "user", id: owner.id, name: "Owner", avatar_url: null },
                },
              },
            },
          };
          const result = await consumer.handle([event], {
            cte: sql`moved as (select 1)`,
            inTransaction: async () => true,
          });
          written =
            typeof result === "object" &&
            (await tx.select().from(jobOutbox).where(eq(jobOutbox.jobId, "push-p1"))).some(
              (row) => JSON.stringify(row.payload) === JSON.stringify({ messageIds: [messageId] }),
            );
          tx.rollback();
        })
        .catch((error: unknown) => {
          if (!(error instanceof TransactionRollbackError)) throw error;
        });
      return written;
    };
    expect(await pushJobWritten("msg_ONLYTHEAUTHORHASADEVICE0")).toBe(false);
    await addDevice(members[0]!, "fcm");
    expect(await pushJobWritten("msg_AMEMBERHASADEVICENOW0000")).toBe(true);
  });
});

describe("a job of many messages", () => {
  it("sends ten messages at a time in shared requests, saving after each step how far it got; a run after a crash sends only the rest", async () => {
    const { owner, members, workspaceId, channelId } = await team(1, "all");
    const phone = await addDevice(members[0]!, "expo");
    const ids: string[] = [];
    for (let n = 0; n < 25; n++) ids.push((await post(owner, workspaceId, channelId, { content: `note ${n}` })).id);
    await until(() => (ids.every((id) => pushesOf(phone, id).length === 1) ? true : undefined), "the 25 pushes");
    await settle();

    // The job of those messages run again, as after a crash that came once it had saved that the
    // first three were sent (a message nobody gets among them: it is skipped).
    const { providers } = createPushProviders(loadConfig({ ...server.env, PORT: "0" }).push, {
      clock: deps().clock,
      logger: deps().logger,
    });
    const saved: PushMessagesPayload[] = [];
    const requestsBefore = expo.requests;
    const messageIds = [...ids.slice(0, 5), "msg_NOSUCHMESSAGE0000000000", ...ids.slice(5)];
    await deliverPushes(
      deps(),
      providers,
      { messageIds, done: 3 },
      async (payload) => void saved.push(payload),
    ).finally(() => Promise.all([...providers.values()].map((provider) => provider.close())));
    // Three steps (places 3-12, 13-22, 23-25), each one request of its messages' notifications.
    expect(expo.requests - requestsBefore).toBe(3);
    expect(saved.map((payload) => payload.done)).toEqual([13, 23]);
    expect(saved.map((payload) => payload.messageIds)).toEqual([messageIds, messageIds]);
    for (const [index, id] of ids.entries())
      expect(pushesOf(phone, id), `message ${index}`).toHaveLength(index < 3 ? 1 : 2);
  });
});

describe("devices that are gone", () => {
  it("a deleted device gets nothing more", async () => {
    const { owner, members, workspaceId, channelId } = await team(1, "all");
    const kept = await addDevice(members[0]!, "expo");
    const deleted = await addDevice(members[0]!, "fcm");
    expect((await api.delete(`/api/v1/devices/${deleted.id}`, { token: members[0]!.token })).status).toBe(204);
    const message = await post(owner, workspaceId, channelId, { content: "after the delete" });
    await until(() => (pushesOf(kept, message.id).length === 1 ? true : undefined), "the kept device's push");
    await settle();
    expect(pushesTo(deleted)).toEqual([]);
  });

  it("a device the provider calls unregistered is deleted and gets nothing more (Expo, FCM, APNs)", async () => {
    const { owner, members, workspaceId, channelId } = await team(1, "all");
    const dead = [
      await addDevice(members[0]!, "expo"),
      await addDevice(members[0]!, "fcm"),
      await addDevice(members[0]!, "apns"),
    ];
    const alive = await addDevice(members[0]!, "expo");
    for (const device of dead) ({ expo, fcm, apns })[device.provider].unregister(device.token);

    await post(owner, workspaceId, channelId, { content: "are you there?" });
    const ids = dead.map((device) => device.id);
    await until(async () => {
      const left = await deps().db.select().from(pushDevices).where(inArray(pushDevices.id, ids));
      return left.length === 0 ? true : undefined;
    }, "the dead devices to be deleted");
    const later = await post(owner, workspaceId, channelId, { content: "still there?" });
    await until(() => (pushesOf(alive, later.id).length === 1 ? true : undefined), "the live device's push");
    await settle();
    for (const device of dead) expect(pushesTo(device)).toEqual([]);
  });
});

describe("provider failures", () => {
  it("retries after a 503 with Retry-After and after a 429, and each push arrives once", async () => {
    const { owner, members, workspaceId, channelId } = await team(2, "all");
    const onExpo = await addDevice(members[0]!, "expo");
    const onFcm = await addDevice(members[1]!, "fcm");
    expo.fail(503, { retryAfter: 1, times: 1 });
    fcm.fail(429, { retryAfter: 1, times: 1 });
    const requestsBefore = expo.requests;

    const message = await post(owner, workspaceId, channelId, { content: "try, try again" });
    await until(() => (expo.requests > requestsBefore ? true : undefined), "the first, refused, attempt");
    server.clock.advance(1_000); // the Retry-After, without sleeping through it
    await until(
      () => (pushesOf(onExpo, message.id).length === 1 && pushesOf(onFcm, message.id).length === 1 ? true : undefined),
      "both pushes after their retry",
    );
    await settle();
    expect(pushesOf(onExpo, message.id)).toHaveLength(1);
    expect(pushesOf(onFcm, message.id)).toHaveLength(1);
  });

  it("does not retry a refusal (400) that trying again cannot fix", async () => {
    const { owner, members, workspaceId, channelId } = await team(1, "all");
    const device = await addDevice(members[0]!, "apns");
    apns.fail(400, { reason: "BadTopic", times: 1 });
    const refused = await post(owner, workspaceId, channelId, { content: "refused" });
    // The refusal is the first message's (jobs may run side by side): its job has logged it.
    await until(
      () => (logLines.some((line) => line.includes(refused.id) && line.includes("refused")) ? true : undefined),
      "the refusal",
    );
    const next = await post(owner, workspaceId, channelId, { content: "next" });
    await until(() => (pushesOf(device, next.id).length === 1 ? true : undefined), "the next push");
    server.clock.advance(60 * 60_000);
    await settle();
    expect(pushesOf(device, refused.id)).toEqual([]);
    // Still registered: a refused notification is not a dead device.
    expect(await deps().db.select().from(pushDevices).where(eq(pushDevices.id, device.id))).toHaveLength(1);
  });

  it("a provider down for a while, then back: every push arrives, once", async () => {
    const { owner, members, workspaceId, channelId } = await team(3, "all");
    const devices = [
      await addDevice(members[0]!, "expo"),
      await addDevice(members[1]!, "fcm"),
      await addDevice(members[2]!, "apns"),
      await addDevice(members[2]!, "expo"),
    ];
    for (const fake of [expo, fcm, apns]) fake.fail(503);
    const sent: { id: string }[] = [];
    for (let n = 0; n < 3; n++)
      sent.push(await post(owner, workspaceId, channelId, { content: `during the outage ${n}` }));
    // A few rounds of refused retries (the clock moves the backoff along).
    for (let round = 0; round < 3; round++) {
      server.clock.advance(10_000);
      await settle(200);
    }
    for (const device of devices) for (const message of sent) expect(pushesOf(device, message.id)).toEqual([]);

    for (const fake of [expo, fcm, apns]) fake.recover();
    await until(async () => {
      server.clock.advance(30_000);
      await deps().jobOutbox.flush();
      return devices.every((device) => sent.every((message) => pushesOf(device, message.id).length >= 1))
        ? true
        : undefined;
    }, "every push after the outage");
    server.clock.advance(60 * 60_000);
    await settle();
    for (const device of devices) for (const message of sent) expect(pushesOf(device, message.id)).toHaveLength(1);
  });

  it("never writes a push token to the log", async () => {
    const all = logLines.join("\n");
    expect(all).toContain("push:"); // the retries and refusals above were logged
    for (const push of [
      ...expo.received.map((p) => p.to),
      ...fcm.received.map((p) => p.token),
      ...apns.received.map((p) => p.token),
    ]) {
      expect(all).not.toContain(push);
    }
  });
});

describe.runIf(process.env.REDIS_URL)("a server with WORKERS=off", () => {
  it("only enqueues; `npm run worker` (startWorkers) sends the pushes", async () => {
    const api2Server = await startTestServer({ PUSH_EXPO_URL: expo.url, WORKERS: "off" });
    const api2 = restClient(api2Server.url);
    try {
      const owner = await registerUser(api2, { name: "Quinn" });
      const reader = await registerUser(api2);
      await setChannelPush(reader, "all", api2);
      const { workspaceId, channelId } = await createWorkspaceWithGeneral(api2, owner);
      // Private workspace: invite the reader in.
      const invite = await api2.post(`/api/v1/workspaces/${workspaceId}/invites`, {}, { token: owner.token });
      expect(invite.status).toBe(201);
      expect(
        (await api2.post(`/api/v1/invites/${invite.body.data.token}/accept`, {}, { token: reader.token })).status,
      ).toBe(200);
      const token = tokenFor("expo");
      expect(
        (
          await api2.post(
            "/api/v1/devices",
            { platform: "android", provider: "expo", push_token: token },
            { token: reader.token },
          )
        ).status,
      ).toBe(201);
      const sent = await api2.post(
        `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
        { content: "queued" },
        { token: owner.token },
      );
      expect(sent.status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(expo.received.filter((push) => push.to === token)).toEqual([]);

      const workers = await startWorkers(loadConfig({ ...api2Server.env, PORT: "0" }));
      try {
        await until(
          () =>
            expo.received.some((push) => push.to === token && push.data?.message_id === sent.body.data.id)
              ? true
              : undefined,
          "the worker's push",
        );
      } finally {
        await workers.close();
      }
    } finally {
      await api2Server.close();
    }
  });
});
