// Presence and push (docs/presence.md, the contract's "Presence": while a user's status is `dnd`,
// decided when the push is sent, nothing is pushed to them; their counts still grow). Direct
// messages to a user with an Expo device, through the fake Expo of test/helpers/push.ts. That
// nothing was pushed is known from a witness: a direct message sent after it to another user,
// whose push arriving says the first message's push job has run (then a moment more is let pass).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { restClient, type RestClient } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { pushesReceived, startFakeExpo, type FakeDevice, type FakeExpo } from "./helpers/push.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

let expo: FakeExpo;
let server: TestServer;
let api: RestClient;

beforeAll(async () => {
  expo = await startFakeExpo();
  server = await startTestServer({ PUSH_EXPO_URL: expo.url });
  api = restClient(server.url);
});
afterAll(async () => {
  await server?.close();
  await expo?.stop();
});
beforeEach(() => expo.recover());

async function addPhone(user: RegisteredUser): Promise<FakeDevice> {
  const token = `ExponentPushToken[${randomBytes(11).toString("base64url")}]`;
  const response = await api.post(
    "/api/v1/devices",
    { platform: "ios", provider: "expo", push_token: token },
    { token: user.token },
  );
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return { provider: "expo", token };
}

/** The notifications (silent badge updates aside) a phone got for one message. */
const pushesOf = (phone: FakeDevice, messageId: string) =>
  pushesReceived({ expo } as Parameters<typeof pushesReceived>[0], phone).filter(
    (push) => !push.silent && push.data.message_id === messageId,
  );

async function waitForPush(phone: FakeDevice, messageId: string, what: string) {
  await until(() => (pushesOf(phone, messageId).length > 0 ? true : undefined), what, 10_000);
  expect(pushesOf(phone, messageId), what).toHaveLength(1);
  return pushesOf(phone, messageId)[0]!;
}

/** Lets whatever was enqueued run (the outbox's hand-over, the push worker). */
async function settle(ms = 300): Promise<void> {
  await server.app.deps.jobOutbox.flush();
  await new Promise((resolve) => setTimeout(resolve, ms));
  await server.app.deps.jobOutbox.flush();
}

async function openConversation(user: RegisteredUser, other: RegisteredUser): Promise<string> {
  const response = await api.post(
    "/api/v1/direct-conversations",
    { participant_user_id: other.id },
    { token: user.token },
  );
  expect([200, 201], JSON.stringify(response.body)).toContain(response.status);
  return response.body.data.id;
}

async function sendDirect(author: RegisteredUser, conversationId: string, content: string): Promise<string> {
  const response = await api.post(
    `/api/v1/direct-conversations/${conversationId}/messages`,
    { content },
    { token: author.token },
  );
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body.data.id;
}

async function setPresence(user: RegisteredUser, body: Record<string, unknown>) {
  const response = await api.put("/api/v1/me/presence", body, { token: user.token });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data as { setting: string; dnd_until: string | null; status: string };
}

/**
 * Alice writes to Bob (the user whose presence changes) and to Carol (the witness); both have a
 * phone, Alice has none.
 */
async function people() {
  const [alice, bob, carol] = await Promise.all([
    registerUser(api, { name: "Alice" }),
    registerUser(api, { name: "Bob" }),
    registerUser(api, { name: "Carol" }),
  ]);
  const [bobsPhone, carolsPhone] = await Promise.all([addPhone(bob), addPhone(carol)]);
  const [toBob, toCarol] = await Promise.all([openConversation(alice, bob), openConversation(alice, carol)]);
  /** Alice writes to Bob, then to Carol: once Carol's push is in, Bob's push job has run; answers Bob's message id. */
  async function unpushedToBob(content: string): Promise<string> {
    const messageId = await sendDirect(alice, toBob, content);
    const witnessId = await sendDirect(alice, toCarol, `witness of ${content}`);
    await waitForPush(carolsPhone, witnessId, `Carol's push after "${content}"`);
    await settle();
    expect(pushesOf(bobsPhone, messageId), `Bob's pushes of "${content}"`).toEqual([]);
    return messageId;
  }
  return { alice, bob, carol, bobsPhone, toBob, unpushedToBob };
}

/** Bob's counts of his conversation with Alice, and his total, from GET /api/v1/unread. */
async function unreadOf(user: RegisteredUser, conversationId: string) {
  const response = await api.get("/api/v1/unread", { token: user.token });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  const conversation = (
    response.body.data.conversations as { conversation_id: string; unread_count: number; mention_count: number }[]
  ).find((entry) => entry.conversation_id === conversationId);
  return {
    unread_count: conversation?.unread_count ?? 0,
    mention_count: conversation?.mention_count ?? 0,
    total_mentions: response.body.data.total_mentions as number,
  };
}

describe("push while do not disturb", () => {
  it("a direct message pushes normally; under dnd nothing is pushed while the counts still grow; back to auto it pushes again", async () => {
    const { alice, bob, bobsPhone, toBob, unpushedToBob } = await people();

    const first = await sendDirect(alice, toBob, "Before dnd");
    expect(await waitForPush(bobsPhone, first, "Bob's push before dnd")).toMatchObject({
      title: "Alice (direct message)",
      body: "Before dnd",
      badge: 1,
    });

    expect(await setPresence(bob, { setting: "dnd" })).toMatchObject({
      setting: "dnd",
      dnd_until: null,
      status: "dnd",
    });
    await unpushedToBob("During dnd");
    await unpushedToBob("Still dnd");
    // The counts (and so the badge of the next push) still grow.
    expect(await unreadOf(bob, toBob)).toEqual({ unread_count: 3, mention_count: 3, total_mentions: 3 });

    expect(await setPresence(bob, { setting: "auto" })).toMatchObject({ setting: "auto", dnd_until: null });
    const back = await sendDirect(alice, toBob, "After dnd");
    expect(await waitForPush(bobsPhone, back, "Bob's push after dnd")).toMatchObject({ body: "After dnd", badge: 4 });
    expect(await unreadOf(bob, toBob)).toEqual({ unread_count: 4, mention_count: 4, total_mentions: 4 });
  });

  it("away and invisible push as usual: only dnd holds pushes back", async () => {
    const { alice, bob, bobsPhone, toBob } = await people();
    for (const setting of ["away", "invisible"]) {
      await setPresence(bob, { setting });
      const messageId = await sendDirect(alice, toBob, `While ${setting}`);
      await waitForPush(bobsPhone, messageId, `Bob's push while ${setting}`);
    }
  });

  it("dnd with dnd_until: once that time has passed, pushes resume", async () => {
    const { alice, bob, bobsPhone, toBob } = await people();
    const until2s = new Date(Date.now() + 2_000).toISOString();
    const set = await setPresence(bob, { setting: "dnd", dnd_until: until2s });
    expect(set).toMatchObject({ setting: "dnd", status: "dnd" });
    expect(Date.parse(set.dnd_until!)).toBe(Date.parse(until2s));

    // The lapse shows at once in every answer: the setting is back to auto.
    await until(
      async () => {
        const own = await api.get("/api/v1/me/presence", { token: bob.token });
        return own.body.data.setting === "auto" ? own.body.data : undefined;
      },
      "Bob's dnd to lapse",
      10_000,
    );
    const messageId = await sendDirect(alice, toBob, "After dnd_until");
    await waitForPush(bobsPhone, messageId, "Bob's push after dnd_until passed");
  });

  it("while dnd_until is ahead nothing is pushed; when the server's clock passes it, pushes resume", async () => {
    const { alice, bob, bobsPhone, toBob, unpushedToBob } = await people();
    await setPresence(bob, { setting: "dnd", dnd_until: new Date(Date.now() + 10 * 60_000).toISOString() });
    await unpushedToBob("Before dnd_until");
    expect(await unreadOf(bob, toBob)).toMatchObject({ unread_count: 1 });

    // Decided when the push is sent: the server's time, moved past dnd_until.
    server.clock.advance(11 * 60_000);
    const own = await api.get("/api/v1/me/presence", { token: bob.token });
    expect(own.body.data).toMatchObject({ setting: "auto", dnd_until: null, status: "offline" });
    const messageId = await sendDirect(alice, toBob, "Past dnd_until");
    await waitForPush(bobsPhone, messageId, "Bob's push once the server's clock passed dnd_until");
  });
});
