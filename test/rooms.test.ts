// Temporary rooms (docs/rooms.md): create, read, join and extend, every rule and both of the
// document's error bodies, over REST and the typed client; talking in a room (messages, live
// events); and closing it at its expiry (the job, its warning, the sweeper). Time is moved with
// the server's clock seam, never slept.
import { eq, like } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { attachments, fileDeletions, jobOutbox, messages, roomMembers, rooms, users } from "../db/schema/index.ts";
import { sweepExpiredRooms } from "../server/services/rooms/expiry.ts";
import { registerUser, stageTextFile, type RegisteredUser } from "./helpers/factories.ts";
import { collect, world } from "./helpers/live.ts";
import { until } from "./helpers/wait.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

const HOUR = 3600_000;
const NOT_ALLOWED = {
  message: "Temporary Room extension is not allowed.",
  errors: { code: ["temporary_room_extension_not_allowed"] },
};
const EXCEEDS = {
  message: "The given data was invalid.",
  errors: { extension_hours: ["extension_hours_exceeds_limit"] },
};

type Room = {
  room_id: string;
  name: string;
  owner_id: number;
  expires_at: string;
  max_expires_at: string;
  extension_count: number;
  created_at: string;
};

async function pro(name = "Pia"): Promise<RegisteredUser> {
  const user = await registerUser(ctx.api, { name });
  await ctx.server.app.deps.db.update(users).set({ plan: "personal_pro" }).where(eq(users.id, user.id));
  return user;
}

async function createRoom(owner: RegisteredUser, body: Record<string, unknown> = {}): Promise<Room> {
  const response = await ctx.api.post(
    "/api/v1/external/rooms",
    { name: "Support chat", ...body },
    { token: owner.token },
  );
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body.data;
}

const extend = (room: Room, token: string | undefined, body: Record<string, unknown> = {}, headers = {}) =>
  ctx.api.post(`/api/v1/external/rooms/${room.room_id}/extend`, body, { token, headers });

const ms = (timestamp: string) => Date.parse(timestamp);

describe("creating and reading a room", () => {
  it("creates a room for 24 hours by default, with a 7-day ceiling; its owner and members read it, nobody else", async () => {
    const owner = await registerUser(ctx.api, { name: "Omar" });
    const room = await createRoom(owner);
    expect(room).toEqual({
      room_id: expect.stringMatching(/^room_[0-9A-Z]{26}$/),
      name: "Support chat",
      owner_id: owner.id,
      expires_at: expect.stringMatching(/\+00:00$/),
      max_expires_at: expect.any(String),
      extension_count: 0,
      created_at: expect.any(String),
    });
    expect(ms(room.expires_at) - ms(room.created_at)).toBe(24 * HOUR);
    expect(ms(room.max_expires_at) - ms(room.created_at)).toBe(7 * 24 * HOUR);

    const read = await ctx.api.get(`/api/v1/external/rooms/${room.room_id}`, { token: owner.token });
    expect(read.status).toBe(200);
    expect(read.body).toEqual({ data: room });

    const guest = await registerUser(ctx.api, { name: "Gail" });
    expect((await ctx.api.get(`/api/v1/external/rooms/${room.room_id}`, { token: guest.token })).status).toBe(404);
    const joined = await ctx.api.post(`/api/v1/external/rooms/${room.room_id}/join`, {}, { token: guest.token });
    expect(joined.status).toBe(200);
    expect(joined.body).toEqual({ data: room });
    expect((await ctx.api.post(`/api/v1/external/rooms/${room.room_id}/join`, {}, { token: guest.token })).status).toBe(
      200,
    );
    expect((await ctx.api.get(`/api/v1/external/rooms/${room.room_id}`, { token: guest.token })).body).toEqual({
      data: room,
    });
    expect((await ctx.api.get(`/api/v1/external/rooms/${room.room_id}`)).status).toBe(401);
    const unknown = await ctx.api.get("/api/v1/external/rooms/room_00000000000000000000000000", { token: owner.token });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ message: "Room not found." });
    // An id no room could have (too long, any shape) is the same 404, on every room path.
    const long = "a".repeat(300);
    for (const [method, path] of [
      ["GET", `/api/v1/external/rooms/${long}`],
      ["POST", `/api/v1/external/rooms/${long}/join`],
      ["POST", `/api/v1/external/rooms/${long}/extend`],
      ["GET", `/api/v1/external/rooms/${long}/messages`],
    ] as const) {
      const response =
        method === "GET" ? await ctx.api.get(path, { token: owner.token }) : await ctx.api.post(path, {}, { token: owner.token });
      expect(response.status, `${method} ${path.slice(0, 40)}`).toBe(404);
      expect(response.body).toEqual({ message: "Room not found." });
    }
  });

  it("takes duration_hours from 1 to 24 and a name of 1 to 120 characters (422 otherwise)", async () => {
    const owner = await registerUser(ctx.api, { name: "Olga" });
    for (const hours of [1, 24]) {
      const room = await createRoom(owner, { duration_hours: hours, name: "x".repeat(120) });
      expect(ms(room.expires_at) - ms(room.created_at)).toBe(hours * HOUR);
    }
    for (const duration_hours of [0, 25, 1.5, "twelve", -1]) {
      const response = await ctx.api.post(
        "/api/v1/external/rooms",
        { name: "Bad", duration_hours },
        { token: owner.token },
      );
      expect(response.status, String(duration_hours)).toBe(422);
      expect(Object.keys(response.body.errors)).toEqual(["duration_hours"]);
    }
    for (const name of [undefined, "", "   ", "x".repeat(121)]) {
      const response = await ctx.api.post("/api/v1/external/rooms", { name }, { token: owner.token });
      expect(response.status).toBe(422);
      expect(Object.keys(response.body.errors)).toEqual(["name"]);
    }
  });

  it("is gone for every read once it has expired (404), joining included", async () => {
    const owner = await registerUser(ctx.api, { name: "Otto" });
    const guest = await registerUser(ctx.api, { name: "Gus" });
    const room = await createRoom(owner, { duration_hours: 1 });
    ctx.server.clock.advance(HOUR - 1_000);
    expect((await ctx.api.get(`/api/v1/external/rooms/${room.room_id}`, { token: owner.token })).status).toBe(200);
    ctx.server.clock.advance(1_000);
    expect((await ctx.api.get(`/api/v1/external/rooms/${room.room_id}`, { token: owner.token })).status).toBe(404);
    expect((await ctx.api.post(`/api/v1/external/rooms/${room.room_id}/join`, {}, { token: guest.token })).status).toBe(
      404,
    );
  });
});

describe("extending a room", () => {
  it("extends by 24 hours by default for a personal_pro owner: 200 {data: {room_id, expires_at, max_expires_at, extension_count}}", async () => {
    const owner = await pro();
    const room = await createRoom(owner, { duration_hours: 2 });
    const response = await extend(room, owner.token);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      data: {
        room_id: room.room_id,
        expires_at: new Date(ms(room.expires_at) + 24 * HOUR).toISOString().replace("Z", "+00:00"),
        max_expires_at: room.max_expires_at,
        extension_count: 1,
      },
    });
    const one = await extend(room, owner.token, { extension_hours: 1 });
    expect(ms(one.body.data.expires_at) - ms(response.body.data.expires_at)).toBe(HOUR);
    const [row] = await ctx.server.app.deps.db.select().from(rooms).where(eq(rooms.id, room.room_id));
    expect(row!.extensionCount).toBe(2);
  });

  it("refuses a free-plan owner with the document's 403 body", async () => {
    const owner = await registerUser(ctx.api, { name: "Fred" });
    const room = await createRoom(owner);
    const response = await extend(room, owner.token);
    expect(response.status).toBe(403);
    expect(response.body).toEqual(NOT_ALLOWED);
  });

  it("refuses extension_hours above 24 or below 1 with the document's 422 body; 1 and 24 pass", async () => {
    const owner = await pro();
    const room = await createRoom(owner, { duration_hours: 1 });
    for (const extension_hours of [25, 0, -3, 1000]) {
      const response = await extend(room, owner.token, { extension_hours });
      expect(response.status, String(extension_hours)).toBe(422);
      expect(response.body).toEqual(EXCEEDS);
    }
    const fraction = await extend(room, owner.token, { extension_hours: 1.5 });
    expect(fraction.status).toBe(422);
    expect(Object.keys(fraction.body.errors)).toEqual(["extension_hours"]);
    expect((await extend(room, owner.token, { extension_hours: 24 })).status).toBe(200);
    expect((await extend(room, owner.token, { extension_hours: 1 })).status).toBe(200);
  });

  it("never passes max_expires_at (7 days), and refuses once the room reaches it", async () => {
    const owner = await pro();
    const room = await createRoom(owner);
    let last: { expires_at: string; extension_count: number } | undefined;
    for (let n = 1; n <= 6; n++) {
      const response = await extend(room, owner.token);
      expect(response.status).toBe(200);
      last = response.body.data;
    }
    // Created with 24 h, plus six times 24 h: exactly 7 days.
    expect(last!.expires_at).toBe(room.max_expires_at);
    expect(last!.extension_count).toBe(6);
    const refused = await extend(room, owner.token, { extension_hours: 1 });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual(NOT_ALLOWED);

    // A last extension bigger than what is left stops at the ceiling.
    const other = await createRoom(owner);
    for (let n = 0; n < 5; n++) await extend(other, owner.token);
    await extend(other, owner.token, { extension_hours: 23 });
    const capped = await extend(other, owner.token, { extension_hours: 24 });
    expect(capped.status).toBe(200);
    expect(capped.body.data.expires_at).toBe(other.max_expires_at);
  });

  it("allows 10 extensions and refuses the 11th", async () => {
    const owner = await pro();
    const room = await createRoom(owner, { duration_hours: 1 });
    for (let n = 1; n <= 10; n++) {
      const response = await extend(room, owner.token, { extension_hours: 1 });
      expect(response.status).toBe(200);
      expect(response.body.data.extension_count).toBe(n);
    }
    const eleventh = await extend(room, owner.token, { extension_hours: 1 });
    expect(eleventh.status).toBe(403);
    expect(eleventh.body).toEqual(NOT_ALLOWED);
  });

  it("keeps both limits when extensions race: 12 at once, 10 pass", async () => {
    const owner = await pro();
    const room = await createRoom(owner, { duration_hours: 1 });
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => extend(room, owner.token, { extension_hours: 1 })),
    );
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(10);
    expect(answers.filter((answer) => answer.status === 403)).toHaveLength(2);
    const [row] = await ctx.server.app.deps.db.select().from(rooms).where(eq(rooms.id, room.room_id));
    expect(row!.extensionCount).toBe(10);
    expect(row!.expiresAt.getTime() - ms(room.expires_at)).toBe(10 * HOUR);
  });

  it("refuses an expired room (403), and is 404 for a room that is not the caller's", async () => {
    const owner = await pro();
    const room = await createRoom(owner, { duration_hours: 1 });
    const stranger = await pro("Sam");
    const member = await pro("Mel");
    await ctx.api.post(`/api/v1/external/rooms/${room.room_id}/join`, {}, { token: member.token });
    for (const user of [stranger, member]) {
      const response = await extend(room, user.token);
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ message: "Room not found." });
    }
    expect((await extend({ ...room, room_id: "room_nope" }, owner.token)).status).toBe(404);
    ctx.server.clock.advance(HOUR);
    const expired = await extend(room, owner.token);
    expect(expired.status).toBe(403);
    expect(expired.body).toEqual(NOT_ALLOWED);
  });

  it("accepts a token with temporary-rooms:extend and a web session; a token without the ability is 403", async () => {
    const owner = await pro();
    const room = await createRoom(owner, { duration_hours: 1 });
    const mint = async (abilities: string[]) =>
      (await ctx.api.post("/api/v1/tokens", { name: `t ${abilities}`, abilities }, { token: owner.token })).body
        .access_token as string;
    const withAbility = await mint(["temporary-rooms:extend"]);
    expect((await extend(room, withAbility, { extension_hours: 1 })).status).toBe(200);
    const without = await extend(room, await mint(["read", "write"]), { extension_hours: 1 });
    expect(without.status).toBe(403);
    expect(without.body).toEqual({ message: 'This token does not have the "temporary-rooms:extend" ability.' });

    const login = await ctx.api.post("/api/v1/auth/web/login", { email: owner.email, password: owner.password });
    expect(login.status).toBe(200);
    const session = login.headers
      .getSetCookie()
      .map((cookie) => cookie.split(";")[0]!)
      .find((cookie) => cookie.startsWith("chat_session="))!;
    const bySession = await extend(
      room,
      undefined,
      { extension_hours: 1 },
      {
        Cookie: session,
        Origin: new URL(ctx.server.config.appUrl).origin,
      },
    );
    expect(bySession.status).toBe(200);
    expect(bySession.body.data.extension_count).toBe(2);
  });

  it("is the same procedure over typed RPC, with the same error bodies", async () => {
    const owner = await pro();
    const client = live.chat(owner.token);
    const created = await client.rooms.create.mutate({ name: "RPC room", duration_hours: 3 });
    const extended = await client.rooms.extend.mutate({ room_id: created.data.room_id, extension_hours: 2 });
    expect(extended.data).toMatchObject({ room_id: created.data.room_id, extension_count: 1 });
    expect(ms(extended.data.expires_at) - ms(created.data.expires_at)).toBe(2 * HOUR);
    const tooLong = await rejectionOf(
      client.rooms.extend.mutate({ room_id: created.data.room_id, extension_hours: 25 }),
    );
    expect(tooLong.data?.code).toBe("UNPROCESSABLE_CONTENT");
    expect(tooLong.data?.errors).toEqual(EXCEEDS.errors);
    const free = await registerUser(ctx.api, { name: "Free" });
    const freeClient = live.chat(free.token);
    const freeRoom = await freeClient.rooms.create.mutate({ name: "Free room" });
    const refused = await rejectionOf(freeClient.rooms.extend.mutate({ room_id: freeRoom.data.room_id }));
    expect(refused.data?.code).toBe("FORBIDDEN");
    expect(refused.message).toBe(NOT_ALLOWED.message);
    expect(refused.data?.errors).toEqual(NOT_ALLOWED.errors);
    expect((await client.rooms.get.query({ room_id: created.data.room_id })).data.name).toBe("RPC room");
  });
});

const roomPath = (room: Room) => `/api/v1/external/rooms/${room.room_id}`;

async function say(room: Room, user: RegisteredUser, content: string, extra: Record<string, unknown> = {}) {
  return ctx.api.post(`${roomPath(room)}/messages`, { content, ...extra }, { token: user.token });
}

/** Moves the clock and runs the jobs that became due (the room's closing and its warning). */
async function advance(msToMove: number) {
  ctx.server.clock.advance(msToMove);
  await ctx.server.app.deps.jobOutbox.flush();
}

async function pair() {
  const owner = await registerUser(ctx.api, { name: "Rhea" });
  const guest = await registerUser(ctx.api, { name: "Gio" });
  const room = await createRoom(owner, { duration_hours: 1 });
  expect((await ctx.api.post(`${roomPath(room)}/join`, {}, { token: guest.token })).status).toBe(200);
  return { owner, guest, room };
}

describe("talking in a room", () => {
  it("lets its members post and read, newest first, through the message service; nobody else", async () => {
    const { owner, guest, room } = await pair();
    const first = await say(room, owner, "Hello, how can we help?");
    expect(first.status).toBe(201);
    expect(first.body.data).toMatchObject({
      room_id: room.room_id,
      workspace_id: null,
      channel_id: null,
      conversation_id: null,
      author: { type: "user", id: owner.id, name: "Rhea" },
      content: "Hello, how can we help?",
    });
    expect((await say(room, guest, "My order is late")).status).toBe(201);
    const page = await ctx.api.get(`${roomPath(room)}/messages?limit=1`, { token: guest.token });
    expect(page.status).toBe(200);
    expect(page.body.data.map((m: { content: string }) => m.content)).toEqual(["My order is late"]);
    const older = await ctx.api.get(`${roomPath(room)}/messages?before=${page.body.meta.next_cursor}`, {
      token: owner.token,
    });
    expect(older.body).toMatchObject({ data: [{ content: "Hello, how can we help?" }], meta: { next_cursor: null } });

    const stranger = await registerUser(ctx.api, { name: "Stu" });
    expect((await ctx.api.get(`${roomPath(room)}/messages`, { token: stranger.token })).status).toBe(404);
    const intruder = await say(room, stranger, "let me in");
    expect(intruder.status).toBe(404);
    expect(intruder.body).toEqual({ message: "Room not found." });
    expect((await say(room, owner, "")).status).toBe(422);
  });

  it("is live: a member's subscription gets messages, the warning 10 minutes ahead, and ends with room.expired", async () => {
    const { owner, guest, room } = await pair();
    const feed = collect((handlers) =>
      live.chat(guest.token).rooms.onRoom.subscribe({ room_id: room.room_id }, handlers),
    );
    await until(() => (feed.isStarted() ? true : undefined), "the subscription to start");
    await say(room, owner, "Welcome");
    await until(() => (feed.messages().length === 1 ? true : undefined), "the message live");
    expect(feed.messages()[0]!.event).toMatchObject({ type: "message.created", room_id: room.room_id });

    await advance(50 * 60_000 - 1_000);
    expect(feed.received.some(({ event }) => event.type === "room.expiring")).toBe(false);
    await advance(1_000);
    const warning = await until(
      () => feed.received.find(({ event }) => event.type === "room.expiring"),
      "room.expiring",
    );
    expect(warning.event).toMatchObject({
      room_id: room.room_id,
      data: { room_id: room.room_id, expires_at: room.expires_at },
    });

    await advance(10 * 60_000);
    const closed = await until(() => feed.received.find(({ event }) => event.type === "room.expired"), "room.expired");
    expect(closed.event.data).toEqual({ room_id: room.room_id });
    await until(() => (feed.isCompleted() ? true : undefined), "the subscription to end");
    const again = await rejectionOf(
      new Promise((resolve, reject) => {
        live.chat(guest.token).rooms.onRoom.subscribe({ room_id: room.room_id }, { onError: reject, onData: resolve });
      }),
    );
    expect(again.data?.code).toBe("NOT_FOUND");
  });

  it("deletes its messages, files and memberships when it closes; later requests are 404", async () => {
    const { owner, guest, room } = await pair();
    const file = await stageTextFile(ctx.server.url, owner, "room notes");
    const posted = await say(room, owner, "The notes", { attachment_ids: [file.id] });
    expect(posted.status).toBe(201);
    const download = await fetch(posted.body.data.attachments[0].download_url, {
      headers: { Authorization: `Bearer ${guest.token}` },
    });
    expect(download.status).toBe(200);
    expect(await download.text()).toBe("room notes");
    const [stored] = await ctx.server.app.deps.db.select().from(attachments).where(eq(attachments.id, file.id));

    await advance(60 * 60_000);
    const db = ctx.server.app.deps.db;
    await until(async () =>
      (await db.select().from(rooms).where(eq(rooms.id, room.room_id))).length === 0 ? true : undefined,
    );
    expect(await db.select().from(messages).where(eq(messages.roomId, room.room_id))).toEqual([]);
    expect(await db.select().from(roomMembers).where(eq(roomMembers.roomId, room.room_id))).toEqual([]);
    expect(await db.select().from(attachments).where(eq(attachments.id, file.id))).toEqual([]);
    // The file's bytes go too.
    await until(async () => {
      const waiting = await db.select().from(fileDeletions).where(eq(fileDeletions.storageKey, stored!.storageKey));
      return waiting.length === 0 ? true : undefined;
    }, "the file's deletion");
    await expect(ctx.server.app.deps.storage.get(stored!.storageKey)).rejects.toThrow();
    for (const user of [owner, guest]) {
      expect((await ctx.api.get(roomPath(room), { token: user.token })).status).toBe(404);
      expect((await ctx.api.get(`${roomPath(room)}/messages`, { token: user.token })).status).toBe(404);
      expect((await say(room, user, "anyone?")).status).toBe(404);
    }
    expect((await extend(room, owner.token)).status).toBe(404);
  });

  it("moves its closing with every extension", async () => {
    const owner = await pro("Paz");
    const room = await createRoom(owner, { duration_hours: 1 });
    expect((await extend(room, owner.token, { extension_hours: 2 })).status).toBe(200);
    await advance(60 * 60_000 + 1_000); // past the first expiry: its job finds another expiry
    expect((await ctx.api.get(roomPath(room), { token: owner.token })).status).toBe(200);
    expect((await say(room, owner, "still here")).status).toBe(201);
    await advance(2 * 60 * 60_000);
    expect((await ctx.api.get(roomPath(room), { token: owner.token })).status).toBe(404);
    await until(async () =>
      (await ctx.server.app.deps.db.select().from(rooms).where(eq(rooms.id, room.room_id))).length === 0
        ? true
        : undefined,
    );
  });

  it("closes a room whose closing job was lost with the sweeper", async () => {
    const { owner, room } = await pair();
    await say(room, owner, "before the outage");
    // The jobs are gone, as if the queue lost them while no process ran.
    await ctx.server.app.deps.db.delete(jobOutbox).where(like(jobOutbox.jobId, `room-%-${room.room_id}-%`));
    await advance(60 * 60_000);
    const db = ctx.server.app.deps.db;
    expect(await db.select().from(rooms).where(eq(rooms.id, room.room_id))).toHaveLength(1);
    expect(await sweepExpiredRooms(ctx.server.app.deps)).toBeGreaterThanOrEqual(1);
    expect(await db.select().from(rooms).where(eq(rooms.id, room.room_id))).toEqual([]);
    expect(await db.select().from(messages).where(eq(messages.roomId, room.room_id))).toEqual([]);
  });

  it("keeps one outcome when an extension races the closing: extended and alive, or refused and gone", async () => {
    const owner = await pro("Rae");
    for (let run = 0; run < 3; run++) {
      const room = await createRoom(owner, { duration_hours: 1 });
      ctx.server.clock.advance(60 * 60_000 - 5);
      const [extended] = await Promise.all([extend(room, owner.token, { extension_hours: 1 }), advance(10)]);
      await ctx.server.app.deps.jobOutbox.flush();
      const [row] = await ctx.server.app.deps.db.select().from(rooms).where(eq(rooms.id, room.room_id));
      if (extended.status === 200) {
        expect(row?.expiresAt.toISOString().replace("Z", "+00:00")).toBe(extended.body.data.expires_at);
        expect((await ctx.api.get(roomPath(room), { token: owner.token })).status).toBe(200);
      } else {
        expect([403, 404]).toContain(extended.status);
        await until(async () =>
          (await ctx.server.app.deps.db.select().from(rooms).where(eq(rooms.id, room.room_id))).length === 0
            ? true
            : undefined,
        );
      }
    }
  });
});
