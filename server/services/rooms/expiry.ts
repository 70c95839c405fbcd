// Rooms close by themselves (docs/rooms.md). Each room has, in the room-expiry queue, a job at
// its expires_at (`room-expire-<id>-<expires_at ms>`) and one 10 minutes before
// (`room-expiring-<id>-<expires_at ms>`), written in the transaction that created or extended
// it: an extension adds a new pair, and the old pair, finding another expires_at, does nothing.
// Closing deletes the room, and with it its members, messages and attachments (their files go by
// the attachments' trigger, docs/operations.md), and sends `room.expired` on its stream, which
// ends its subscriptions. A sweeper every minute closes rooms whose job was lost (the process
// was down at the time, or Redis lost it).
import { asc, eq, lte } from "drizzle-orm";
import { z } from "zod";
import type { Executor } from "../../../db/client.ts";
import { rooms, type Room } from "../../../db/schema/index.ts";
import { isoTimestamp } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import { streams, writeWithEvents, type EventEntry } from "../../events/streams.ts";
import { defineJob } from "../../jobs/definition.ts";
import { enqueueJob } from "../../jobs/outbox.ts";

/** How long before its expiry a room's subscribers are warned. */
export const EXPIRING_NOTICE_MS = 10 * 60_000;
export const SWEEP_ROOMS_EVERY_MS = 60_000;
/** Rooms closed per sweep at most (the next sweep takes the rest). */
const SWEEP_BATCH = 100;

const roomAt = z.object({ roomId: z.string().min(1), expiresAt: z.number().int() });

export const roomJobs = {
  expire: defineJob({ queue: "room-expiry", name: "rooms.expire", payload: roomAt, attempts: 5, backoffMs: 1_000 }),
  expiring: defineJob({ queue: "room-expiry", name: "rooms.expiring", payload: roomAt, attempts: 3, backoffMs: 1_000 }),
  sweep: defineJob({ queue: "room-expiry", name: "rooms.sweep", payload: z.object({}), attempts: 1, backoffMs: 1_000 }),
};

/** In the transaction that set the room's expires_at: its closing job and its warning, due then. */
export async function scheduleExpiry(tx: Executor, now: Date, room: Pick<Room, "id" | "expiresAt">): Promise<void> {
  const payload = { roomId: room.id, expiresAt: room.expiresAt.getTime() };
  const untilExpiry = room.expiresAt.getTime() - now.getTime();
  await enqueueJob(tx, now, roomJobs.expiring, payload, {
    jobId: `room-expiring-${room.id}-${payload.expiresAt}`,
    delayMs: Math.max(0, untilExpiry - EXPIRING_NOTICE_MS),
  });
  await enqueueJob(tx, now, roomJobs.expire, payload, {
    jobId: `room-expire-${room.id}-${payload.expiresAt}`,
    delayMs: Math.max(0, untilExpiry),
  });
}

const roomEvent = (roomId: string, entry: Pick<EventEntry, "type" | "data">): EventEntry =>
  ({ stream: streams.room(roomId), scope: { room_id: roomId }, ...entry }) as EventEntry;

/**
 * Closes the room if it has expired (and, with `expiresAt`, only if that is still its expiry: a
 * job of an expiry an extension moved does nothing). Resolves with whether it closed it.
 */
export async function closeRoom(deps: Deps, roomId: string, expiresAt?: number): Promise<boolean> {
  return writeWithEvents(deps, async (tx, emit) => {
    const [room] = await tx.select().from(rooms).where(eq(rooms.id, roomId)).for("update");
    if (!room || room.expiresAt > deps.clock.now()) return false;
    if (expiresAt !== undefined && room.expiresAt.getTime() !== expiresAt) return false;
    await tx.delete(rooms).where(eq(rooms.id, roomId));
    emit(roomEvent(roomId, { type: "room.expired", data: { room_id: roomId } }));
    return true;
  });
}

/** The warning, 10 minutes ahead: sent when that expiry still holds. */
export async function warnExpiring(deps: Deps, roomId: string, expiresAt: number): Promise<void> {
  await writeWithEvents(deps, async (tx, emit) => {
    const [room] = await tx.select({ expiresAt: rooms.expiresAt }).from(rooms).where(eq(rooms.id, roomId)).limit(1);
    if (!room || room.expiresAt.getTime() !== expiresAt || room.expiresAt <= deps.clock.now()) return;
    emit(
      roomEvent(roomId, { type: "room.expiring", data: { room_id: roomId, expires_at: isoTimestamp(room.expiresAt) } }),
    );
  });
}

/** Closes the expired rooms still there (their job was lost); resolves with how many. */
export async function sweepExpiredRooms(deps: Deps): Promise<number> {
  const due = await deps.db
    .select({ id: rooms.id })
    .from(rooms)
    .where(lte(rooms.expiresAt, deps.clock.now()))
    .orderBy(asc(rooms.expiresAt))
    .limit(SWEEP_BATCH);
  let closed = 0;
  for (const { id } of due) if (await closeRoom(deps, id)) closed++;
  if (closed > 0) deps.logger.info({ closed }, "rooms: the sweeper closed expired rooms");
  return closed;
}
