// Room-expiry queue processor: closing rooms at their expiry, the warning 10 minutes before,
// and the sweeper (server/services/rooms/expiry.ts).
import type { Deps } from "../server/deps.ts";
import { jobHandler, type JobHandlers } from "../server/jobs/definition.ts";
import { closeRoom, roomJobs, sweepExpiredRooms, warnExpiring } from "../server/services/rooms/expiry.ts";

export function roomHandlers(deps: Deps): JobHandlers {
  return new Map([
    jobHandler(roomJobs.expire, async ({ roomId, expiresAt }) => {
      await closeRoom(deps, roomId, expiresAt);
    }),
    jobHandler(roomJobs.expiring, async ({ roomId, expiresAt }) => {
      await warnExpiring(deps, roomId, expiresAt);
    }),
    jobHandler(roomJobs.sweep, async () => {
      await sweepExpiredRooms(deps);
    }),
  ]);
}
