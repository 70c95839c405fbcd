// A live subscription: the events of a changing set of streams, each delivered once, in
// position order, with the position to resume from. It subscribes first (queueing), replays
// from the store what came after `lastEventId`, then delivers live events. Positions come from
// the one relay (relay.ts) in commit order, so "nothing at or below my position is owed" holds
// exactly: a live event at or below it is a duplicate, one above it is new.
import type { Database } from "../../db/client.ts";
import { AppError } from "../errors.ts";
import type { EventBus } from "./bus.ts";
import { positionBounds, replay, REPLAY_LIMIT, streams, type BusEvent, type StreamEvent } from "./streams.ts";

/** What `watch` says of an event: "skip" drops it, "end" delivers it and stops, a topic list replaces the topics. */
export type WatchDecision = "end" | "skip" | string[] | undefined;

/** How one subscriber sees events: per-reader fields (a message's translation), or not at all. */
export type EventView = {
  /** Sees every stored event the subscription receives, delivered or not, in order. */
  observe(event: StreamEvent): void;
  /** The event as this subscriber receives it; null: not for them. */
  present(message: BusEvent): StreamEvent | null;
};

/** Where a live subscription hands its events. */
export type LiveSink = {
  /** Listening: every event published from now on will be delivered. */
  ready?(): void;
  event(position: string, event: StreamEvent): void;
  /** The subscriber lost access: nothing follows the last event. */
  end(): void;
  /** The subscription failed: an AppError (resync_required, unauthenticated) or an unexpected error; the door maps it. */
  fail(error: unknown): void;
};

/** A resume the store cannot serve exactly: the client reloads what it shows, then subscribes afresh. */
function resyncRequired(reason: string): AppError {
  return new AppError("resync_required", `${reason} Reload, then subscribe again without lastEventId.`);
}

type Options = {
  db: Database;
  bus: EventBus;
  topics: string[];
  lastEventId: string | null | undefined;
  /** The subscriber: an event addressed to a private channel's audience also reaches the user it is about. */
  viewerId: number;
  signal?: AbortSignal | undefined;
  /** Called for every stored event above the position, live or replayed, before it is delivered. */
  watch?: (event: StreamEvent, followed: readonly string[]) => WatchDecision | Promise<WatchDecision>;
  view?: EventView;
};

/** Nothing pending: where a subscription's steps start again once the last one ran. */
const NO_STEP: Promise<void> = Promise.resolve();

/**
 * The live subscriptions of one bus, told of its connection's state by one pair of listeners
 * for all of them (rather than two listeners, and two functions to remove them, per
 * subscription, kept while it is open).
 */
class BusWatchers {
  private readonly subscriptions = new Set<LiveSubscription>();

  constructor(bus: EventBus) {
    bus.onDisconnected(() => {
      for (const subscription of this.subscriptions) subscription.busDisconnected();
    });
    bus.onResubscribed(() => {
      for (const subscription of this.subscriptions) subscription.busResubscribed();
    });
  }

  add(subscription: LiveSubscription): void {
    this.subscriptions.add(subscription);
  }

  delete(subscription: LiveSubscription): void {
    this.subscriptions.delete(subscription);
  }
}

const watchersByBus = new WeakMap<EventBus, BusWatchers>();
function watchersOf(bus: EventBus): BusWatchers {
  let watchers = watchersByBus.get(bus);
  if (!watchers) {
    watchers = new BusWatchers(bus);
    watchersByBus.set(bus, watchers);
  }
  return watchers;
}

/**
 * Live events are delivered synchronously from the bus's callback to a sink (`attach`): the
 * WebSocket host writes them straight to the socket, so an event costs one loop over its
 * subscribers rather than an async generator per subscriber. Async steps (the first replay, a
 * membership change, a catch-up after the bus reconnected) queue the live events behind them.
 * Each door speaks its own protocol over a sink: the WebSocket host's frames, tRPC's async
 * iterator for HTTP/SSE (server/trpc-live.ts). Failures reach the sink as they are (AppError).
 */
export class LiveSubscription {
  private sink: LiveSink | undefined;
  private closed = false;
  /** Events that arrived while an async step was running. */
  private queue: BusEvent[] = [];
  /** Async steps run one after another; live events queue while any is pending. */
  private steps: Promise<void> = NO_STEP;
  private pendingSteps = 0;
  /** Every stored event at or below it was delivered (or was not for this subscriber). */
  private position = 0;
  /** The topics followed (a few: an array costs a tenth of a Set's table, and is kept while the subscription is open). */
  private topics: string[] = [];
  private readonly cleanups: (() => void)[] = [];
  /**
   * What the bus calls. Made in the constructor: under tsx (esbuild's keepNames) a class field's
   * arrow gets its name defined on it, a property store of its own per subscription.
   */
  private readonly listener: (message: unknown) => void;
  private readonly options: Omit<Options, "topics" | "lastEventId">;
  /** What the start needs, let go of once it ran. */
  private opening: Pick<Options, "topics" | "lastEventId"> | undefined;

  constructor({ topics, lastEventId, ...options }: Options) {
    this.options = options;
    this.opening = { topics, lastEventId };
    this.listener = (message) => this.receive(message as BusEvent);
  }

  private receive(message: BusEvent): void {
    if (this.closed) return;
    if (this.pendingSteps > 0) this.queue.push(message);
    else this.process(message);
  }

  /** Starts delivery to `sink`. Once only. */
  attach(sink: LiveSink): void {
    if (this.sink) throw new Error("LiveSubscription.attach: already attached");
    this.sink = sink;
    if (this.options.signal?.aborted) return this.close();
    // The subscription itself is the abort listener (`handleEvent`): no function kept per subscription.
    this.options.signal?.addEventListener("abort", this, { once: true });
    const { bus } = this.options;
    watchersOf(bus).add(this);
    this.run(() => this.start());
    // Started (and told the client so) even while Redis is away; live events wait for it.
    if (!bus.isListening()) this.holdUntilResubscribed();
  }

  /** The abort signal fired (the door's client went away). */
  handleEvent(): void {
    this.close();
  }

  /** The bus lost its connection (BusWatchers). */
  busDisconnected(): void {
    this.holdUntilResubscribed();
  }

  /** The bus listens again (BusWatchers): catch up first, then let the held live events through, merged with what was missed. */
  busResubscribed(): void {
    this.run(() => this.catchUp());
    this.releaseHold?.();
  }

  /** Ends the subscription with an error (e.g. its credential was revoked); the sink's door maps it for the client. */
  fail(error: unknown): void {
    if (this.closed) return;
    this.close();
    this.sink?.fail(error);
  }

  /** Runs `cleanup` when the subscription closes. */
  onClose(cleanup: () => void): void {
    if (this.closed) cleanup();
    else this.cleanups.push(cleanup);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.releaseHold?.();
    const { bus, signal } = this.options;
    watchersOf(bus).delete(this);
    signal?.removeEventListener("abort", this);
    for (const topic of this.topics) bus.unsubscribe(topic, this.listener);
    this.topics = [];
    for (const cleanup of this.cleanups.splice(0)) cleanup();
  }

  private async start(): Promise<void> {
    const { db } = this.options;
    const { topics, lastEventId } = this.opening!;
    this.opening = undefined;
    await this.setTopics(topics);
    const { newest, oldestKept } = await positionBounds(db);
    if (lastEventId === null || lastEventId === undefined) {
      this.position = newest;
    } else {
      const from = Number(lastEventId);
      if (from > newest) throw resyncRequired("That position is not known here.");
      if (from < oldestKept - 1) throw resyncRequired("Events after that position are no longer kept.");
      this.position = from;
    }
    if (!this.closed) this.sink!.ready?.();
    if (lastEventId !== null && lastEventId !== undefined)
      this.queue = mergeByPosition(await this.missed([...this.topics]), this.queue);
  }

  /** Ends the hold of `holdUntilResubscribed`. */
  private releaseHold: (() => void) | undefined;

  /**
   * The bus lost its connection (or has not listened yet): live events queue from now until it
   * listens again and the catch-up ran, so that a live event published after the reconnection
   * cannot arrive first and move the position over events published while it was away.
   */
  private holdUntilResubscribed(): void {
    if (this.releaseHold || this.closed) return;
    const held = new Promise<void>((resolve) => {
      this.releaseHold = () => {
        this.releaseHold = undefined;
        resolve();
      };
    });
    this.run(() => held);
  }

  /** The bus listened again after losing its connection: what was published meanwhile comes from the store. */
  private async catchUp(): Promise<void> {
    this.queue = mergeByPosition(await this.missed([...this.topics]), this.queue);
  }

  /** The stored events of `topics` after the position, or a resync error when there are too many. */
  private async missed(topics: string[]): Promise<BusEvent[]> {
    const events = await replay(this.options.db, topics, this.position, REPLAY_LIMIT);
    if (events.length > REPLAY_LIMIT) throw resyncRequired(`More than ${REPLAY_LIMIT} events were missed.`);
    return events;
  }

  /** Runs an async step after those before it, with live events queued behind it, then delivers the queue. */
  private run(step: () => Promise<void>): void {
    this.pendingSteps++;
    this.steps = this.steps
      .then(() => (this.closed ? undefined : step()))
      .then(
        () => {
          this.pendingSteps--;
          while (this.pendingSteps === 0 && !this.closed && this.queue.length > 0) this.process(this.queue.shift()!);
          this.settleSteps();
        },
        (error: unknown) => {
          this.pendingSteps--;
          this.fail(error);
          this.settleSteps();
        },
      );
  }

  /** Once no step is pending, the chain of steps run is let go (an idle subscription keeps none of it). */
  private settleSteps(): void {
    if (this.pendingSteps === 0) this.steps = NO_STEP;
  }

  private process(message: BusEvent): void {
    const { event } = message;
    if (event.id !== "") {
      const position = Number(event.id);
      if (position <= this.position) return;
      this.position = position;
      this.options.view?.observe(event);
    }
    const decision = event.id === "" ? undefined : this.options.watch?.(event, this.topics);
    if (decision instanceof Promise) this.run(async () => this.decideLater(message, await decision));
    else if (Array.isArray(decision)) this.run(() => this.changeTopics(message, decision));
    else {
      // Most events: delivered here, synchronously (no promise per delivery); a failure ends
      // this subscription only, never the bus's loop over the others.
      try {
        this.decide(message, decision);
      } catch (error) {
        this.fail(error);
      }
    }
  }

  private async decideLater(message: BusEvent, decision: WatchDecision): Promise<void> {
    if (Array.isArray(decision)) await this.changeTopics(message, decision);
    else this.decide(message, decision);
  }

  /** Acts on a decision that keeps the topics. */
  private decide(message: BusEvent, decision: "end" | "skip" | undefined): void {
    if (decision === "skip" || this.closed) return;
    if (this.admits(message)) this.deliver(message);
    // The event that ends access (removal, deletion) is the last one delivered.
    if (decision === "end") {
      this.close();
      this.sink!.end();
    }
  }

  /** Acts on a topic change: subscribe, deliver, replay what the new streams had after this event. */
  private async changeTopics(message: BusEvent, topics: string[]): Promise<void> {
    if (this.closed) return;
    // An event that changes the topics is seen by those who may see it before or after the
    // change: the member who joins a private channel, and those it removes.
    const admittedBefore = this.admits(message);
    const gained = await this.setTopics(topics);
    if (admittedBefore || this.admits(message)) this.deliver(message);
    // Streams followed from now on: what they had after this event, in order with the queue.
    if (gained.length > 0) this.queue = mergeByPosition(await this.missed(gained), this.queue);
  }

  /**
   * Whether the subscriber may see the event: an event about a private channel is for those
   * who follow that channel's stream (its members), and for the member it is about.
   */
  private admits({ audience }: BusEvent): boolean {
    if (!audience) return true;
    return audience.user_id === this.options.viewerId || this.topics.includes(streams.channel(audience.channel_id));
  }

  private deliver(message: BusEvent): void {
    if (this.closed) return;
    const shown = this.options.view ? this.options.view.present(message) : message.event;
    // A stored event's id is its position; an ephemeral one (no id) carries the position before it.
    if (shown) this.sink!.event(message.event.id || String(this.position), shown);
  }

  /** Subscribes to the new topics, drops the old ones; returns the topics gained. */
  private async setTopics(topics: string[]): Promise<string[]> {
    const { bus } = this.options;
    for (const topic of this.topics) if (!topics.includes(topic)) bus.unsubscribe(topic, this.listener);
    const added = [...new Set(topics)].filter((topic) => !this.topics.includes(topic));
    // One array of the new set's size (a close meanwhile lets go of each, subscribed yet or not).
    this.topics = [...this.topics.filter((topic) => topics.includes(topic)), ...added];
    for (const topic of added) {
      if (this.closed) break;
      await bus.subscribe(topic, this.listener);
    }
    // Closed while subscribing: let go of what was just taken.
    if (this.closed) for (const topic of this.topics) bus.unsubscribe(topic, this.listener);
    return added;
  }
}

/**
 * Two lists of events in position order as one: replayed events and live ones that queued
 * meanwhile may interleave. An ephemeral event (no position) keeps its place after the stored
 * event before it in its own list.
 */
function mergeByPosition(a: BusEvent[], b: BusEvent[]): BusEvent[] {
  const keyed = (list: BusEvent[], source: number) => {
    let last = 0;
    return list.map((message, index) => {
      if (message.event.id !== "") last = Number(message.event.id);
      return { message, key: last, source, index };
    });
  };
  return [...keyed(a, 0), ...keyed(b, 1)]
    .sort((x, y) => x.key - y.key || x.source - y.source || x.index - y.index)
    .map(({ message }) => message);
}
