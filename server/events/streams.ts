// Durable live events. Each event is written to stream_events (inside the transaction that
// caused it, when there is one), then published on the event bus under its stream's topic.
// A subscriber subscribes first, replays what it missed since its last event id from the
// table, then receives live events, each exactly once.
import { and, asc, gt, inArray, isNull, lt, max } from "drizzle-orm";
import type { Database, Executor } from "../../db/client.ts";
import { streamEvents } from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import type { Deps } from "../deps.ts";
import type { EventBus } from "./bus.ts";

export type EventScope = { workspace_id?: string; channel_id?: string; conversation_id?: string };

/** What subscribers receive. */
export type StreamEvent = EventScope & {
  /** Increasing across all streams; pass the last one seen as lastEventId to resume. */
  id: string;
  type: string;
  created_at: string;
  data: Record<string, unknown>;
};

/** An event with the stream (bus topic) it belongs to. */
export type RecordedEvent = { stream: string; event: StreamEvent };

export type EventEntry = { stream: string; type: string; scope?: EventScope; data: Record<string, unknown> };

/** Events are replayable for at least this long (the contract asks for 10 minutes). */
export const EVENT_RETENTION_MS = 60 * 60 * 1000;
const REPLAY_LIMIT = 1000;

export const streams = {
  user: (userId: number) => `user:${userId}`,
  workspace: (workspaceId: string) => `workspace:${workspaceId}`,
  channel: (channelId: string) => `channel:${channelId}`,
  conversation: (conversationId: string) => `conversation:${conversationId}`,
};

/** Writes events (usually inside the caller's transaction); publish them after commit. */
export async function recordEvents(tx: Executor, now: Date, entries: EventEntry[]): Promise<RecordedEvent[]> {
  if (entries.length === 0) return [];
  const rows = await tx
    .insert(streamEvents)
    .values(
      entries.map((entry) => ({
        stream: entry.stream,
        payload: { type: entry.type, scope: entry.scope ?? {}, data: entry.data },
        createdAt: now,
      })),
    )
    .returning();
  return rows.map(toRecordedEvent);
}

/** Hands committed events to the bus and marks them published. */
export async function publishEvents(
  deps: Pick<Deps, "db" | "events" | "clock" | "logger">,
  recorded: RecordedEvent[],
): Promise<void> {
  if (recorded.length === 0) return;
  for (const { stream, event } of recorded) await deps.events.publish(stream, event);
  // Marking them published only spares the dispatcher work: it need not hold up the request.
  deps.db
    .update(streamEvents)
    .set({ publishedAt: deps.clock.now() })
    .where(
      inArray(
        streamEvents.id,
        recorded.map(({ event }) => Number(event.id)),
      ),
    )
    .catch((error: unknown) => deps.logger.warn({ err: error }, "could not mark events published"));
}

/** Records and publishes in one go, for changes made outside a transaction. */
export async function emitEvent(deps: Deps, entry: EventEntry): Promise<StreamEvent> {
  const recorded = await recordEvents(deps.db, deps.clock.now(), [entry]);
  await publishEvents(deps, recorded);
  return recorded[0]!.event;
}

/** Publishes events that were committed but never published (a crash in between), and prunes old ones. */
export async function dispatchPendingEvents(deps: Pick<Deps, "db" | "events" | "clock" | "logger">): Promise<number> {
  const now = deps.clock.now();
  const pending = await deps.db
    .select()
    .from(streamEvents)
    .where(and(isNull(streamEvents.publishedAt), lt(streamEvents.createdAt, new Date(now.getTime() - 5_000))))
    .orderBy(asc(streamEvents.id))
    .limit(500);
  await publishEvents(deps, pending.map(toRecordedEvent));
  await deps.db.delete(streamEvents).where(lt(streamEvents.createdAt, new Date(now.getTime() - EVENT_RETENTION_MS)));
  return pending.length;
}

function toRecordedEvent(row: typeof streamEvents.$inferSelect): RecordedEvent {
  const payload = row.payload as { type: string; scope: EventScope; data: Record<string, unknown> };
  return {
    stream: row.stream,
    event: {
      id: String(row.id),
      type: payload.type,
      ...payload.scope,
      created_at: isoTimestamp(row.createdAt),
      data: payload.data,
    },
  };
}

async function replay(db: Database, topics: string[], afterId: string): Promise<StreamEvent[]> {
  const after = Number(afterId);
  if (!Number.isSafeInteger(after) || topics.length === 0) return [];
  const rows = await db
    .select()
    .from(streamEvents)
    .where(and(inArray(streamEvents.stream, topics), gt(streamEvents.id, after)))
    .orderBy(asc(streamEvents.id))
    .limit(REPLAY_LIMIT);
  return rows.map((row) => toRecordedEvent(row).event);
}

/** The id of the newest stored event: a subscription's starting position. */
async function currentPosition(db: Database): Promise<string> {
  const [row] = await db.select({ id: max(streamEvents.id) }).from(streamEvents);
  return String(row?.id ?? 0);
}

/**
 * The events of a changing set of streams, each with the position to resume from: subscribe
 * first (buffering), replay from the store what came after `lastEventId`, then yield live
 * events, skipping any already replayed. `watch` may end the subscription or change its
 * topics (membership changes); topics gained are replayed from the event that added them.
 * Ephemeral events (typing, no id) carry the current position, which starts at the newest
 * stored event, so resuming from one never replays history from before the subscription.
 */
export async function* streamSubscription(options: {
  db: Database;
  bus: EventBus;
  topics: string[];
  lastEventId: string | null | undefined;
  signal: AbortSignal | undefined;
  /**
   * Called for every event before it is yielded: "skip" drops it, "end" delivers it and stops
   * (access lost), a topic list replaces the topics (membership changed).
   */
  watch?: (event: StreamEvent) => Promise<"end" | "skip" | string[] | undefined>;
}): AsyncGenerator<[position: string, event: StreamEvent]> {
  const pending: StreamEvent[] = [];
  let wake: (() => void) | undefined;
  const listener = (message: unknown) => {
    pending.push(message as StreamEvent);
    wake?.();
  };
  const unsubscribers = new Map<string, () => void>();
  /** Subscribes to the new topics, drops the old ones; returns the topics gained. */
  const setTopics = async (topics: string[]) => {
    for (const [topic, unsubscribe] of unsubscribers) {
      if (!topics.includes(topic)) {
        unsubscribe();
        unsubscribers.delete(topic);
      }
    }
    const added: string[] = [];
    for (const topic of topics) {
      if (!unsubscribers.has(topic)) {
        unsubscribers.set(topic, await options.bus.subscribe(topic, listener));
        added.push(topic);
      }
    }
    return added;
  };
  // Abort wakes the wait below. (Racing each wait against one long-lived "aborted" promise
  // would leave a reaction on that promise per wait, kept until the subscription ends.)
  const onAbort = () => wake?.();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    await setTopics(options.topics);
    const delivered = new Set<string>();
    let position = options.lastEventId ?? (await currentPosition(options.db));
    const advance = (event: StreamEvent) => {
      if (event.id && Number(event.id) > Number(position)) position = event.id;
    };
    if (options.lastEventId) {
      for (const event of await replay(options.db, options.topics, options.lastEventId)) {
        delivered.add(event.id);
        advance(event);
        if ((await options.watch?.(event)) !== "skip") yield [position, event];
      }
    }
    while (!options.signal?.aborted) {
      const event = pending.shift();
      if (!event) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      if (event.id && delivered.delete(event.id)) continue;
      advance(event);
      const decision = await options.watch?.(event);
      if (decision === "skip") continue;
      const gained = Array.isArray(decision) ? await setTopics(decision) : [];
      yield [position, event];
      // The event that ends access (removal, deletion) is the last one delivered.
      if (decision === "end") return;
      // What the new topics carried since the membership change, before we listened.
      for (const missed of gained.length ? await replay(options.db, gained, event.id) : []) {
        delivered.add(missed.id);
        advance(missed);
        yield [position, missed];
      }
    }
  } finally {
    options.signal?.removeEventListener("abort", onAbort);
    for (const unsubscribe of unsubscribers.values()) unsubscribe();
  }
}
