// Subscriptions yield tRPC tracked events (server/events/live-subscription.ts) so that a
// reconnecting client sends the position of the last event it saw (lastEventId) and receives
// what it missed.
import { z } from "zod";
import { POSITION_PATTERN } from "../server/events/streams.ts";

/** Every subscription takes the last event position the client saw (tRPC fills it in on reconnect). */
export const resumable = z.object({
  lastEventId: z.string().regex(POSITION_PATTERN, "The last event id must be an event position.").nullish(),
});
