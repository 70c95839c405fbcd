// Durable live events. Each event is written to stream_events (inside the transaction that
// caused it, when there is one), then published on the event bus under its stream's topic.
// A subscriber subscribes first, replays what it missed since its last event id from the
// table, then receives live events, each exactly once.
import { and, asc, gt, inArray, isNull, lt } from "drizzle-orm";
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
  deps: Pick<Deps, "db" | "events" | "clock">,
  recorded: RecordedEvent[],
): Promise<void> {
  if (recorded.length === 0) return;
  for (const { stream, event } of recorded) await deps.events.publish(stream, event);
  await deps.db
    .update(streamEvents)
    .set({ publishedAt: deps.clock.now() })
    .where(
      inArray(
        streamEvents.id,
        recorded.map(({ event }) => Number(event.id)),
      ),
    );
}

/** Records and publishes in one go, for changes made outside a transaction. */
export async function emitEvent(deps: Deps, entry: EventEntry): Promise<StreamEvent> {
  const recorded = await recordEvents(deps.db, deps.clock.now(), [entry]);
  await publishEvents(deps, recorded);
  return recorded[0]!.event;
}

/** Publishes events that were committed but never published (a crash in between), and prunes old ones. */
export async function dispatchPendingEvents(deps: Pick<Deps, "db" | "events" | "clock">): Promise<number> {
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

/**
 * The events of a changing set of streams: subscribe first (buffering), replay from the
 * store what came after `lastEventId`, then yield live events, skipping any already
 * replayed. `watch` may end the subscription or change its topics (membership changes).
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
}): AsyncGenerator<StreamEvent> {
  const pending: StreamEvent[] = [];
  let wake: (() => void) | undefined;
  const listener = (message: unknown) => {
    pending.push(message as StreamEvent);
    wake?.();
  };
  const unsubscribers = new Map<string, () => void>();
  const setTopics = async (topics: string[]) => {
    for (const [topic, unsubscribe] of unsubscribers) {
      if (!topics.includes(topic)) {
        unsubscribe();
        unsubscribers.delete(topic);
      }
    }
    for (const topic of topics) {
      if (!unsubscribers.has(topic)) unsubscribers.set(topic, await options.bus.subscribe(topic, listener));
    }
  };
  const aborted = new Promise<void>((resolve) =>
    options.signal?.addEventListener("abort", () => resolve(), { once: true }),
  );
  try {
    await setTopics(options.topics);
    const delivered = new Set<string>();
    if (options.lastEventId) {
      for (const event of await replay(options.db, options.topics, options.lastEventId)) {
        delivered.add(event.id);
        if ((await options.watch?.(event)) !== "skip") yield event;
      }
    }
    while (!options.signal?.aborted) {
      const event = pending.shift();
      if (!event) {
        await Promise.race([new Promise<void>((resolve) => (wake = resolve)), aborted]);
        wake = undefined;
        continue;
      }
      if (delivered.delete(event.id)) continue;
      const decision = await options.watch?.(event);
      if (decision === "skip") continue;
      if (Array.isArray(decision)) await setTopics(decision);
      yield event;
      // The event that ends access (removal, deletion) is the last one delivered.
      if (decision === "end") return;
    }
  } finally {
    for (const unsubscribe of unsubscribers.values()) unsubscribe();
  }
}
