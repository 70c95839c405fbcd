// Presence (contract.md "Presence", docs/presence.md) through the real server: the caller's own
// setting and status over REST and RPC, others' presence and who may see it, live connections
// (WebSocket and SSE) with the grace window, expiries, and the presence.onUsers subscription.
import { describe, expect, it } from "vitest";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { collect, world, type Feed } from "./helpers/live.ts";
import { RawSocket } from "./helpers/raw-socket.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { useTestServer } from "./helpers/server.ts";
import { besidesTokenLookup, describeStatements, measureRequest } from "./helpers/statements.ts";
import { until } from "./helpers/wait.ts";

/** A short window, so that the grace tests take seconds. */
const WINDOW_S = 2;
const ctx = useTestServer({ PRESENCE_OFFLINE_AFTER_SECONDS: String(WINDOW_S) });
const live = world(
  () => ctx.server,
  () => ctx.api,
);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Presence = {
  user_id: number;
  status: string;
  last_seen_at: string | null;
  status_text: string | null;
  status_emoji: string | null;
};

const sockets: RawSocket[] = [];
async function connect(user: RegisteredUser): Promise<RawSocket> {
  const socket = await RawSocket.signedIn(ctx.server.url, user.token);
  sockets.push(socket);
  return socket;
}

async function presenceOf(viewer: RegisteredUser, ...users: RegisteredUser[]): Promise<Presence[]> {
  const response = await ctx.api.get(`/api/v1/presence?user_ids=${users.map((user) => user.id).join(",")}`, {
    token: viewer.token,
  });
  expect(response.status).toBe(200);
  return response.body.data;
}

async function statusOf(viewer: RegisteredUser, user: RegisteredUser): Promise<string | undefined> {
  return (await presenceOf(viewer, user))[0]?.status;
}

function waitStatus(viewer: RegisteredUser, user: RegisteredUser, status: string, timeoutMs = 5_000) {
  return until(
    async () => ((await statusOf(viewer, user)) === status ? true : undefined),
    `${user.name} to be ${status}`,
    timeoutMs,
  );
}

/** Two people in one workspace, and a stranger who shares nothing with them. */
async function people() {
  const { owner, member, workspace } = await live.team();
  const stranger = await registerUser(ctx.api, { name: "Stan Stranger" });
  return { owner, member, stranger, workspace };
}

async function leave(user: RegisteredUser, workspaceId: string) {
  const members = await ctx.api.get(`/api/v1/workspaces/${workspaceId}/members`, { token: user.token });
  const mine = (members.body.data as { id: string; user_id: number }[]).find((member) => member.user_id === user.id)!;
  const response = await ctx.api.delete(`/api/v1/workspaces/${workspaceId}/members/${mine.id}`, { token: user.token });
  expect(response.status).toBe(204);
}

function watch(viewer: RegisteredUser, userIds: number[], options: { sse?: boolean } = {}): Feed {
  const client = live.chat(viewer.token, options);
  return collect((handlers) =>
    client.presence.onUsers.subscribe(
      { user_ids: userIds },
      { ...handlers, onData: (value) => handlers.onData({ id: "", data: value }) },
    ),
  );
}

/** A user's own presence when nothing is set (or everything set has lapsed), not connected. */
const NOTHING_SET = {
  setting: "auto",
  dnd_until: null,
  status_text: null,
  status_emoji: null,
  status_expires_at: null,
  status: "offline",
};

const presenceEvents = (feed: Feed) =>
  feed.received.map(({ event }) => (event as unknown as { data: { presence: Presence } }).data.presence);
const eventsFor = (feed: Feed, user: RegisteredUser) =>
  presenceEvents(feed).filter((presence) => presence.user_id === user.id);

describe("my presence", () => {
  it("starts as auto, offline, with no status, over REST and RPC", async () => {
    const user = await registerUser(ctx.api);
    const response = await ctx.api.get("/api/v1/me/presence", { token: user.token });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ data: NOTHING_SET });
    expect(await live.chat(user.token).presence.get.query()).toEqual(response.body);
    expect((await ctx.api.get("/api/v1/me/presence")).status).toBe(401);
  });

  it("changes only the fields sent; null clears; a setting other than dnd clears dnd_until", async () => {
    const user = await registerUser(ctx.api);
    const until = new Date(Date.now() + 3_600_000).toISOString();
    const expires = new Date(Date.now() + 7_200_000).toISOString();
    let response = await ctx.api.put(
      "/api/v1/me/presence",
      { setting: "dnd", dnd_until: until, status_text: "In a meeting", status_emoji: "📅", status_expires_at: expires },
      { token: user.token },
    );
    expect(response.status).toBe(200);
    expect(response.body.data).toEqual({
      setting: "dnd",
      dnd_until: new Date(until).toISOString().replace("Z", "+00:00"),
      status_text: "In a meeting",
      status_emoji: "📅",
      status_expires_at: new Date(expires).toISOString().replace("Z", "+00:00"),
      status: "dnd",
    });
    response = await ctx.api.put("/api/v1/me/presence", { status_text: "Lunch" }, { token: user.token });
    expect(response.body.data).toMatchObject({
      setting: "dnd",
      status_text: "Lunch",
      status_emoji: "📅",
      status: "dnd",
    });
    expect(response.body.data.dnd_until).not.toBeNull();
    response = await ctx.api.put("/api/v1/me/presence", { setting: "away" }, { token: user.token });
    expect(response.body.data).toMatchObject({
      setting: "away",
      dnd_until: null,
      status_text: "Lunch",
      status: "away",
    });
    response = await ctx.api.put(
      "/api/v1/me/presence",
      { status_text: null, status_emoji: "palm_tree", status_expires_at: null },
      { token: user.token },
    );
    expect(response.body.data).toMatchObject({ status_text: null, status_emoji: "palm_tree", status_expires_at: null });
    // dnd without an end: until changed.
    response = await ctx.api.put("/api/v1/me/presence", { setting: "dnd" }, { token: user.token });
    expect(response.body.data).toMatchObject({ setting: "dnd", dnd_until: null, status: "dnd" });
    // RPC, the same procedure.
    const rpc = await live.chat(user.token).presence.update.mutate({ setting: "invisible" });
    expect(rpc.data).toMatchObject({ setting: "invisible", status: "offline" });
    expect((await ctx.api.get("/api/v1/me/presence", { token: user.token })).body.data.setting).toBe("invisible");
  });

  it("refuses what the contract refuses, with the field's key", async () => {
    const user = await registerUser(ctx.api);
    const past = new Date(Date.now() - 60_000).toISOString();
    const future = new Date(Date.now() + 60_000).toISOString();
    const refusals: [Record<string, unknown>, string][] = [
      [{ setting: "busy" }, "setting"],
      [{ setting: "auto", dnd_until: future }, "dnd_until"],
      [{ dnd_until: future }, "dnd_until"], // the stored setting is auto
      [{ setting: "dnd", dnd_until: past }, "dnd_until"],
      [{ setting: "dnd", dnd_until: "tomorrow" }, "dnd_until"],
      [{ status_text: "x".repeat(101) }, "status_text"],
      [{ status_text: "🎉".repeat(101) }, "status_text"],
      [{ status_emoji: "not an emoji" }, "status_emoji"],
      [{ status_emoji: ":fire:" }, "status_emoji"],
      [{ status_emoji: "🎉🎉" }, "status_emoji"],
      [{ status_expires_at: past }, "status_expires_at"],
    ];
    for (const [body, key] of refusals) {
      const response = await ctx.api.put("/api/v1/me/presence", body, { token: user.token });
      expect(response.status, JSON.stringify(body)).toBe(422);
      expect(Object.keys(response.body.errors), JSON.stringify(body)).toEqual([key]);
    }
    // Nothing was changed by a refusal.
    expect((await ctx.api.get("/api/v1/me/presence", { token: user.token })).body.data).toMatchObject({
      setting: "auto",
      status_text: null,
    });
    // The limits themselves pass: 100 code points, one emoji, a dnd_until once dnd is stored.
    expect(
      (await ctx.api.put("/api/v1/me/presence", { status_text: "🎉".repeat(100) }, { token: user.token })).status,
    ).toBe(200);
    expect((await ctx.api.put("/api/v1/me/presence", { setting: "dnd" }, { token: user.token })).status).toBe(200);
    const response = await ctx.api.put("/api/v1/me/presence", { dnd_until: future }, { token: user.token });
    expect(response.status).toBe(200);
    expect(response.body.data.setting).toBe("dnd");
    const rpcError = await rejectionOf(live.chat(user.token).presence.update.mutate({ setting: "gone" as "away" }));
    expect(rpcError.data?.code).toBe("UNPROCESSABLE_CONTENT");
  });

  it("expires dnd_until and the status at once in every answer", async () => {
    const { owner, member } = await people();
    const soon = () => new Date(Date.now() + 1_200).toISOString();
    await ctx.api.put(
      "/api/v1/me/presence",
      { setting: "dnd", dnd_until: soon(), status_text: "Brb", status_emoji: "☕", status_expires_at: soon() },
      { token: member.token },
    );
    expect((await presenceOf(owner, member))[0]).toMatchObject({ status: "dnd", status_text: "Brb" });
    await sleep(1_400);
    expect((await ctx.api.get("/api/v1/me/presence", { token: member.token })).body.data).toEqual(NOTHING_SET);
    expect((await presenceOf(owner, member))[0]).toMatchObject({
      status: "offline",
      status_text: null,
      status_emoji: null,
    });
    // A later change starts from the lapsed state: the text sent, the rest gone.
    const response = await ctx.api.put("/api/v1/me/presence", { status_text: "Back" }, { token: member.token });
    expect(response.body.data).toMatchObject({
      setting: "auto",
      status_text: "Back",
      status_emoji: null,
      dnd_until: null,
    });
  });
});

describe("statements", () => {
  it("a change of the setting is one statement after the token check; each read is one", async () => {
    const { owner, member } = await people();
    const change = await measureRequest(ctx.server, (headers) =>
      ctx.api.put("/api/v1/me/presence", { setting: "away", status_text: "Out" }, { token: member.token, headers }),
    );
    expect(change.response.status).toBe(200);
    expect(besidesTokenLookup(change), describeStatements(change)).toBe(1);
    const own = await measureRequest(ctx.server, (headers) =>
      ctx.api.get("/api/v1/me/presence", { token: member.token, headers }),
    );
    expect(besidesTokenLookup(own), describeStatements(own)).toBe(1);
    const list = await measureRequest(ctx.server, (headers) =>
      ctx.api.get(`/api/v1/presence?user_ids=${member.id},${owner.id}`, { token: owner.token, headers }),
    );
    expect(list.response.status).toBe(200);
    expect(besidesTokenLookup(list), describeStatements(list)).toBe(1);
  });
});

describe("others' presence", () => {
  it("answers in the order asked, once each, leaving out strangers and unknown ids", async () => {
    const { owner, member, stranger } = await people();
    const response = await ctx.api.get(
      `/api/v1/presence?user_ids=${member.id},${stranger.id},${owner.id},2147483647,${member.id}`,
      { token: owner.token },
    );
    expect(response.status).toBe(200);
    expect(response.body.data.map((record: Presence) => record.user_id)).toEqual([member.id, owner.id]);
    expect(response.body.data[0]).toEqual({
      user_id: member.id,
      status: "offline",
      last_seen_at: null,
      status_text: null,
      status_emoji: null,
    });
    // The stranger sees only themselves.
    expect((await presenceOf(stranger, owner, member, stranger)).map((record) => record.user_id)).toEqual([
      stranger.id,
    ]);
    // RPC, the same.
    const rpc = await live.chat(owner.token).presence.list.query({ user_ids: `${member.id},${stranger.id}` });
    expect(rpc.data.map((record) => record.user_id)).toEqual([member.id]);
  });

  it("sees the other side of a direct conversation without a shared workspace", async () => {
    const [alice, bob] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    expect(await presenceOf(alice, bob)).toEqual([]);
    // A conversation needs a shared workspace or ... open it through a shared workspace, then leave.
    const { workspace } = await live.team();
    for (const user of [alice, bob])
      expect((await ctx.api.post(`/api/v1/workspaces/${workspace.id}/join`, {}, { token: user.token })).status).toBe(
        200,
      );
    await live.openConversation(alice, bob);
    for (const user of [alice, bob]) await leave(user, workspace.id);
    expect((await presenceOf(alice, bob)).map((record) => record.user_id)).toEqual([bob.id]);
  });

  it("refuses a user_ids that is not 1 to 200 positive integer ids", async () => {
    const user = await registerUser(ctx.api);
    const many = Array.from({ length: 201 }, (_, index) => index + 1).join(",");
    for (const query of [
      "",
      "user_ids=",
      "user_ids=a",
      "user_ids=1,,2",
      "user_ids=0",
      "user_ids=-1",
      "user_ids=1.5",
      "user_ids=%201",
      `user_ids=${many}`,
      "user_ids=2147483648",
    ]) {
      const response = await ctx.api.get(`/api/v1/presence?${query}`, { token: user.token });
      expect(response.status, query).toBe(422);
      expect(Object.keys(response.body.errors), query).toEqual(["user_ids"]);
    }
    const twoHundred = Array.from({ length: 200 }, (_, index) => index + 1).join(",");
    expect((await ctx.api.get(`/api/v1/presence?user_ids=${twoHundred}`, { token: user.token })).status).toBe(200);
    expect((await ctx.api.get(`/api/v1/presence?user_ids=1`)).status).toBe(401);
  });

  it("an invisible user, the caller too, reads offline; last_seen_at does not move while invisible", async () => {
    const { owner, member } = await people();
    await ctx.api.put("/api/v1/me/presence", { setting: "invisible" }, { token: member.token });
    const socket = await connect(member);
    await sleep(300);
    expect((await presenceOf(owner, member))[0]).toMatchObject({ status: "offline", last_seen_at: null });
    expect((await presenceOf(member, member))[0]).toMatchObject({ status: "offline", last_seen_at: null });
    expect((await ctx.api.get("/api/v1/me/presence", { token: member.token })).body.data.status).toBe("offline");
    socket.terminate();
  });
});

describe("a connection held while invisible", () => {
  const flushLastSeen = () => ctx.server.app.deps.presence.flushLastSeen();

  it("is never seen: back to auto, the user is offline at once and last_seen_at stays null", async () => {
    const { owner, member } = await people();
    await ctx.api.put("/api/v1/me/presence", { setting: "invisible" }, { token: member.token });
    const socket = await connect(member);
    await sleep(300);
    socket.terminate();
    await sleep(300);
    // Visible again inside what would be the grace window: the invisible connection keeps nobody online.
    expect((await ctx.api.put("/api/v1/me/presence", { setting: "auto" }, { token: member.token })).status).toBe(200);
    expect((await presenceOf(owner, member))[0]).toMatchObject({ status: "offline", last_seen_at: null });
    expect((await ctx.api.get("/api/v1/me/presence", { token: member.token })).body.data.status).toBe("offline");
    // The close time gathered for the batch is not written either.
    await flushLastSeen();
    expect((await presenceOf(owner, member))[0]).toMatchObject({ status: "offline", last_seen_at: null });
  });

  it("keeps the moment the user went invisible, not when that connection closed", async () => {
    const { owner, member } = await people();
    const socket = await connect(member);
    await waitStatus(owner, member, "online");
    await sleep(300);
    const hidden = Date.now();
    expect((await ctx.api.put("/api/v1/me/presence", { setting: "invisible" }, { token: member.token })).status).toBe(
      200,
    );
    await sleep(1_200);
    socket.terminate();
    await sleep(300);
    await ctx.api.put("/api/v1/me/presence", { setting: "auto" }, { token: member.token });
    await flushLastSeen();
    const record = (await presenceOf(owner, member))[0]!;
    expect(record.status).toBe("offline");
    expect(Math.abs(Date.parse(record.last_seen_at!) - hidden)).toBeLessThan(500);
  });

  it("still counts a close from before the user went invisible", async () => {
    const { owner, member } = await people();
    const socket = await connect(member);
    await waitStatus(owner, member, "online");
    socket.terminate();
    const closedAt = Date.now();
    await sleep(300);
    // Invisible and back before the batch wrote the close.
    await ctx.api.put("/api/v1/me/presence", { setting: "invisible" }, { token: member.token });
    await ctx.api.put("/api/v1/me/presence", { setting: "auto" }, { token: member.token });
    await flushLastSeen();
    const record = (await presenceOf(owner, member))[0]!;
    expect(Math.abs(Date.parse(record.last_seen_at!) - closedAt)).toBeLessThan(1_000);
  });
});

describe("live connections", () => {
  it("a signed-in WebSocket makes its user online; after the last one closes, offline once the window passed", async () => {
    const { owner, member } = await people();
    const socket = await connect(member);
    await waitStatus(owner, member, "online");
    const record = (await presenceOf(owner, member))[0]!;
    expect(Math.abs(Date.parse(record.last_seen_at!) - Date.now())).toBeLessThan(60_000);
    expect((await ctx.api.get("/api/v1/me/presence", { token: member.token })).body.data.status).toBe("online");
    // A second connection, then both close.
    const second = await connect(member);
    socket.terminate();
    await sleep(200);
    expect(await statusOf(owner, member)).toBe("online");
    second.terminate();
    const closedAt = Date.now();
    await sleep(200);
    expect(await statusOf(owner, member)).toBe("online"); // the grace window
    await waitStatus(owner, member, "offline", WINDOW_S * 1000 + 3_000);
    expect(Date.now() - closedAt).toBeGreaterThanOrEqual(WINDOW_S * 1000 - 300);
    const after = (await presenceOf(owner, member))[0]!;
    expect(Math.abs(Date.parse(after.last_seen_at!) - closedAt)).toBeLessThan(2_000);
  });

  it("a reconnect with a token revoked meanwhile is not signed in, though its sign-in was remembered", async () => {
    const { owner, member } = await people();
    const login = await ctx.api.post("/api/v1/auth/app/login", { email: member.email, password: member.password });
    const token: string = login.body.access_token;
    const first = await RawSocket.signedIn(ctx.server.url, token);
    sockets.push(first);
    await waitStatus(owner, member, "online");
    first.terminate();
    expect((await ctx.api.post("/api/v1/auth/app/logout", {}, { token })).status).toBeLessThan(300);
    const again = await RawSocket.signedIn(ctx.server.url, token);
    sockets.push(again);
    // Past the window of the first connection: only a counted reconnect would keep them online.
    await sleep(WINDOW_S * 1000 + 800);
    expect(await statusOf(owner, member)).toBe("offline");
    again.terminate();
  });

  it("a socket that never signs in does not count", async () => {
    const { owner, member } = await people();
    const socket = await RawSocket.open(ctx.server.url, { connectionParams: false });
    sockets.push(socket);
    await sleep(300);
    expect(await statusOf(owner, member)).toBe("offline");
    socket.terminate();
  });

  it("an SSE subscription counts as a live connection while it is open", async () => {
    const { owner, member } = await people();
    const feed = collect((handlers) =>
      live.chat(member.token, { sse: true }).events.onUser.subscribe(undefined, handlers),
    );
    await waitStatus(owner, member, "online");
    feed.unsubscribe();
    await waitStatus(owner, member, "offline", WINDOW_S * 1000 + 5_000);
  });

  it("away and dnd show whether connected or not", async () => {
    const { owner, member } = await people();
    await ctx.api.put("/api/v1/me/presence", { setting: "away" }, { token: member.token });
    expect(await statusOf(owner, member)).toBe("away");
    const socket = await connect(member);
    await sleep(300);
    expect(await statusOf(owner, member)).toBe("away");
    await ctx.api.put("/api/v1/me/presence", { setting: "dnd" }, { token: member.token });
    expect(await statusOf(owner, member)).toBe("dnd");
    await ctx.api.put("/api/v1/me/presence", { setting: "auto" }, { token: member.token });
    expect(await statusOf(owner, member)).toBe("online");
    socket.terminate();
  });
});

describe("presence.onUsers", () => {
  for (const door of ["WebSocket", "SSE"] as const) {
    it(`first sends the state of each visible user, then their changes within 2 s (${door})`, async () => {
      const { owner, member, stranger } = await people();
      await ctx.api.put("/api/v1/me/presence", { status_text: "Here" }, { token: owner.token });
      const feed = watch(member, [owner.id, stranger.id, member.id, 2147483647], { sse: door === "SSE" });
      await until(() => (presenceEvents(feed).length >= 2 ? true : undefined), "the first events");
      await sleep(300);
      const first = presenceEvents(feed);
      // The watcher itself is online (its own connection) over WebSocket; the owner is not.
      expect(first.map((record) => record.user_id)).toEqual([owner.id, member.id]);
      expect(first[0]).toMatchObject({ status: "offline", status_text: "Here" });
      // A status change, then a connection: each arrives within 2 s.
      await sleep(1_000);
      let sent = Date.now();
      await ctx.api.put("/api/v1/me/presence", { status_text: "Busy", status_emoji: "fire" }, { token: owner.token });
      await until(
        () => eventsFor(feed, owner).find((record) => record.status_text === "Busy"),
        "the status change",
        2_000,
      );
      expect(Date.now() - sent).toBeLessThan(2_000);
      await sleep(1_100);
      sent = Date.now();
      const socket = await connect(owner);
      await until(() => eventsFor(feed, owner).find((record) => record.status === "online"), "online", 2_000);
      expect(Date.now() - sent).toBeLessThan(2_000);
      // The stranger's changes never arrive.
      await ctx.api.put("/api/v1/me/presence", { status_text: "Secret" }, { token: stranger.token });
      await connect(stranger);
      await sleep(1_500);
      expect(presenceEvents(feed).some((record) => record.user_id === stranger.id)).toBe(false);
      socket.terminate();
    });
  }

  it("merges a user's bursts: at most one event a second, the last state wins", async () => {
    const { owner, member } = await people();
    const feed = watch(member, [owner.id]);
    await until(() => (eventsFor(feed, owner).length === 1 ? true : undefined), "the first event");
    await sleep(1_100);
    for (let index = 1; index <= 6; index++)
      await ctx.api.put("/api/v1/me/presence", { status_text: `Step ${index}` }, { token: owner.token });
    await until(
      () => eventsFor(feed, owner).find((record) => record.status_text === "Step 6"),
      "the last state",
      3_000,
    );
    await sleep(1_200);
    const events = eventsFor(feed, owner).slice(1);
    expect(events.length).toBeLessThanOrEqual(3);
    expect(events.at(-1)!.status_text).toBe("Step 6");
  });

  it("a reconnect inside the window sends no event; the window's end sends offline", async () => {
    const { owner, member } = await people();
    let socket = await connect(owner);
    await waitStatus(member, owner, "online");
    const feed = watch(member, [owner.id]);
    await until(() => eventsFor(feed, owner)[0], "the first event");
    expect(eventsFor(feed, owner)[0]!.status).toBe("online");
    socket.terminate();
    await sleep(500);
    socket = await connect(owner);
    await sleep(WINDOW_S * 1000 + 1_000);
    expect(eventsFor(feed, owner).map((record) => record.status)).toEqual(["online"]);
    socket.terminate();
    const closedAt = Date.now();
    await until(
      () => eventsFor(feed, owner).find((record) => record.status === "offline"),
      "offline",
      WINDOW_S * 1000 + 3_000,
    );
    expect(Date.now() - closedAt).toBeLessThan(WINDOW_S * 1000 + 2_000);
  });

  it("sends the lapse of dnd_until and of a status", async () => {
    const { owner, member } = await people();
    const soon = new Date(Date.now() + 1_500).toISOString();
    await ctx.api.put(
      "/api/v1/me/presence",
      { setting: "dnd", dnd_until: soon, status_text: "Focus", status_expires_at: soon },
      { token: owner.token },
    );
    const feed = watch(member, [owner.id]);
    await until(() => eventsFor(feed, owner)[0], "the first event");
    expect(eventsFor(feed, owner)[0]).toMatchObject({ status: "dnd", status_text: "Focus" });
    await until(
      () => eventsFor(feed, owner).find((record) => record.status === "offline" && record.status_text === null),
      "the lapse",
      5_000,
    );
  });

  it("stops sending a user's changes once no workspace is shared any more", async () => {
    const { owner, member, workspace } = await people();
    const feed = watch(owner, [member.id]);
    await until(() => eventsFor(feed, member)[0], "the first event");
    await sleep(1_100);
    await ctx.api.put("/api/v1/me/presence", { status_text: "Still here" }, { token: member.token });
    await until(() => eventsFor(feed, member).find((record) => record.status_text === "Still here"), "the change");
    await leave(member, workspace.id);
    await sleep(1_500);
    const before = eventsFor(feed, member).length;
    await ctx.api.put("/api/v1/me/presence", { status_text: "Gone" }, { token: member.token });
    await sleep(2_000);
    expect(eventsFor(feed, member).length).toBe(before);
  });

  it("refuses 0 or more than 500 ids, or ids that are not positive integers", async () => {
    const user = await registerUser(ctx.api);
    const client = live.chat(user.token);
    for (const user_ids of [[], Array.from({ length: 501 }, (_, index) => index + 1), [0], [-1], [1.5]]) {
      const feed = collect((handlers) => client.presence.onUsers.subscribe({ user_ids }, handlers));
      await until(() => feed.errors[0], "the refusal");
      expect((feed.errors[0] as { data?: { code?: string } }).data?.code).toBe("UNPROCESSABLE_CONTENT");
    }
    const feed = collect((handlers) =>
      client.presence.onUsers.subscribe({ user_ids: Array.from({ length: 500 }, (_, index) => index + 1) }, handlers),
    );
    await until(() => (feed.isStarted() ? true : undefined), "500 ids to be accepted");
    await sleep(200);
    expect(feed.errors).toEqual([]);
  });
});
