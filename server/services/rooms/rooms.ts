// Temporary rooms (docs/rooms.md): any signed-in user creates one for 1 to 24 hours and shares
// its id; whoever has the id and is signed in joins it. Its owner on the personal_pro plan may
// extend it, up to 24 hours at a time, 10 times, never past 7 days from its creation. A room
// whose expires_at has passed is gone for every request at once (404), whatever is left of it.
import { and, eq, gt, sql } from "drizzle-orm";
import { roomMembers, rooms, users } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { AppError, notFound } from "../../errors.ts";
import { newId } from "../../ids.ts";
import { toRoomRecord, type RoomRecord } from "../../records/room.ts";
import { requireRoomMember, ROOM_NOT_FOUND } from "../../policy/places.ts";
import { scheduleExpiry } from "./expiry.ts";

export const DEFAULT_DURATION_HOURS = 24;
/** The single-extension maximum, also the default extension. */
export const MAX_EXTENSION_HOURS = 24;
export const MAX_EXTENSIONS = 10;
export const MAX_LIFETIME_MS = 7 * 24 * 3600_000;

/** The document's 403 body when a room cannot be extended. */
export const extensionNotAllowed = () =>
  new AppError("forbidden", "Temporary Room extension is not allowed.", {
    errors: { code: ["temporary_room_extension_not_allowed"] },
  });

const HOUR_MS = 3600_000;

export async function createRoom(
  deps: Deps,
  userId: number,
  input: { name: string; duration_hours?: number | undefined },
): Promise<RoomRecord> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    const [room] = await tx
      .insert(rooms)
      .values({
        id: newId("room", now.getTime()),
        name: input.name,
        ownerId: userId,
        expiresAt: new Date(now.getTime() + (input.duration_hours ?? DEFAULT_DURATION_HOURS) * HOUR_MS),
        maxExpiresAt: new Date(now.getTime() + MAX_LIFETIME_MS),
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    await tx.insert(roomMembers).values({ roomId: room!.id, userId, joinedAt: now });
    await scheduleExpiry(tx, now, room!);
    return toRoomRecord(room!);
  });
}

/**
 * The access rule of rooms, for every door (records, messages, files, live events): a room that
 * has not expired and whose member the user is; 404 otherwise (not theirs, unknown, or gone).
 */
export async function getRoom(deps: Deps, userId: number, roomId: string): Promise<RoomRecord> {
  return toRoomRecord(await requireRoomMember(deps, userId, roomId));
}

/** Joins a room by its id (joining twice is joining once). */
export async function joinRoom(deps: Deps, userId: number, roomId: string): Promise<RoomRecord> {
  const now = deps.clock.now();
  const [room] = await deps.db
    .select()
    .from(rooms)
    .where(and(eq(rooms.id, roomId), gt(rooms.expiresAt, now)))
    .limit(1);
  if (!room) throw notFound(ROOM_NOT_FOUND);
  await deps.db.insert(roomMembers).values({ roomId, userId, joinedAt: now }).onConflictDoNothing();
  return toRoomRecord(room);
}

/**
 * Extends the caller's room by `hours` (default 24): 404 when the room is not theirs; the
 * document's 403 when their plan is not personal_pro, the room has expired, it already reaches
 * max_expires_at, or it was extended 10 times. The new expiry never passes max_expires_at.
 * Concurrent extensions of one room take turns (the row is locked), so the limits hold.
 */
export async function extendRoom(deps: Deps, userId: number, roomId: string, hours = MAX_EXTENSION_HOURS) {
  return deps.db.transaction(async (tx) => {
    const [found] = await tx
      .select({ room: rooms, plan: users.plan })
      .from(rooms)
      .innerJoin(users, eq(users.id, rooms.ownerId))
      .where(and(eq(rooms.id, roomId), eq(rooms.ownerId, userId)))
      .limit(1)
      .for("update", { of: rooms });
    if (!found) throw notFound(ROOM_NOT_FOUND);
    const { room, plan } = found;
    const now = deps.clock.now();
    const extendable =
      plan === "personal_pro" &&
      room.expiresAt > now &&
      room.expiresAt < room.maxExpiresAt &&
      room.extensionCount < MAX_EXTENSIONS;
    if (!extendable) throw extensionNotAllowed();
    const expiresAt = new Date(Math.min(room.expiresAt.getTime() + hours * HOUR_MS, room.maxExpiresAt.getTime()));
    const [extended] = await tx
      .update(rooms)
      .set({ expiresAt, extensionCount: sql`${rooms.extensionCount} + 1`, updatedAt: now })
      .where(eq(rooms.id, roomId))
      .returning();
    // The closing job and the warning move with it (the old ones find another expiry and do nothing).
    await scheduleExpiry(tx, now, extended!);
    const record = toRoomRecord(extended!);
    return {
      room_id: record.room_id,
      expires_at: record.expires_at,
      max_expires_at: record.max_expires_at,
      extension_count: record.extension_count,
    };
  });
}
