// Room-expiry queue processor: closing rooms at their expiry, the warning 10 minutes before,
// and the sweeper (server/services/rooms/expiry.ts).
import type { Deps } from "../server/deps.ts";
import type { JobDefinition, JobHandlers } from "../server/jobs/definition.ts";
import { closeRoom, roomJobs, sweepExpiredRooms, warnExpiring } from "../server/services/rooms/expiry.ts";

export function roomHandlers(deps: Deps): JobHandlers {
  return new Map([
    [
      roomJobs.expire.name,
      {
        definition: roomJobs.expire as JobDefinition<unknown>,
        handle: async (payload: unknown) => {
          const { roomId, expiresAt } = roomJobs.expire.payload.parse(payload);
          await closeRoom(deps, roomId, expiresAt);
        },
      },
    ],
    [
      roomJobs.expiring.name,
      {
        definition: roomJobs.expiring as JobDefinition<unknown>,
        handle: async (payload: unknown) => {
          const { roomId, expiresAt } = roomJobs.expiring.payload.parse(payload);
          await warnExpiring(deps, roomId, expiresAt);
        },
      },
    ],
    [
      roomJobs.sweep.name,
      {
        definition: roomJobs.sweep as JobDefinition<unknown>,
        handle: async () => {
          await sweepExpiredRooms(deps);
        },
      },
    ],
  ]);
}
