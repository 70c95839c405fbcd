// Subscriptions yield tRPC tracked events (server/events/streams.ts LiveSubscription) so that a
// reconnecting client sends the id of the last event it saw (lastEventId) and receives what
// it missed.
import { z } from "zod";

/** Every subscription takes the last event id the client saw (tRPC fills it in on reconnect). */
export const resumable = z.object({ lastEventId: z.string().nullish() });
