// Durable live events. Each event is written to stream_events in the transaction of the change
// it reports (`recordEvents`, or `writeWithEvents` around a whole change); after commit the
// relay (relay.ts) gives it a position and publishes it on the event bus under its stream's
// topic. A subscriber (live-subscription.ts) resumes from a position by replaying the table.
import { and, asc, gt, inArray, sql, type SQL } from "drizzle-orm";
import type { Database, Executor, Transaction } from "../../db/client.ts";
import { runPrepared } from "../../db/prepared.ts";
import { streamEvents, type Language, type StreamEventRow } from "../../db/schema/index.ts";
import { isoTimestamp, type Clock } from "../clock.ts";
import {
  checkedEventData,
  type Audience,
  type EventData,
  type EventEntry,
  type EventScope,
  type InternalEventEntry,
  type LiveEvent,
} from "./catalog.ts";

export type { Audience, EventEntry, EventScope, LiveEvent } from "./catalog.ts";

/** What subscribers receive (the typed union of server/events/catalog.ts). */
export type StreamEvent = LiveEvent;

/** What travels on the bus: the event, and who beyond its stream's followers may not see it. */
export type BusEvent = {
  event: StreamEvent;
  audience?: Audience;
  sourceLanguage?: Language | null;
  /** translation.ready only: the message's other languages announced with it (EventPayload). */
  otherTranslations?: TranslationReady[];
};

/** The data of a translation.ready event: one language of one message. */
export type TranslationReady = EventData<"translation.ready">;

/** Events are replayable for this long (the contract asks for at least 10 minutes). */
export const EVENT_RETENTION_MS = 60 * 60 * 1000;
/** A resume that would replay more than this many events is refused: the client resyncs. */
export const REPLAY_LIMIT = 1000;

export const streams = {
  user: (userId: number) => `user:${userId}`,
  workspace: (workspaceId: string) => `workspace:${workspaceId}`,
  channel: (channelId: string) => `channel:${channelId}`,
  conversation: (conversationId: string) => `conversation:${conversationId}`,
  room: (roomId: string) => `room:${roomId}`,
  /** Internal: credential revocations, for every server process. */
  sessions: "sessions",
  /** Internal: changes the consumers of the log keep in memory (devices, outbound webhooks); nobody subscribes. */
  consumers: "consumers",
  /** Internal: presence changes (live connections, settings) for every server process (docs/presence.md); never stored. */
  presence: "presence",
};

/** What stream_events.payload holds. */
export type EventPayload = {
  type: string;
  scope: EventScope;
  data: Record<string, unknown>;
  audience?: Audience;
  source_language?: Language | null;
  /** read.updated only, for the push consumer: whose read it was, and whether it lowered their badge (docs/push.md). */
  reader_id?: number;
  lowers_badge?: boolean;
  /** message.deleted only, for the file purge: the delete queued files for deletion from storage. */
  deletes_files?: boolean;
  /**
   * translation.ready only: the same message's translations into other languages, stored in the
   * same statement as `data`'s. One event announces them all; each subscriber is shown the one in
   * its language (translation/readers.ts).
   */
  other_translations?: TranslationReady[];
};

/** The stored payload of an entry, its data checked against the event type's schema. */
export function eventPayload(entry: EventEntry | InternalEventEntry): EventPayload {
  const scope = "scope" in entry ? (entry.scope ?? {}) : {};
  const payload: EventPayload = { type: entry.type, scope, data: checkedEventData(entry.type, entry.data) };
  if ("audience" in entry && entry.audience) payload.audience = entry.audience;
  if ("sourceLanguage" in entry && entry.sourceLanguage !== undefined) payload.source_language = entry.sourceLanguage;
  return payload;
}

/**
 * Writes events inside the caller's transaction (writeWithEvents's last statement; the relay
 * also finds events that nobody woke it for, on its 15-second look).
 */
export async function recordEvents(
  tx: Executor,
  now: Date,
  entries: (EventEntry | InternalEventEntry)[],
): Promise<void> {
  if (entries.length === 0) return;
  await tx
    .insert(streamEvents)
    .values(entries.map((entry) => ({ stream: entry.stream, payload: eventPayload(entry), createdAt: now })));
}

/**
 * The event CTE of a change written as one statement (a post, an edit, a reaction): `rows`
 * selects (stream, payload, created_at). The statement's final select must include
 * EVENTS_WRITTEN, so that `commitWithEvents` learns from the statement itself whether it wrote
 * events. Together they are the one-statement twin of writeWithEvents: no caller wakes the relay.
 */
export function eventCte(rows: SQL): SQL {
  return sql`event as (insert into ${streamEvents} (stream, payload, created_at) ${rows} returning 1)`;
}

/** The column of the final select of a statement with `eventCte`: how many events it wrote. */
export const EVENTS_WRITTEN = sql`(select count(*) from event)::integer as events_written`;

/**
 * Runs a change written as one statement with `eventCte` (committed on its own) and, when the
 * commit wrote events, wakes the relay to publish them.
 */
export async function commitWithEvents<Row extends { events_written: number }>(
  deps: { relay: { wake(): void } },
  statement: () => Promise<Row | undefined>,
): Promise<Row | undefined> {
  const row = await statement();
  if (row && row.events_written > 0) deps.relay.wake();
  return row;
}

/** The PostgreSQL channel on which writers without a relay (the CLI) wake the publisher. */
export const RELAY_NOTIFY_CHANNEL = "chat_stream_events";

/** What writing events needs; without a relay (the CLI) the running server's relay is woken by NOTIFY. */
export type EventWriteDeps = {
  db: Database;
  clock: Clock;
  relay?: { wake(): void };
  /** This process's sign-ins served from memory: forgotten at the commit of a change to their user. */
  credentials?: { forgetSignIns(userIds: readonly number[]): void };
};

/** What a change calls to report its events (collected, written at the end of its transaction). */
export type EmitEvents = (...entries: (EventEntry | InternalEventEntry)[]) => void;

/** The users a change's events say have changed or lost credentials (the sessions stream). */
function usersChangedBy(entries: readonly (EventEntry | InternalEventEntry)[]): number[] {
  const userIds: number[] = [];
  for (const entry of entries)
    if (entry.stream === streams.sessions) userIds.push((entry.data as { user_id: number }).user_id);
  return userIds;
}

/**
 * Runs a change in one transaction with the events it reports: `emit` collects them, and they
 * are written as the transaction's last statement, so a change and its events commit together
 * or not at all. After the commit the relay is woken to publish them.
 */
export async function writeWithEvents<T>(
  deps: EventWriteDeps,
  change: (tx: Transaction, emit: EmitEvents) => Promise<T>,
): Promise<T> {
  const entries: (EventEntry | InternalEventEntry)[] = [];
  const result = await deps.db.transaction(async (tx) => {
    const value = await change(tx, (...more) => entries.push(...more));
    await recordEvents(tx, deps.clock.now(), entries);
    // A writer without a relay of its own (the CLI) wakes the server's through PostgreSQL, at commit.
    if (entries.length > 0 && !deps.relay) await tx.execute(sql`select pg_notify(${RELAY_NOTIFY_CHANNEL}, '')`);
    return value;
  });
  if (entries.length === 0) return result;
  // Other processes forget when the relay publishes the events; this one at once, so that the
  // writer's next request reads its own change.
  const changedUsers = usersChangedBy(entries);
  if (changedUsers.length > 0) deps.credentials?.forgetSignIns(changedUsers);
  deps.relay?.wake();
  return result;
}

/** The event subscribers receive, at its position. */
function toStreamEvent(position: string, createdAt: Date, payload: EventPayload): StreamEvent {
  return {
    id: position,
    type: payload.type,
    ...payload.scope,
    created_at: isoTimestamp(createdAt),
    data: payload.data,
  } as StreamEvent;
}

export function toBusEvent(row: Pick<StreamEventRow, "position" | "createdAt" | "payload">): BusEvent {
  const payload = row.payload as EventPayload;
  const event = toStreamEvent(String(row.position), row.createdAt, payload);
  const bus: BusEvent = { event };
  if (payload.audience) bus.audience = payload.audience;
  if (payload.source_language !== undefined) bus.sourceLanguage = payload.source_language;
  if (payload.other_translations) bus.otherTranslations = payload.other_translations;
  return bus;
}

/** A position as the client sent it: digits only (anything else is refused by the procedure's input). */
export const POSITION_PATTERN = /^\d{1,18}$/;

/**
 * The positioned events of `topics` after `after`, oldest first: at most `limit`, and one
 * more when there are more (so the caller can tell "exactly the limit" from "too many").
 */
export async function replay(db: Database, topics: string[], after: number, limit: number): Promise<BusEvent[]> {
  if (topics.length === 0) return [];
  const rows = await db
    .select({ position: streamEvents.position, createdAt: streamEvents.createdAt, payload: streamEvents.payload })
    .from(streamEvents)
    .where(and(inArray(streamEvents.stream, topics), gt(streamEvents.position, after)))
    .orderBy(asc(streamEvents.position))
    .limit(limit + 1);
  return rows.map(toBusEvent);
}

/**
 * The range a client may resume within: `newest` is the last position published (0 when none),
 * `oldestKept` the first still stored. Pruning keeps the newest event, so a position below
 * `oldestKept - 1` means events after it may have been pruned.
 */
export async function positionBounds(db: Database): Promise<{ newest: number; oldestKept: number }> {
  const [row] = await runPrepared<{ oldest: string | null; newest: string | null }>(
    db,
    "select min(position)::text as oldest, max(position)::text as newest from stream_events",
    [],
  );
  const newest = row?.newest ? Number(row.newest) : 0;
  return { newest, oldestKept: row?.oldest ? Number(row.oldest) : newest + 1 };
}
