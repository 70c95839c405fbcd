// Registering and removing the devices that get push notifications (API document, "Devices").
// The push token is the device: registering a token again, from any account, updates that one
// row (same id, last_used_at refreshed) and makes the caller its owner, so a phone that changes
// hands, or an app that registers on every launch, never gets a notification twice.
import { and, eq, sql } from "drizzle-orm";
import { pushDevices, type PushDevice } from "../../../db/schema/index.ts";
import { hmacSha256Hex, seal } from "../../crypto.ts";
import { streams, writeWithEvents } from "../../events/streams.ts";
import type { Deps } from "../../deps.ts";
import { newId } from "../../ids.ts";
import type { PushPlatform, PushProviderName } from "./provider.ts";

export type RegisterDeviceInput = {
  platform: PushPlatform;
  provider: PushProviderName;
  pushToken: string;
  deviceId?: string | undefined;
  deviceName?: string | undefined;
  appVersion?: string | undefined;
};

/** The keyed hash a token is found by (the sealed token itself differs on every write). */
export function pushTokenHash(appKey: string, pushToken: string): string {
  return hmacSha256Hex(appKey, `push-token:${pushToken}`);
}

/**
 * Adds the device, or updates the one with this token and moves it to the caller. Optional
 * fields left out keep their stored value (an app may send only the token on each launch).
 */
export async function registerDevice(deps: Deps, userId: number, input: RegisterDeviceInput): Promise<PushDevice> {
  const now = deps.clock.now();
  const tokenHash = pushTokenHash(deps.config.appKey, input.pushToken);
  // The event tells the push consumer that someone may now be woken (it skips every message
  // without a query while nobody has a device).
  const [device] = await writeWithEvents(deps, async (tx, emit) => {
    emit({ stream: streams.consumers, type: "push.device_registered", data: { user_id: userId } });
    return tx
      .insert(pushDevices)
      .values({
        id: newId("device", now.getTime()),
        userId,
        platform: input.platform,
        provider: input.provider,
        tokenHash,
        tokenSealed: seal(deps.config.appKey, input.pushToken),
        deviceId: input.deviceId ?? null,
        deviceName: input.deviceName ?? null,
        appVersion: input.appVersion ?? null,
        lastUsedAt: now,
        createdAt: now,
      })
      .onConflictDoUpdate({
        target: pushDevices.tokenHash,
        set: {
          userId,
          platform: input.platform,
          provider: input.provider,
          deviceId: sql`coalesce(excluded.device_id, ${pushDevices.deviceId})`,
          deviceName: sql`coalesce(excluded.device_name, ${pushDevices.deviceName})`,
          appVersion: sql`coalesce(excluded.app_version, ${pushDevices.appVersion})`,
          lastUsedAt: now,
        },
      })
      .returning();
  });
  return device!;
}

/** Removes the caller's device; false when it is not theirs (or gone), which the caller answers with 404. */
export async function deleteDevice(deps: Deps, userId: number, deviceId: string): Promise<boolean> {
  const deleted = await deps.db
    .delete(pushDevices)
    .where(and(eq(pushDevices.id, deviceId), eq(pushDevices.userId, userId)))
    .returning({ id: pushDevices.id });
  return deleted.length > 0;
}
