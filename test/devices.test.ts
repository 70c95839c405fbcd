// Push devices (API document, "Devices"): POST /api/v1/devices and DELETE /api/v1/devices/{id},
// through REST and the typed client. The push token is the device's identity, never returned,
// and kept sealed in the database.
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { createChatClient, type ChatClient } from "@chat-service/client";
import { pushDevices } from "../db/schema/index.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();
const clients: ChatClient[] = [];
afterAll(() => clients.forEach((client) => client.close()));

const DEVICE_KEYS = [
  "app_version",
  "created_at",
  "device_id",
  "device_name",
  "id",
  "last_used_at",
  "platform",
  "provider",
].sort();

const pushToken = (label = "token") => `ExponentPushToken[${label}-${randomBytes(8).toString("hex")}]`;

function register(user: RegisteredUser | undefined, body: Record<string, unknown>) {
  return ctx.api.post("/api/v1/devices", body, user && { token: user.token });
}

async function registered(user: RegisteredUser, body: Record<string, unknown>) {
  const response = await register(user, body);
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body.data;
}

const storedDevice = async (id: string) =>
  (await ctx.server.app.deps.db.select().from(pushDevices).where(eq(pushDevices.id, id)))[0];

describe("POST /api/v1/devices", () => {
  it("answers 201 {data: push device} with the documented fields and never the push token", async () => {
    const user = await registerUser(ctx.api);
    const token = pushToken();
    const response = await register(user, {
      platform: "ios",
      provider: "expo",
      push_token: token,
      device_id: "iphone-15-a1b2",
      device_name: "Ada's iPhone",
      app_version: "2.4.1",
    });
    expect(response.status).toBe(201);
    expect(Object.keys(response.body)).toEqual(["data"]);
    const device = response.body.data;
    expect(Object.keys(device).sort()).toEqual(DEVICE_KEYS);
    expect(device).toMatchObject({
      platform: "ios",
      provider: "expo",
      device_id: "iphone-15-a1b2",
      device_name: "Ada's iPhone",
      app_version: "2.4.1",
    });
    expect(device.id).toMatch(/^dev_[0-9A-Z]{26}$/);
    expect(device.last_used_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/);
    expect(device.created_at).toMatch(/\+00:00$/);
    expect(JSON.stringify(response.body)).not.toContain(token);

    // Stored for its owner, sealed: the row holds neither the token nor a plain hash of it.
    const row = await storedDevice(device.id);
    expect(row?.userId).toBe(user.id);
    expect(JSON.stringify(row)).not.toContain(token.slice(18, 34));
  });

  it("leaves the optional fields null when they are not sent", async () => {
    const user = await registerUser(ctx.api);
    const device = await registered(user, { platform: "web", provider: "fcm", push_token: pushToken() });
    expect(device).toMatchObject({
      platform: "web",
      provider: "fcm",
      device_id: null,
      device_name: null,
      app_version: null,
    });
  });

  it("is idempotent per push token: same id, last_used_at refreshed, omitted fields kept, sent ones replaced", async () => {
    const user = await registerUser(ctx.api);
    const token = pushToken();
    const first = await registered(user, {
      platform: "android",
      provider: "fcm",
      push_token: token,
      device_name: "Pixel",
      app_version: "1.0.0",
    });
    ctx.server.clock.advance(60_000);
    const again = await registered(user, {
      platform: "android",
      provider: "fcm",
      push_token: token,
      app_version: "1.1.0",
    });
    expect(again.id).toBe(first.id);
    expect(again.created_at).toBe(first.created_at);
    expect(Date.parse(again.last_used_at)).toBeGreaterThan(Date.parse(first.last_used_at));
    expect(again).toMatchObject({ device_name: "Pixel", app_version: "1.1.0" });
    const rows = await ctx.server.app.deps.db.select().from(pushDevices).where(eq(pushDevices.userId, user.id));
    expect(rows).toHaveLength(1);
  });

  it("moves a push token sent from another account to the caller", async () => {
    const [previous, next] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const token = pushToken();
    const first = await registered(previous, { platform: "ios", provider: "apns", push_token: token });
    const moved = await registered(next, { platform: "ios", provider: "apns", push_token: token });
    expect(moved.id).toBe(first.id);
    expect((await storedDevice(first.id))?.userId).toBe(next.id);
    // The previous owner no longer has it; the new one does.
    expect((await ctx.api.delete(`/api/v1/devices/${first.id}`, { token: previous.token })).status).toBe(404);
    expect((await ctx.api.delete(`/api/v1/devices/${first.id}`, { token: next.token })).status).toBe(204);
  });

  it("needs a bearer token (401) and the write ability (403 for a read-only token)", async () => {
    const anonymous = await register(undefined, { platform: "ios", provider: "apns", push_token: pushToken() });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toEqual({ message: "Unauthenticated." });

    const user = await registerUser(ctx.api);
    const created = await ctx.api.post(
      "/api/v1/tokens",
      { name: "reader", abilities: ["read"] },
      { token: user.token },
    );
    const readOnly = await ctx.api.post(
      "/api/v1/devices",
      { platform: "ios", provider: "apns", push_token: pushToken() },
      { token: created.body.access_token },
    );
    expect(readOnly.status).toBe(403);
  });

  describe("validation: 422 with the field as key", () => {
    const valid = () => ({ platform: "ios", provider: "expo", push_token: pushToken() });
    const cases: [string, Record<string, unknown>, string][] = [
      ["platform missing", { platform: undefined }, "platform"],
      ["platform not ios, android or web", { platform: "windows" }, "platform"],
      ["provider missing", { provider: undefined }, "provider"],
      ["provider not fcm, expo or apns", { provider: "pushy" }, "provider"],
      ["push_token missing", { push_token: undefined }, "push_token"],
      ["push_token empty", { push_token: "" }, "push_token"],
      ["push_token only spaces", { push_token: "   " }, "push_token"],
      ["push_token over 4096 characters", { push_token: "x".repeat(4097) }, "push_token"],
      ["push_token not a string", { push_token: 12345 }, "push_token"],
      ["device_id over 255 characters", { device_id: "d".repeat(256) }, "device_id"],
      ["device_name over 255 characters", { device_name: "n".repeat(256) }, "device_name"],
      ["app_version over 255 characters", { app_version: "9".repeat(256) }, "app_version"],
    ];
    for (const [label, change, field] of cases) {
      it(`refuses ${label}`, async () => {
        const user = await registerUser(ctx.api);
        const response = await register(user, { ...valid(), ...change });
        expect(response.status).toBe(422);
        expect(response.body.message).toBe("The given data was invalid.");
        expect(Object.keys(response.body.errors)).toEqual([field]);
        expect(await ctx.server.app.deps.db.select().from(pushDevices).where(eq(pushDevices.userId, user.id))).toEqual(
          [],
        );
      });
    }

    it("accepts each limit at its boundary", async () => {
      const user = await registerUser(ctx.api);
      const device = await registered(user, {
        ...valid(),
        push_token: `t${randomBytes(8).toString("hex")}`.padEnd(4096, "x"),
        device_id: "d".repeat(255),
        device_name: "n".repeat(255),
        app_version: "9".repeat(255),
      });
      expect(device.device_name).toHaveLength(255);
    });
  });
});

describe("DELETE /api/v1/devices/{id}", () => {
  it("lets the owner delete (204, empty body); a second delete is 404", async () => {
    const user = await registerUser(ctx.api);
    const device = await registered(user, { platform: "ios", provider: "apns", push_token: pushToken() });
    const deleted = await ctx.api.delete(`/api/v1/devices/${device.id}`, { token: user.token });
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expect(await storedDevice(device.id)).toBeUndefined();
    const again = await ctx.api.delete(`/api/v1/devices/${device.id}`, { token: user.token });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ message: "Device not found." });
  });

  it("answers 404 to anyone else and keeps the device; 404 for an unknown id; 401 without a token", async () => {
    const [owner, other] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const device = await registered(owner, { platform: "android", provider: "fcm", push_token: pushToken() });
    expect((await ctx.api.delete(`/api/v1/devices/${device.id}`, { token: other.token })).status).toBe(404);
    expect(await storedDevice(device.id)).toBeDefined();
    expect(
      (await ctx.api.delete("/api/v1/devices/dev_00000000000000000000000000", { token: owner.token })).status,
    ).toBe(404);
    expect((await ctx.api.delete(`/api/v1/devices/${device.id}`)).status).toBe(401);
  });
});

describe("typed client", () => {
  it("registers (same id again) and deletes a device; a second delete is NOT_FOUND", async () => {
    const user = await registerUser(ctx.api);
    const client = createChatClient({ url: ctx.server.url, token: user.token });
    clients.push(client);
    const token = pushToken("rpc");
    const { data } = await client.devices.register.mutate({ platform: "android", provider: "expo", push_token: token });
    expect(Object.keys(data).sort()).toEqual(DEVICE_KEYS);
    expect(
      (await client.devices.register.mutate({ platform: "android", provider: "expo", push_token: token })).data.id,
    ).toBe(data.id);
    await client.devices.delete.mutate({ id: data.id });
    const error = await rejectionOf(client.devices.delete.mutate({ id: data.id }));
    expect(error.data?.code).toBe("NOT_FOUND");
    const invalid = await rejectionOf(
      client.devices.register.mutate({ platform: "pager" as "ios", provider: "expo", push_token: token }),
    );
    expect(invalid.data?.httpStatus).toBe(422);
  });
});
