// Subscriptions yield tRPC tracked events so that a reconnecting client sends the id of the
// last event it saw (lastEventId) and receives what it missed.
import { tracked } from "@trpc/server";
import { z } from "zod";
import type { StreamEvent } from "../server/events/streams.ts";

/** Every subscription takes the last event id the client saw (tRPC fills it in on reconnect). */
export const resumable = z.object({ lastEventId: z.string().nullish() });

export async function* trackedEvents(source: AsyncIterable<StreamEvent>) {
  // Ephemeral events (typing) have no id of their own: they carry the last durable one, so a
  // reconnect resumes from the right place.
  let lastId = "0";
  for await (const event of source) {
    if (event.id) lastId = event.id;
    yield tracked(lastId, event);
  }
}
