// The room record (contract, "Records") and the extension result (the API document).
import { z } from "zod";
import type { Room } from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { timestamp } from "./common.ts";

export const roomRecord = z
  .object({
    room_id: z.string().describe("opaque and unguessable: it is what the owner shares for others to join"),
    name: z.string(),
    owner_id: z.number().int(),
    expires_at: timestamp,
    max_expires_at: timestamp.describe("created_at + 7 days: no extension goes past it"),
    extension_count: z.number().int(),
    created_at: timestamp,
  })
  .meta({ id: "Room" });
export type RoomRecord = z.infer<typeof roomRecord>;

export function toRoomRecord(room: Room): RoomRecord {
  return {
    room_id: room.id,
    name: room.name,
    owner_id: room.ownerId,
    expires_at: isoTimestamp(room.expiresAt),
    max_expires_at: isoTimestamp(room.maxExpiresAt),
    extension_count: room.extensionCount,
    created_at: isoTimestamp(room.createdAt),
  };
}

export const roomExtensionRecord = roomRecord
  .pick({
    room_id: true,
    expires_at: true,
    max_expires_at: true,
    extension_count: true,
  })
  .meta({ id: "RoomExtension" });
