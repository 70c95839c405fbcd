import { sql } from "drizzle-orm";
import { bigint, index, jsonb, pgSequence, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { timestamptz } from "./columns.ts";

/**
 * Positions in the live event log. The relay (server/events/relay.ts) takes them from this
 * sequence for committed events only, one batch at a time, so positions increase in the order
 * events became visible: a client that resumes after position P can never miss an event that
 * committed late, which ids taken at insert time could not promise.
 */
export const streamPositions = pgSequence("stream_positions", { startWith: 1 });

/**
 * Live events, kept for a retention window so a reconnecting subscriber can resume from the
 * last position it saw. Each is written in the transaction of the change it reports; the relay
 * gives it a position once committed and hands it to the event bus.
 */
export const streamEvents = pgTable(
  "stream_events",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    stream: text("stream").notNull(),
    /** `{type, scope, data, audience?}` (server/events/catalog.ts). */
    payload: jsonb("payload").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    /** Null until the relay has positioned (and published) the committed event. */
    position: bigint("position", { mode: "number" }),
    /** When the relay positioned and published it. */
    publishedAt: timestamptz("published_at"),
  },
  (table) => [
    // By position, only once it has one: an event's insert (inside the post) writes neither.
    uniqueIndex("stream_events_position_idx")
      .on(table.position)
      .where(sql`${table.position} is not null`),
    index("stream_events_stream_position_idx")
      .on(table.stream, table.position)
      .where(sql`${table.position} is not null`),
    index("stream_events_unpositioned_idx")
      .on(table.id)
      .where(sql`${table.position} is null`),
  ],
);

export type StreamEventRow = typeof streamEvents.$inferSelect;

/**
 * How far each consumer of the event log (server/consumers/) has read it: events positioned
 * after `position` are not yet done by that consumer. A consumer moves its row in the statement
 * that writes its work, and only from the position it read (a compare-and-set), so a crash
 * anywhere loses nothing and doubles nothing. Pruning keeps every event some consumer still needs.
 */
export const consumerCursors = pgTable("consumer_cursors", {
  name: text("name").primaryKey(),
  position: bigint("position", { mode: "number" }).notNull(),
  updatedAt: timestamptz("updated_at").notNull().defaultNow(),
});
