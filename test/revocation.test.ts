// Revocation reaches open connections (server/services/accounts/credential-watch.ts): when a
// token stops signing its user in (logout, deleted, password changed or reset, user
// deactivated), the live subscriptions opened with it end with UNAUTHORIZED and its WebSocket
// is closed (4401) within a second, on every server process; and every request over an open
// socket is authorized with the token's current state, as REST is.
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { accessTokens, passwordResetTokens } from "../db/schema/index.ts";
import { sha256Hex } from "../server/crypto.ts";
import { CLOSE_CODES } from "../server/http/trpc-ws-protocol.ts";
import { runAdminCommand } from "../server/services/accounts/admin-commands.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { DEFAULT_PASSWORD, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { collect, world } from "./helpers/live.ts";
import { RawSocket } from "./helpers/raw-socket.ts";
import { useTestServer, useTwoServers } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

const sockets: RawSocket[] = [];
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.terminate();
});

/** Another sign-in of the user: a second token, as a second device would hold. */
async function signIn(api: RestClient, user: RegisteredUser, device = "phone"): Promise<string> {
  const response = await api.post("/api/v1/auth/app/login", {
    email: user.email,
    password: user.password,
    device_name: device,
  });
  expect(response.status).toBe(200);
  return response.body.access_token;
}

/** A socket signed in with `token`, its user's stream subscribed (id 1) and started. */
async function subscribedSocket(baseUrl: string, token: string): Promise<RawSocket> {
  const socket = await RawSocket.signedIn(baseUrl, token);
  sockets.push(socket);
  socket.request(1, "subscription", "events.onUser");
  await socket.next((frame) => frame.id === 1 && frame.result?.type === "started");
  return socket;
}

/** Waits for the revocation to reach the socket: UNAUTHORIZED for its subscription, then close 4401. */
async function expectRevoked(socket: RawSocket, since: number): Promise<number> {
  const error = await socket.next((frame) => frame.id === 1 && "error" in frame, 0, 5_000);
  expect(error.error).toMatchObject({ data: { code: "UNAUTHORIZED", httpStatus: 401 } });
  expect(await socket.closed()).toBe(CLOSE_CODES.revoked);
  return Date.now() - since;
}

/** The socket is still open and serving: a query comes back with the user. */
async function expectServing(socket: RawSocket, userId: number, id: number): Promise<void> {
  socket.request(id, "query", "me.get");
  const answer = await socket.next((frame) => frame.id === id);
  expect(answer.result?.data?.id).toBe(userId);
  expect(socket.closeCode).toBeUndefined();
}

describe("a revoked credential on an open WebSocket", () => {
  it("logout: the subscription ends with UNAUTHORIZED and the socket closes (4401) within a second", async () => {
    const user = await registerUser(ctx.api);
    const phone = await signIn(ctx.api, user);
    const socket = await subscribedSocket(ctx.server.url, phone);
    const other = await subscribedSocket(ctx.server.url, user.token);

    const since = Date.now();
    expect((await ctx.api.post("/api/v1/auth/app/logout", undefined, { token: phone })).status).toBe(200);
    expect(await expectRevoked(socket, since)).toBeLessThan(1_000);
    expect((await ctx.api.get("/api/v1/me", { token: phone })).status).toBe(401);
    // The user's other device is not affected.
    await expectServing(other, user.id, 2);
  });

  it("a deleted personal access token closes the sockets opened with it", async () => {
    const user = await registerUser(ctx.api);
    const created = await ctx.api.post("/api/v1/tokens", { name: "bot", abilities: ["*"] }, { token: user.token });
    expect(created.status).toBe(201);
    const socket = await subscribedSocket(ctx.server.url, created.body.access_token);
    const since = Date.now();
    const deleted = await ctx.api.delete(`/api/v1/tokens/${created.body.data.id}`, { token: user.token });
    expect(deleted.status).toBe(204);
    expect(await expectRevoked(socket, since)).toBeLessThan(1_000);
  });

  it("a password change closes the user's other sessions, not the one that changed it", async () => {
    const user = await registerUser(ctx.api);
    const phone = await signIn(ctx.api, user);
    const elsewhere = await subscribedSocket(ctx.server.url, phone);
    const here = await subscribedSocket(ctx.server.url, user.token);
    const since = Date.now();
    const changed = await ctx.api.post(
      "/api/v1/auth/app/change-password",
      { current_password: DEFAULT_PASSWORD, password: "a-new-password", password_confirmation: "a-new-password" },
      { token: user.token },
    );
    expect(changed.status).toBe(200);
    expect(await expectRevoked(elsewhere, since)).toBeLessThan(1_000);
    await expectServing(here, user.id, 2);
  });

  it("a password reset closes every socket of the user", async () => {
    const user = await registerUser(ctx.api);
    const socket = await subscribedSocket(ctx.server.url, user.token);
    const resetToken = randomBytes(32).toString("hex");
    await ctx.server.app.deps.db.insert(passwordResetTokens).values({
      email: user.email,
      id: `prt_${randomBytes(6).toString("hex")}`,
      tokenHash: sha256Hex(resetToken),
      expiresAt: new Date(ctx.server.clock.now().getTime() + 60_000),
    });
    const since = Date.now();
    const reset = await ctx.api.post("/api/v1/auth/app/reset-password", {
      token: resetToken,
      email: user.email,
      password: "reset-password-1",
      password_confirmation: "reset-password-1",
    });
    expect(reset.status).toBe(200);
    expect(await expectRevoked(socket, since)).toBeLessThan(1_000);
  });

  it("user:deactivate run by the CLI itself (no relay in its process) closes every socket of the user within a second", async () => {
    const [user, bystander] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const socket = await subscribedSocket(ctx.server.url, user.token);
    const unaffected = await subscribedSocket(ctx.server.url, bystander.token);
    const since = Date.now();
    // As `npm run cli` does with PostgreSQL: its own database handle, no event bus, no relay.
    const { db, clock, keys, logger } = ctx.server.app.deps;
    await runAdminCommand({ db, clock, keys, logger }, ["user:deactivate", user.email]);
    expect(await expectRevoked(socket, since)).toBeLessThan(1_000);
    await expectServing(unaffected, bystander.id, 2);
  });

  it("ends an SSE subscription opened with the token, and the typed client's WebSocket one, with UNAUTHORIZED", async () => {
    const user = await registerUser(ctx.api);
    const phone = await signIn(ctx.api, user);
    const overSse = collect((handlers) => live.chat(phone, { sse: true }).events.onUser.subscribe(undefined, handlers));
    const overWs = collect((handlers) => live.chat(phone).events.onUser.subscribe(undefined, handlers));
    await until(() => (overSse.isStarted() && overWs.isStarted() ? true : undefined), "both subscriptions to start");
    // SSE starts iterating a moment after "started": wait until its stream is attached.
    await until(async () => {
      await ctx.api.patch("/api/v1/me", { name: `Renamed ${Date.now()}` }, { token: user.token });
      return overSse.received.length > 0 && overWs.received.length > 0 ? true : undefined;
    }, "both streams to deliver");

    expect((await ctx.api.post("/api/v1/auth/app/logout", undefined, { token: phone })).status).toBe(200);
    for (const feed of [overSse, overWs]) {
      const error = (await until(() => feed.errors[0], "the subscription's error")) as { data?: { code?: string } };
      expect(error.data?.code).toBe("UNAUTHORIZED");
    }
  });
});

describe("every request over an open socket is authorized with the token's current state", () => {
  it("refuses a mutation and a new subscription once the token is gone, even before any notice reaches the socket", async () => {
    const { owner, member, workspace, general } = await live.team();
    const phone = await signIn(ctx.api, member);
    const socket = await RawSocket.signedIn(ctx.server.url, phone);
    sockets.push(socket);
    await expectServing(socket, member.id, 1);

    // The token disappears without a revocation notice (as if the notice were lost).
    const deleted = await ctx.server.app.deps.db
      .delete(accessTokens)
      .where(eq(accessTokens.tokenHash, sha256Hex(phone)))
      .returning();
    expect(deleted).toHaveLength(1);

    socket.request(2, "mutation", "messages.post", {
      input: { workspace_id: workspace.id, channel_id: general.id, content: "after revocation" },
    });
    socket.request(3, "subscription", "events.onUser");
    for (const id of [2, 3]) {
      const refused = await socket.next((frame) => frame.id === id);
      expect(refused.error).toMatchObject({ data: { code: "UNAUTHORIZED", httpStatus: 401 } });
    }
    const history = await ctx.api.get(`/api/v1/workspaces/${workspace.id}/channels/${general.id}/messages`, {
      token: owner.token,
    });
    expect(history.body.data.map((message: { content: string }) => message.content)).not.toContain("after revocation");
  });
});

describe.runIf(process.env.DATABASE_URL && process.env.REDIS_URL)("two server processes", () => {
  const servers = useTwoServers();

  it("a logout on one server closes the socket held on the other within a second", async () => {
    const { api, second } = servers;
    const user = await registerUser(api);
    const phone = await signIn(api, user);
    const socket = await subscribedSocket(second.url, phone);
    const untouched = await subscribedSocket(second.url, user.token);
    const since = Date.now();
    expect((await api.post("/api/v1/auth/app/logout", undefined, { token: phone })).status).toBe(200);
    expect(await expectRevoked(socket, since)).toBeLessThan(1_000);
    await expectServing(untouched, user.id, 2);
  });

  // Each process serves a request's sign-in from memory for a few seconds: the bus empties it.
  it("a logout on one server: the other refuses the token over HTTP within a second", async () => {
    const { api, second } = servers;
    const other = restClient(second.url);
    const user = await registerUser(api);
    const phone = await signIn(api, user);
    expect((await other.get("/api/v1/me", { token: phone })).status).toBe(200);
    const since = Date.now();
    expect((await api.post("/api/v1/auth/app/logout", undefined, { token: phone })).status).toBe(200);
    await until(
      async () => ((await other.get("/api/v1/me", { token: phone })).status === 401 ? true : undefined),
      "401 on the other server",
      1_000,
    );
    expect(Date.now() - since).toBeLessThan(1_000);
    expect((await other.get("/api/v1/me", { token: user.token })).status).toBe(200);
  });

  it("a rename on one server shows in GET /me on the other within a second", async () => {
    const { api, second } = servers;
    const other = restClient(second.url);
    const user = await registerUser(api, { name: "Before" });
    expect((await other.get("/api/v1/me", { token: user.token })).body.name).toBe("Before");
    const since = Date.now();
    expect((await api.patch("/api/v1/me", { name: "After" }, { token: user.token })).status).toBe(200);
    await until(
      async () => ((await other.get("/api/v1/me", { token: user.token })).body.name === "After" ? true : undefined),
      "the new name on the other server",
      1_000,
    );
    expect(Date.now() - since).toBeLessThan(1_000);
  });
});
