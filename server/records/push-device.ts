import { z } from "zod";
import type { PushDevice } from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { PUSH_PLATFORMS, PUSH_PROVIDERS } from "../services/push/provider.ts";
import { timestamp } from "./common.ts";

/** The API document's push device; the push token is accepted on registration and never returned. */
export const pushDeviceRecord = z
  .object({
    id: z.string(),
    platform: z.enum(PUSH_PLATFORMS),
    provider: z.enum(PUSH_PROVIDERS),
    device_name: z.string().nullable(),
    device_id: z.string().nullable(),
    app_version: z.string().nullable(),
    last_used_at: timestamp,
    created_at: timestamp,
  })
  .meta({ id: "PushDevice" });

export function toPushDeviceRecord(device: PushDevice): z.infer<typeof pushDeviceRecord> {
  return {
    id: device.id,
    platform: device.platform,
    provider: device.provider,
    device_name: device.deviceName,
    device_id: device.deviceId,
    app_version: device.appVersion,
    last_used_at: isoTimestamp(device.lastUsedAt),
    created_at: isoTimestamp(device.createdAt),
  };
}
