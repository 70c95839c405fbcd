// Durable live events. Each event is written to stream_events (inside the transaction that
// caused it, when there is one), then published on the event bus under its stream's topic.
// A subscriber (LiveSubscription) subscribes first, replays what it missed since its last
// event id from the table, then receives live events, each exactly once.
import { tracked, type TrackedEnvelope } from "@trpc/server";
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

/** What stream_events.payload holds for an entry. */
export type EventPayload = { type: string; scope: EventScope; data: Record<string, unknown> };

export function eventPayload(entry: EventEntry): EventPayload {
  return { type: entry.type, scope: entry.scope ?? {}, data: entry.data };
}

/** Writes events (usually inside the caller's transaction); publish them after commit. */
export async function recordEvents(tx: Executor, now: Date, entries: EventEntry[]): Promise<RecordedEvent[]> {
  if (entries.length === 0) return [];
  const rows = await tx
    .insert(streamEvents)
    .values(entries.map((entry) => ({ stream: entry.stream, payload: eventPayload(entry), createdAt: now })))
    .returning();
  return rows.map(toRecordedEvent);
}

/** Hands committed events to the bus; they are marked published shortly after. */
export async function publishEvents(
  deps: Pick<Deps, "db" | "events" | "clock" | "logger">,
  recorded: RecordedEvent[],
): Promise<void> {
  if (recorded.length === 0) return;
  for (const { stream, event } of recorded) await deps.events.publish(stream, event);
  publishedMarks(deps).add(recorded.map(({ event }) => Number(event.id)));
}

/**
 * Marking events published only spares the dispatcher work, so it is batched: one UPDATE
 * a quarter of a second for everything published meanwhile, instead of one per event.
 * The dispatcher republishes only events older than five seconds, long after a batch is
 * written; `flushPublishedMarks` writes the last batch at shutdown.
 */
class PublishedMarks {
  private ids: number[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly deps: Pick<Deps, "db" | "clock" | "logger">) {}

  add(ids: number[]): void {
    this.ids.push(...ids);
    this.timer ??= setTimeout(() => void this.flush(), 250);
  }

  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const ids = this.ids;
    this.ids = [];
    if (ids.length > 0) {
      this.writing = this.writing.then(() =>
        this.deps.db
          .update(streamEvents)
          .set({ publishedAt: this.deps.clock.now() })
          .where(inArray(streamEvents.id, ids))
          .then(
            () => undefined,
            (error: unknown) => this.deps.logger.warn({ err: error }, "could not mark events published"),
          ),
      );
    }
    return this.writing;
  }
}

const marks = new WeakMap<Database, PublishedMarks>();

function publishedMarks(deps: Pick<Deps, "db" | "clock" | "logger">): PublishedMarks {
  let batch = marks.get(deps.db);
  if (!batch) {
    batch = new PublishedMarks(deps);
    marks.set(deps.db, batch);
  }
  return batch;
}

/** Writes the marks not yet written (at shutdown, before the database closes). */
export function flushPublishedMarks(db: Database): Promise<void> {
  return marks.get(db)?.flush() ?? Promise.resolve();
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
  return { stream: row.stream, event: toStreamEvent(String(row.id), row.createdAt, row.payload as EventPayload) };
}

/** The event subscribers receive. */
export function toStreamEvent(id: string, createdAt: Date, payload: EventPayload): StreamEvent {
  return { id, type: payload.type, ...payload.scope, created_at: isoTimestamp(createdAt), data: payload.data };
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

/** What `watch` says of an event: "skip" drops it, "end" delivers it and stops, a topic list replaces the topics. */
export type WatchDecision = "end" | "skip" | string[] | undefined;

/** Where a live subscription hands its events. */
export type LiveSink = {
  /** Listening: every event published from now on will be delivered. */
  ready?(): void;
  event(position: string, event: StreamEvent): void;
  /** The subscriber lost access: nothing follows the last event. */
  end(): void;
  fail(error: unknown): void;
};

/** Replayed ids are remembered this long, to drop their live copies that were still on the way. */
const REPLAY_OVERLAP_MS = 60_000;

/**
 * The events of a changing set of streams, each with the position to resume from. It
 * subscribes first (queueing), replays from the store what came after `lastEventId`, then
 * delivers live events as they arrive, skipping any already replayed. `watch` may end the
 * subscription or change its topics (membership changes); topics gained are replayed from the
 * event that added them. Ephemeral events (typing, no id) carry the current position, which
 * starts at the newest stored event, so resuming from one never replays older history.
 *
 * Live events are delivered synchronously from the bus's callback, in order, to a sink
 * (`attach`): the WebSocket host writes them straight to the socket, so an event costs one
 * loop over its subscribers rather than an async generator per subscriber. The async
 * iterator face (tRPC's HTTP/SSE subscriptions) is the same thing with a queue in front.
 */
export class LiveSubscription implements AsyncIterable<TrackedEnvelope<StreamEvent>> {
  private sink: LiveSink | undefined;
  private closed = false;
  /** Events that arrived while an async step (replay, membership change) was running. */
  private queue: StreamEvent[] = [];
  private busy = true;
  private position = "0";
  private replayed = new Set<string>();
  private replayedAt = 0;
  private readonly unsubscribers = new Map<string, () => void>();
  private readonly listener = (message: unknown) => {
    if (this.closed) return;
    if (this.busy) this.queue.push(message as StreamEvent);
    else this.process(message as StreamEvent);
  };

  constructor(
    private readonly options: {
      db: Database;
      bus: EventBus;
      topics: string[];
      lastEventId: string | null | undefined;
      signal?: AbortSignal | undefined;
      /** Called for every live event before it is delivered (and for replayed ones: "skip" only). */
      watch?: (event: StreamEvent) => WatchDecision | Promise<WatchDecision>;
    },
  ) {}

  /** Starts delivery to `sink`. Once only. */
  attach(sink: LiveSink): void {
    if (this.sink) throw new Error("LiveSubscription.attach: already attached");
    this.sink = sink;
    if (this.options.signal?.aborted) return this.close();
    this.options.signal?.addEventListener("abort", () => this.close(), { once: true });
    this.run(() => this.start());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    for (const unsubscribe of this.unsubscribers.values()) unsubscribe();
    this.unsubscribers.clear();
  }

  private async start(): Promise<void> {
    const { db, lastEventId, watch } = this.options;
    await this.setTopics(this.options.topics);
    this.position = lastEventId ?? (await currentPosition(db));
    if (!this.closed) this.sink!.ready?.();
    if (!lastEventId) return;
    for (const event of await replay(db, this.options.topics, lastEventId)) {
      this.replayed.add(event.id);
      this.advance(event);
      if ((await watch?.(event)) !== "skip") this.deliver(event);
    }
    this.replayedAt = Date.now();
  }

  /** Runs an async step with live events queued behind it, then delivers the queue. */
  private run(step: () => Promise<void>): void {
    this.busy = true;
    step().then(
      () => {
        this.busy = false;
        while (!this.busy && !this.closed && this.queue.length > 0) this.process(this.queue.shift()!);
      },
      (error: unknown) => {
        if (this.closed) return;
        this.close();
        this.sink!.fail(error);
      },
    );
  }

  private process(event: StreamEvent): void {
    if (this.replayed.size > 0) {
      if (event.id && this.replayed.delete(event.id)) return;
      if (Date.now() - this.replayedAt > REPLAY_OVERLAP_MS) this.replayed.clear();
    }
    this.advance(event);
    const decision = this.options.watch?.(event);
    if (decision instanceof Promise) this.run(async () => this.decide(event, await decision));
    else if (Array.isArray(decision)) this.run(() => this.decide(event, decision));
    else void this.decide(event, decision);
  }

  /** Acts on a decision; only a topic change has async work (subscribe, replay what it missed). */
  private async decide(event: StreamEvent, decision: WatchDecision): Promise<void> {
    if (decision === "skip" || this.closed) return;
    const gained = Array.isArray(decision) ? await this.setTopics(decision) : [];
    this.deliver(event);
    // The event that ends access (removal, deletion) is the last one delivered.
    if (decision === "end") {
      this.close();
      this.sink!.end();
      return;
    }
    for (const missed of gained.length > 0 ? await replay(this.options.db, gained, event.id) : []) {
      this.replayed.add(missed.id);
      this.replayedAt = Date.now();
      this.advance(missed);
      this.deliver(missed);
    }
  }

  private deliver(event: StreamEvent): void {
    if (!this.closed) this.sink!.event(this.position, event);
  }

  private advance(event: StreamEvent): void {
    if (event.id && Number(event.id) > Number(this.position)) this.position = event.id;
  }

  /** Subscribes to the new topics, drops the old ones; returns the topics gained. */
  private async setTopics(topics: string[]): Promise<string[]> {
    for (const [topic, unsubscribe] of this.unsubscribers) {
      if (!topics.includes(topic)) {
        unsubscribe();
        this.unsubscribers.delete(topic);
      }
    }
    const added: string[] = [];
    for (const topic of topics) {
      if (this.closed) break;
      if (!this.unsubscribers.has(topic)) {
        this.unsubscribers.set(topic, await this.options.bus.subscribe(topic, this.listener));
        added.push(topic);
      }
    }
    // Closed while subscribing: let go of what was just taken.
    if (this.closed) for (const unsubscribe of this.unsubscribers.values()) unsubscribe();
    return added;
  }

  /** The same events as tRPC tracked envelopes, for callers that iterate (HTTP/SSE subscriptions). */
  [Symbol.asyncIterator](): AsyncIterator<TrackedEnvelope<StreamEvent>> {
    const items: TrackedEnvelope<StreamEvent>[] = [];
    let ended = false;
    let failure: { error: unknown } | undefined;
    let wake: (() => void) | undefined;
    this.attach({
      event: (position, event) => {
        items.push(tracked(position, event));
        wake?.();
      },
      end: () => {
        ended = true;
        wake?.();
      },
      fail: (error) => {
        failure = { error };
        wake?.();
      },
    });
    this.options.signal?.addEventListener("abort", () => wake?.(), { once: true });
    return {
      next: async () => {
        for (;;) {
          const item = items.shift();
          if (item) return { value: item, done: false };
          if (failure) throw failure.error;
          if (ended || this.closed) return { value: undefined, done: true };
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
        }
      },
      return: async () => {
        this.close();
        return { value: undefined, done: true };
      },
    };
  }
}
