// Push preferences and who gets a push (docs/push.md, the contract's "Read state, unread counts,
// mentions and push preferences"): the levels (`all`, `mentions`, `none`, `default` following the
// user's `channel_push`), muted channels and conversations, thread participants, direct and room
// messages, the badge every push carries (read from each provider's request body: Expo `badge`,
// FCM `data.badge`, APNs `aps.badge`), the silent badge update after a read (at most one per user
// per 10 s), and the preference endpoints over REST and the typed client. Real clients talk to
// the fake Expo, FCM and APNs servers of test/helpers/push.ts.
import { randomBytes } from "node:crypto";
import { and, eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createChatClient, type ChatClient } from "@chat-service/client";
import { jobOutbox } from "../db/schema/index.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import {
  pushesReceived,
  startFakeApns,
  startFakeExpo,
  startFakeFcm,
  type FakeApns,
  type FakeDevice,
  type FakeExpo,
  type FakeFcm,
} from "./helpers/push.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

let expo: FakeExpo;
let fcm: FakeFcm;
let apns: FakeApns;
let server: TestServer;
let api: RestClient;
const clients: ChatClient[] = [];

beforeAll(async () => {
  [expo, fcm, apns] = await Promise.all([startFakeExpo(), startFakeFcm(), startFakeApns()]);
  server = await startTestServer({ PUSH_EXPO_URL: expo.url, ...fcm.env, ...apns.env });
  api = restClient(server.url);
});
afterAll(async () => {
  for (const client of clients) client.close();
  await server?.close();
  await Promise.all([expo?.stop(), fcm?.stop(), apns?.stop()]);
});
beforeEach(() => {
  for (const fake of [expo, fcm, apns]) fake.recover();
});

type Provider = FakeDevice["provider"];
type Level = "all" | "mentions" | "none";

async function addDevice(user: RegisteredUser, provider: Provider): Promise<FakeDevice> {
  const token =
    provider === "expo"
      ? `ExponentPushToken[${randomBytes(11).toString("base64url")}]`
      : provider === "apns"
        ? randomBytes(32).toString("hex")
        : `fcm-${randomBytes(24).toString("base64url")}`;
  const platform = provider === "fcm" ? "android" : "ios";
  const response = await api.post("/api/v1/devices", { platform, provider, push_token: token }, { token: user.token });
  expect(response.status).toBe(201);
  return { provider, token };
}

const pushesTo = (device: FakeDevice) => pushesReceived({ expo, fcm, apns }, device);
/** The notifications of one message a device got, as `{title, body, badge}`. */
const pushesOf = (device: FakeDevice, messageId: string) =>
  pushesTo(device).flatMap((push) =>
    !push.silent && push.data.message_id === messageId
      ? [{ title: push.title, body: push.body, badge: push.badge }]
      : [],
  );
/** The badges of the silent badge updates a device got, in order. */
const silentBadges = (device: FakeDevice) => pushesTo(device).flatMap((push) => (push.silent ? [push.badge] : []));

/** Waits until each device has its one notification of the message; answers their badges, in order. */
async function badgesOf(devices: FakeDevice[], messageId: string): Promise<(number | undefined)[]> {
  await until(
    () => (devices.every((device) => pushesOf(device, messageId).length >= 1) ? true : undefined),
    `the pushes of ${messageId}`,
  );
  return devices.map((device) => {
    const pushes = pushesOf(device, messageId);
    expect(pushes).toHaveLength(1);
    return pushes[0]!.badge;
  });
}

/** Lets whatever was enqueued run (the outbox's hand-over, the worker), so that an absence means something. */
async function settle(ms = 300): Promise<void> {
  await server.app.deps.jobOutbox.flush();
  await new Promise((resolve) => setTimeout(resolve, ms));
  await server.app.deps.jobOutbox.flush();
}

const mention = (user: RegisteredUser) => `<@${user.id}>`;

async function setMine(user: RegisteredUser, level: Level) {
  const response = await api.put("/api/v1/me/notification-preferences", { channel_push: level }, { token: user.token });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
}

const channelPreferencesPath = (place: Place) =>
  `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/notification-preferences`;

async function setChannel(user: RegisteredUser, place: Place, body: { push?: string; muted?: boolean }) {
  const response = await api.put(channelPreferencesPath(place), body, { token: user.token });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data as { push: string; muted: boolean };
}

type Place = { workspaceId: string; channelId: string };

/** A public workspace of `owner` and the users, all in its #general. */
async function team(owner: RegisteredUser, users: RegisteredUser[]): Promise<Place> {
  const created = await api.post(
    "/api/v1/workspaces",
    { name: `Prefs ${randomBytes(3).toString("hex")}`, visibility: "public" },
    { token: owner.token },
  );
  expect(created.status).toBe(201);
  const workspaceId: string = created.body.data.id;
  for (const user of users) {
    expect((await api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: user.token })).status).toBe(200);
  }
  const channels = await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
  const channelId: string = channels.body.data.find((channel: { slug: string }) => channel.slug === "general").id;
  return { workspaceId, channelId };
}

/** Another channel of the workspace (public unless said), which `joiners` join. */
async function channel(
  owner: RegisteredUser,
  workspaceId: string,
  joiners: RegisteredUser[],
  visibility: "public" | "private" = "public",
): Promise<Place> {
  const created = await api.post(
    `/api/v1/workspaces/${workspaceId}/channels`,
    { name: `side-${randomBytes(3).toString("hex")}`, visibility },
    { token: owner.token },
  );
  expect(created.status).toBe(201);
  const channelId: string = created.body.data.id;
  for (const user of joiners) {
    const joined = await api.post(
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}/join`,
      {},
      {
        token: user.token,
      },
    );
    expect(joined.status).toBe(200);
  }
  return { workspaceId, channelId };
}

async function post(user: RegisteredUser, place: Place, content: string, parentMessageId?: string): Promise<string> {
  const response = await api.post(
    `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages`,
    { content, ...(parentMessageId && { parent_message_id: parentMessageId }) },
    { token: user.token },
  );
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body.data.id;
}

async function conversation(from: RegisteredUser, to: RegisteredUser): Promise<string> {
  const opened = await api.post("/api/v1/direct-conversations", { participant_user_id: to.id }, { token: from.token });
  expect(opened.status).toBeLessThan(300);
  return opened.body.data.id;
}

async function sendDirect(from: RegisteredUser, conversationId: string, content: string): Promise<string> {
  const sent = await api.post(
    `/api/v1/direct-conversations/${conversationId}/messages`,
    { content },
    {
      token: from.token,
    },
  );
  expect(sent.status, JSON.stringify(sent.body)).toBe(201);
  return sent.body.data.id;
}

const users = (...names: string[]) => Promise.all(names.map((name) => registerUser(api, { name })));

describe("who gets a push", () => {
  it("follows each level: all, mentions, none, and default following channel_push both ways", async () => {
    const [olive, allUser, mentionsUser, noneUser, defaultAll, defaultMentions, defaultNone] = await users(
      "Olive",
      "All",
      "Mentions",
      "None",
      "Default all",
      "Default mentions",
      "Default none",
    );
    const general = await team(olive!, [
      allUser!,
      mentionsUser!,
      noneUser!,
      defaultAll!,
      defaultMentions!,
      defaultNone!,
    ]);
    await setChannel(allUser!, general, { push: "all" });
    await setChannel(mentionsUser!, general, { push: "mentions" });
    await setChannel(noneUser!, general, { push: "none" });
    // A channel setting wins over the user's own level; `default` follows it.
    await setMine(allUser!, "none");
    await setMine(noneUser!, "all");
    await setMine(defaultAll!, "all");
    await setMine(defaultNone!, "none");
    const [allPhone, mentionsPhone, nonePhone, defaultAllPhone, defaultMentionsPhone, defaultNonePhone] = [
      await addDevice(allUser!, "expo"),
      await addDevice(mentionsUser!, "fcm"),
      await addDevice(noneUser!, "apns"),
      await addDevice(defaultAll!, "apns"),
      await addDevice(defaultMentions!, "fcm"),
      await addDevice(defaultNone!, "expo"),
    ];
    const everyone = [
      allPhone!,
      mentionsPhone!,
      nonePhone!,
      defaultAllPhone!,
      defaultMentionsPhone!,
      defaultNonePhone!,
    ];

    const plain = await post(olive!, general, "Coffee is ready");
    expect(await badgesOf([allPhone!, defaultAllPhone!], plain)).toEqual([0, 0]);

    const named = await post(
      olive!,
      general,
      `${mention(mentionsUser!)} ${mention(noneUser!)} ${mention(defaultMentions!)} ${mention(defaultNone!)} review please`,
    );
    expect(await badgesOf([allPhone!, defaultAllPhone!, mentionsPhone!, defaultMentionsPhone!], named)).toEqual([
      0, 0, 1, 1,
    ]);

    const everybody = await post(olive!, general, "<!here> lunch");
    expect(await badgesOf([allPhone!, defaultAllPhone!, mentionsPhone!, defaultMentionsPhone!], everybody)).toEqual([
      1, 1, 2, 2,
    ]);
    await settle();
    for (const device of [nonePhone!, defaultNonePhone!]) expect(pushesTo(device)).toEqual([]);
    for (const device of [mentionsPhone!, defaultMentionsPhone!]) expect(pushesOf(device, plain)).toEqual([]);

    // `default` follows the user's level as it is now, both ways.
    await setMine(defaultAll!, "mentions");
    await setMine(defaultMentions!, "all");
    const later = await post(olive!, general, "Plain again");
    expect(await badgesOf([allPhone!, defaultMentionsPhone!], later)).toEqual([1, 2]);
    await settle();
    expect(pushesOf(defaultAllPhone!, later)).toEqual([]);
    for (const device of everyone) {
      for (const push of pushesTo(device)) expect(push.silent).toBe(false);
    }
  });

  it("a muted channel pushes nothing, even at level all, and adds nothing to the badge of a push from elsewhere", async () => {
    const [olive, mia] = await users("Olive", "Mia");
    const general = await team(olive!, [mia!]);
    const side = await channel(olive!, general.workspaceId, [mia!]);
    expect(await setChannel(mia!, side, { muted: true })).toEqual({ push: "default", muted: true });
    expect(await setChannel(mia!, side, { push: "all" })).toEqual({ push: "all", muted: true });
    const phone = await addDevice(mia!, "apns");

    const muted = await post(olive!, side, `<!channel> ${mention(mia!)} in the muted channel`);
    const elsewhere = await post(olive!, general, `${mention(mia!)} in #general`);
    expect(await badgesOf([phone], elsewhere)).toEqual([1]); // the muted channel's mention is not counted
    await settle();
    expect(pushesOf(phone, muted)).toEqual([]);

    // Unmuted, the channel counts again (and pushes again).
    expect(await setChannel(mia!, side, { muted: false })).toEqual({ push: "all", muted: false });
    const next = await post(olive!, general, `${mention(mia!)} again`);
    expect(await badgesOf([phone], next)).toEqual([3]);
    const unmuted = await post(olive!, side, "now it pushes");
    expect(await badgesOf([phone], unmuted)).toEqual([3]);
  });

  it("a muted conversation pushes nothing and adds nothing to the badge of a push from elsewhere", async () => {
    const [alice, bob] = await users("Alice", "Bob");
    const general = await team(alice!, [bob!]);
    const conversationId = await conversation(alice!, bob!);
    const muted = await api.put(
      `/api/v1/direct-conversations/${conversationId}/notification-preferences`,
      { muted: true },
      { token: bob!.token },
    );
    expect(muted.status).toBe(200);
    expect(muted.body).toEqual({ data: { muted: true } });
    const phone = await addDevice(bob!, "expo");

    const quiet = await sendDirect(alice!, conversationId, "Are you there?");
    const elsewhere = await post(alice!, general, `${mention(bob!)} see the doc`);
    expect(await badgesOf([phone], elsewhere)).toEqual([1]);
    await settle();
    expect(pushesOf(phone, quiet)).toEqual([]);

    await api.put(
      `/api/v1/direct-conversations/${conversationId}/notification-preferences`,
      { muted: false },
      { token: bob!.token },
    );
    const loud = await sendDirect(alice!, conversationId, "Now?");
    expect(await badgesOf([phone], loud)).toEqual([3]); // both direct messages and the mention
  });

  it("a thread reply reaches the thread's participants without a mention unless their level is none", async () => {
    const [olive, parentAuthor, replier, silentReplier, leaver, outsider] = await users(
      "Olive",
      "Paula",
      "Rita",
      "Nora",
      "Lee",
      "Otto",
    );
    const general = await team(olive!, [parentAuthor!, replier!, silentReplier!, leaver!, outsider!]);
    await setChannel(replier!, general, { push: "mentions" });
    await setChannel(silentReplier!, general, { push: "none" });
    const [parentPhone, replierPhone, silentPhone, leaverPhone, outsiderPhone, authorPhone] = [
      await addDevice(parentAuthor!, "expo"),
      await addDevice(replier!, "fcm"),
      await addDevice(silentReplier!, "apns"),
      await addDevice(leaver!, "expo"),
      await addDevice(outsider!, "fcm"),
      await addDevice(olive!, "apns"),
    ];

    const parent = await post(parentAuthor!, general, "Team dinner on Friday?");
    await post(replier!, general, "I'm in", parent);
    await post(silentReplier!, general, "Count me out", parent);
    await post(leaver!, general, "Maybe", parent);
    const left = await api.delete(
      `/api/v1/workspaces/${general.workspaceId}/channels/${general.channelId}/members/${leaver!.id}`,
      { token: leaver!.token },
    );
    expect(left.status).toBe(204);

    const reply = await post(olive!, general, "Booked for eight", parent);
    expect(await badgesOf([parentPhone, replierPhone], reply)).toEqual([0, 0]);
    expect(pushesOf(parentPhone, reply)[0]!.title).toBe("Olive replied in #general");
    await settle();
    for (const device of [silentPhone, leaverPhone, outsiderPhone, authorPhone]) {
      expect(pushesOf(device, reply)).toEqual([]);
    }
    // A mention in a thread reaches whoever it names, participant or not.
    const named = await post(olive!, general, `${mention(outsider!)} you too?`, parent);
    expect(await badgesOf([outsiderPhone, parentPhone, replierPhone], named)).toEqual([1, 0, 0]);
  });

  it("a direct message reaches the other participant with a badge that counts it; its author gets nothing", async () => {
    const [alice, bob] = await users("Alice", "Bob");
    const conversationId = await conversation(alice!, bob!);
    const [alicesPhone, bobsPhone] = [await addDevice(alice!, "fcm"), await addDevice(bob!, "apns")];
    const first = await sendDirect(alice!, conversationId, "Lunch?");
    expect(await badgesOf([bobsPhone], first)).toEqual([1]);
    expect(pushesOf(bobsPhone, first)[0]).toEqual({ title: "Alice (direct message)", body: "Lunch?", badge: 1 });
    const second = await sendDirect(alice!, conversationId, "At noon");
    expect(await badgesOf([bobsPhone], second)).toEqual([2]);
    const answer = await sendDirect(bob!, conversationId, "Sure");
    expect(await badgesOf([alicesPhone], answer)).toEqual([1]);
    await settle();
    expect(pushesOf(alicesPhone, first)).toEqual([]);
    expect(pushesOf(bobsPhone, answer)).toEqual([]);
  });

  it("a temporary room's message pushes its members as a channel message at their own default level", async () => {
    const [host, quiet, keen] = await users("Hana", "Quinn", "Kim");
    await setMine(keen!, "all");
    const room = await api.post("/api/v1/external/rooms", { name: "Support chat" }, { token: host!.token });
    expect(room.status).toBe(201);
    const roomId: string = room.body.data.room_id;
    for (const guest of [quiet!, keen!]) {
      expect((await api.post(`/api/v1/external/rooms/${roomId}/join`, {}, { token: guest.token })).status).toBe(200);
    }
    const [hostsPhone, quietPhone, keenPhone] = [
      await addDevice(host!, "expo"),
      await addDevice(quiet!, "fcm"),
      await addDevice(keen!, "apns"),
    ];
    const say = async (content: string) => {
      const sent = await api.post(`/api/v1/external/rooms/${roomId}/messages`, { content }, { token: host!.token });
      expect(sent.status, JSON.stringify(sent.body)).toBe(201);
      return sent.body.data.id as string;
    };
    const plain = await say("Welcome");
    expect(await badgesOf([keenPhone], plain)).toEqual([0]); // a room keeps no read state: it adds nothing
    const named = await say(`${mention(quiet!)} your ticket is fixed`);
    expect(await badgesOf([quietPhone, keenPhone], named)).toEqual([0, 0]);
    await settle();
    expect(pushesOf(quietPhone, plain)).toEqual([]);
    expect(pushesTo(hostsPhone)).toEqual([]);
  });

  it("an edit that adds a mention pushes nobody; the mention counts, and a later mention's badge includes it", async () => {
    const [olive, mia] = await users("Olive", "Mia");
    const general = await team(olive!, [mia!]);
    const phone = await addDevice(mia!, "expo");
    const plain = await post(olive!, general, "plain words");
    // Its push job has run and found nobody (Mia is at the default level, not mentioned).
    await settle();
    const edited = await api.patch(
      `/api/v1/workspaces/${general.workspaceId}/channels/${general.channelId}/messages/${plain}`,
      { content: `now ${mention(mia!)}` },
      { token: olive!.token },
    );
    expect(edited.status, JSON.stringify(edited.body)).toBe(200);
    await settle();
    expect(pushesTo(phone)).toEqual([]);
    // The edited message mentions Mia now: a new mention pushes with a badge of 2.
    const next = await post(olive!, general, `again ${mention(mia!)}`);
    expect(await badgesOf([phone], next)).toEqual([2]);
  });

  it("never pushes the author, even at level all and mentioning themselves", async () => {
    const [olive, witness] = await users("Olive", "Walt");
    const general = await team(olive!, [witness!]);
    await setMine(olive!, "all");
    const [authorsPhone, witnessPhone] = [await addDevice(olive!, "expo"), await addDevice(witness!, "expo")];
    const message = await post(olive!, general, `<!channel> ${mention(olive!)} note to self`);
    expect(await badgesOf([witnessPhone], message)).toEqual([1]);
    await settle();
    expect(pushesTo(authorsPhone)).toEqual([]);
  });
});

describe("the silent badge update", () => {
  /** Moves the clock just past the start of the next 10-second window. */
  function startOfNextWindow() {
    const now = server.clock.now().getTime();
    server.clock.advance(10_000 - (now % 10_000) + 50);
  }
  const badgeJobsOf = async (user: RegisteredUser) =>
    server.app.deps.db
      .select()
      .from(jobOutbox)
      .where(and(eq(jobOutbox.name, "push.badge"), sql`(${jobOutbox.payload} ->> 'userId')::integer = ${user.id}`));

  it("reaches every device once per 10-second window after reads lower the badge, and not after one that does not", async () => {
    const [olive, mia] = await users("Olive", "Mia");
    const general = await team(olive!, [mia!]);
    const devices = [await addDevice(mia!, "expo"), await addDevice(mia!, "fcm"), await addDevice(mia!, "apns")];
    // Each push counts its badge when it is sent: the second message is posted after the first's push.
    const first = await post(olive!, general, `${mention(mia!)} one`);
    expect(await badgesOf(devices, first)).toEqual([1, 1, 1]);
    const second = await post(olive!, general, `${mention(mia!)} two`);
    expect(await badgesOf(devices, second)).toEqual([2, 2, 2]);

    startOfNextWindow();
    const readPath = `/api/v1/workspaces/${general.workspaceId}/channels/${general.channelId}/read`;
    for (const messageId of [first, second]) {
      const read = await api.post(readPath, { message_id: messageId }, { token: mia!.token });
      expect(read.status, JSON.stringify(read.body)).toBe(200);
    }
    // Two reads that lowered the badge, one job for the window, due at its end.
    await until(async () => ((await badgeJobsOf(mia!)).length === 1 ? true : undefined), "the badge job");
    await settle();
    for (const device of devices) expect(silentBadges(device)).toEqual([]);

    server.clock.advance(10_000);
    await until(
      () => (devices.every((device) => silentBadges(device).length === 1) ? true : undefined),
      "the silent updates",
    );
    for (const device of devices) expect(silentBadges(device)).toEqual([0]);
    // What each provider was sent: a badge, and nothing to show or sound.
    const [onExpo, onFcm, onApns] = devices as [FakeDevice, FakeDevice, FakeDevice];
    const expoBody = expo.received.find((push) => push.to === onExpo.token && push.title === undefined)!;
    expect(expoBody).toMatchObject({ badge: 0 });
    expect(expoBody).not.toHaveProperty("body");
    expect(expoBody).not.toHaveProperty("sound");
    const fcmBody = fcm.received.find((push) => push.token === onFcm.token && !push.message.notification)!;
    expect(fcmBody.message.data).toEqual({ type: "badge", badge: "0" });
    const apnsBody = apns.received.find((push) => push.token === onApns.token && !push.payload.aps.alert)!;
    expect(apnsBody.payload.aps).toEqual({ badge: 0 });
    expect(apnsBody.headers["apns-push-type"]).toBe("alert");
    expect(apnsBody.headers["apns-priority"]).toBe("5");

    // A read that lowers nothing (no mention was left) sends nothing.
    const plain = await post(olive!, general, "nothing to see");
    startOfNextWindow();
    expect((await api.post(readPath, { message_id: plain }, { token: mia!.token })).status).toBe(200);
    await settle();
    expect(await badgeJobsOf(mia!)).toEqual([]);

    // A direct message read in a later window: one more update.
    const conversationId = await conversation(olive!, mia!);
    const direct = await sendDirect(olive!, conversationId, "ping");
    expect(await badgesOf(devices, direct)).toEqual([1, 1, 1]);
    startOfNextWindow();
    const read = await api.post(
      `/api/v1/direct-conversations/${conversationId}/read`,
      { message_id: direct },
      { token: mia!.token },
    );
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    await until(async () => ((await badgeJobsOf(mia!)).length === 1 ? true : undefined), "the second badge job");
    server.clock.advance(10_000);
    await until(
      () => (devices.every((device) => silentBadges(device).length === 2) ? true : undefined),
      "the second silent updates",
    );
    for (const device of devices) expect(silentBadges(device)).toEqual([0, 0]);
  });
});

describe("the preference endpoints", () => {
  it("a channel's: 200 with the defaults, a PUT of one field keeps the other, 422 for nothing or a bad value", async () => {
    const [olive, mia] = await users("Olive", "Mia");
    const general = await team(olive!, [mia!]);
    const path = channelPreferencesPath(general);
    expect(await api.get(path, { token: mia!.token })).toMatchObject({
      status: 200,
      body: { data: { push: "default", muted: false } },
    });
    expect(await setChannel(mia!, general, { push: "none" })).toEqual({ push: "none", muted: false });
    expect(await setChannel(mia!, general, { muted: true })).toEqual({ push: "none", muted: true });
    expect((await api.get(path, { token: mia!.token })).body).toEqual({ data: { push: "none", muted: true } });
    // Another member's settings are their own.
    expect((await api.get(path, { token: olive!.token })).body).toEqual({ data: { push: "default", muted: false } });

    const nothing = await api.put(path, {}, { token: mia!.token });
    expect(nothing.status).toBe(422);
    expect(nothing.body).toEqual({
      message: "The given data was invalid.",
      errors: { push: ["The push field is required when muted is not present."] },
    });
    const badLevel = await api.put(path, { push: "loud" }, { token: mia!.token });
    expect(badLevel.status).toBe(422);
    expect(Object.keys(badLevel.body.errors)).toEqual(["push"]);
    const badMute = await api.put(path, { muted: "maybe" }, { token: mia!.token });
    expect(badMute.status).toBe(422);
    expect(Object.keys(badMute.body.errors)).toEqual(["muted"]);
    expect((await api.get(path, { token: mia!.token })).body).toEqual({ data: { push: "none", muted: true } });
    expect((await api.get(path)).status).toBe(401);
  });

  it("a channel's: 403 for a workspace member who has not joined it, 404 for whoever may not read it", async () => {
    const [olive, mia, stranger] = await users("Olive", "Mia", "Stranger");
    const general = await team(olive!, [mia!]);
    const open = await channel(olive!, general.workspaceId, []);
    const secret = await channel(olive!, general.workspaceId, [], "private");
    for (const response of [
      await api.get(channelPreferencesPath(open), { token: mia!.token }),
      await api.put(channelPreferencesPath(open), { muted: true }, { token: mia!.token }),
    ]) {
      expect(response.status).toBe(403);
    }
    const unknown = { workspaceId: general.workspaceId, channelId: "ch_00000000000000000000000000" };
    for (const [user, place] of [
      [mia!, secret],
      [stranger!, general],
      [mia!, unknown],
    ] as const) {
      for (const response of [
        await api.get(channelPreferencesPath(place), { token: user.token }),
        await api.put(channelPreferencesPath(place), { push: "all" }, { token: user.token }),
      ]) {
        expect(response.status).toBe(404);
        expect(response.body).toEqual({ message: "Channel not found." });
      }
    }
    // The owner's own settings in the private channel were not touched by anyone else's PUT.
    expect((await api.get(channelPreferencesPath(secret), { token: olive!.token })).body).toEqual({
      data: { push: "default", muted: false },
    });
  });

  it("a direct conversation's: participants only, 422 without muted", async () => {
    const [alice, bob, eve] = await users("Alice", "Bob", "Eve");
    const conversationId = await conversation(alice!, bob!);
    const path = `/api/v1/direct-conversations/${conversationId}/notification-preferences`;
    expect((await api.get(path, { token: bob!.token })).body).toEqual({ data: { muted: false } });
    expect((await api.put(path, { muted: true }, { token: bob!.token })).body).toEqual({ data: { muted: true } });
    expect((await api.get(path, { token: bob!.token })).body).toEqual({ data: { muted: true } });
    expect((await api.get(path, { token: alice!.token })).body).toEqual({ data: { muted: false } });
    const missing = await api.put(path, {}, { token: bob!.token });
    expect(missing.status).toBe(422);
    expect(Object.keys(missing.body.errors)).toEqual(["muted"]);
    for (const response of [
      await api.get(path, { token: eve!.token }),
      await api.put(path, { muted: true }, { token: eve!.token }),
      await api.get("/api/v1/direct-conversations/dc_00000000000000000000000000/notification-preferences", {
        token: bob!.token,
      }),
    ]) {
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ message: "Conversation not found." });
    }
  });

  it("the user's own: mentions unless set; 422 for a level that is not one", async () => {
    const [mia] = await users("Mia");
    const path = "/api/v1/me/notification-preferences";
    expect((await api.get(path, { token: mia!.token })).body).toEqual({ data: { channel_push: "mentions" } });
    expect((await api.put(path, { channel_push: "all" }, { token: mia!.token })).body).toEqual({
      data: { channel_push: "all" },
    });
    expect((await api.get(path, { token: mia!.token })).body).toEqual({ data: { channel_push: "all" } });
    for (const body of [{}, { channel_push: "default" }, { channel_push: "loud" }]) {
      const refused = await api.put(path, body, { token: mia!.token });
      expect(refused.status).toBe(422);
      expect(Object.keys(refused.body.errors)).toEqual(["channel_push"]);
    }
  });

  it("through the typed client", async () => {
    const [olive, mia] = await users("Olive", "Mia");
    const general = await team(olive!, [mia!]);
    const open = await channel(olive!, general.workspaceId, []);
    const conversationId = await conversation(olive!, mia!);
    const client = createChatClient({ url: server.url, token: mia!.token });
    clients.push(client);
    const { notificationPreferences } = client;

    expect(await notificationPreferences.getMine.query()).toEqual({ data: { channel_push: "mentions" } });
    expect(await notificationPreferences.updateMine.mutate({ channel_push: "none" })).toEqual({
      data: { channel_push: "none" },
    });
    const where = { workspace_id: general.workspaceId, id: general.channelId };
    expect(await notificationPreferences.getChannel.query(where)).toEqual({ data: { push: "default", muted: false } });
    expect(await notificationPreferences.updateChannel.mutate({ ...where, push: "all" })).toEqual({
      data: { push: "all", muted: false },
    });
    expect(await notificationPreferences.updateChannel.mutate({ ...where, muted: true })).toEqual({
      data: { push: "all", muted: true },
    });
    expect(
      await notificationPreferences.updateConversation.mutate({ conversation_id: conversationId, muted: true }),
    ).toEqual({
      data: { muted: true },
    });
    expect(await notificationPreferences.getConversation.query({ conversation_id: conversationId })).toEqual({
      data: { muted: true },
    });

    const invalid = await rejectionOf(notificationPreferences.updateChannel.mutate(where));
    expect(invalid.data?.httpStatus).toBe(422);
    const notJoined = await rejectionOf(
      notificationPreferences.getChannel.query({ workspace_id: general.workspaceId, id: open.channelId }),
    );
    expect(notJoined.data?.code).toBe("FORBIDDEN");
    const unknown = await rejectionOf(
      notificationPreferences.getConversation.query({ conversation_id: "dc_00000000000000000000000000" }),
    );
    expect(unknown.data?.code).toBe("NOT_FOUND");
  });
});
