// Subscriptions yield tRPC tracked events so that a reconnecting client sends the id of the
// last event it saw (lastEventId) and receives what it missed.
import { tracked } from "@trpc/server";
import { z } from "zod";
import type { StreamEvent } from "../server/events/streams.ts";

/** Every subscription takes the last event id the client saw (tRPC fills it in on reconnect). */
export const resumable = z.object({ lastEventId: z.string().nullish() });

/** Each event tracked by the position to resume from (an ephemeral event has none of its own). */
export async function* trackedEvents(source: AsyncIterable<[position: string, event: StreamEvent]>) {
  for await (const [position, event] of source) yield tracked(position, event);
}
