// Registering and removing the devices that get push notifications (API document, "Devices").
// The push token is the device: registering a token again, from any account, updates that one
// row (same id, last_used_at refreshed) and makes the caller its owner, so a phone that changes
// hands, or an app that registers on every launch, never gets a notification twice.
import { and, eq, inArray, notExists, sql } from "drizzle-orm";
import { pushDevices, type PushDevice } from "../../../db/schema/index.ts";
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

/**
 * The keyed hashes a token is found by (the sealed token itself differs on every write): the
 * one written now first, then those an earlier APP_KEY wrote.
 */
export function pushTokenHashes(keys: Deps["keys"], pushToken: string): string[] {
  return keys.macs("push-token-lookup", `push-token:${pushToken}`);
}

/**
 * Adds the device, or updates the one with this token and moves it to the caller. Optional
 * fields left out keep their stored value (an app may send only the token on each launch).
 */
export async function registerDevice(deps: Deps, userId: number, input: RegisterDeviceInput): Promise<PushDevice> {
  const now = deps.clock.now();
  const [tokenHash, ...earlierHashes] = pushTokenHashes(deps.keys, input.pushToken);
  const tokenSealed = deps.keys.seal("push-token", input.pushToken);
  // The event tells the push consumer that someone may now be woken (it skips every message
  // without a query while nobody has a device).
  const [device] = await writeWithEvents(deps, async (tx, emit) => {
    emit({ stream: streams.consumers, type: "push.device_registered", data: { user_id: userId } });
    // Registered under an earlier APP_KEY: the same row moves to the current key's hash.
    await tx
      .update(pushDevices)
      .set({ tokenHash, tokenSealed })
      .where(
        and(
          inArray(pushDevices.tokenHash, earlierHashes),
          notExists(tx.select({ id: pushDevices.id }).from(pushDevices).where(eq(pushDevices.tokenHash, tokenHash!))),
        ),
      );
    return tx
      .insert(pushDevices)
      .values({
        id: newId("device", now.getTime()),
        userId,
        platform: input.platform,
        provider: input.provider,
        tokenHash: tokenHash!,
        tokenSealed,
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
