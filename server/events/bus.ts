// Live events between server processes: Redis pub/sub when REDIS_URL is set, an in-process
// emitter otherwise (one process only). Topics are plain strings such as "user:42".
import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import type { Logger } from "../logger.ts";
import { createRedis } from "../redis.ts";
import { within } from "../timeout.ts";

export type Listener = (message: unknown) => void;

/** One message of `publishAll`. */
export type BusMessage = { topic: string; message: unknown };

/** The Redis channel a topic travels on (a Lua script may PUBLISH to it directly). */
export const busChannel = (prefix: string, topic: string): string => `${prefix}:events:${topic}`;

/** The longest a subscription waits for Redis to confirm it. */
const SUBSCRIBE_WAIT_MS = 1_000;

export interface EventBus {
  publish(topic: string, message: unknown): Promise<void>;
  /**
   * Publishes several messages in order, in one write (the relay's batches). They must be plain
   * data, as JSON gives back: this process's listeners receive them as they are, at once, and
   * other processes through Redis. Resolves with each message's outcome; a failure means the
   * other processes did not get it.
   */
  publishAll(messages: readonly BusMessage[]): Promise<PromiseSettledResult<void>[]>;
  /** Resolves once messages published from now on reach the listener. */
  subscribe(topic: string, listener: Listener): Promise<void>;
  /**
   * Removes a listener `subscribe` added (the same function). A method rather than a function
   * handed back per subscription: a live subscription follows several topics for as long as
   * its connection is open, and each closure would be kept that long.
   */
  unsubscribe(topic: string, listener: Listener): void;
  /**
   * Called after the bus (re)connected and listens: messages published while it was away never
   * arrived, so whoever depends on them catches up from the store.
   */
  onResubscribed(listener: () => void): () => void;
  /**
   * Called when the bus loses its connection (until `onResubscribed`), and answers whether it is
   * listening now: a subscriber holds live messages back from then until it has caught up from
   * the store, so that none that arrives first can step over what was missed.
   */
  onDisconnected(listener: () => void): () => void;
  isListening(): boolean;
  close(): Promise<void>;
}

/**
 * Subscribes `listener` to `topic` (resolving once it listens) and answers how to unsubscribe
 * it: for a holder of few, long subscriptions (a process's own watches); a live subscription of
 * a connection keeps its listener and calls `unsubscribe` itself instead.
 */
export async function listen(bus: EventBus, topic: string, listener: Listener): Promise<() => void> {
  await bus.subscribe(topic, listener);
  return () => bus.unsubscribe(topic, listener);
}

export class InProcessEventBus implements EventBus {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  async publish(topic: string, message: unknown): Promise<void> {
    // Serialise like Redis does, so both buses hand listeners the same plain data.
    this.emitter.emit(topic, JSON.parse(JSON.stringify(message)));
  }

  async publishAll(messages: readonly BusMessage[]): Promise<PromiseSettledResult<void>[]> {
    for (const { topic, message } of messages) this.emitter.emit(topic, message);
    return messages.map(() => ({ status: "fulfilled", value: undefined }));
  }

  async subscribe(topic: string, listener: Listener): Promise<void> {
    this.emitter.on(topic, listener);
  }

  unsubscribe(topic: string, listener: Listener): void {
    this.emitter.off(topic, listener);
  }

  onResubscribed(): () => void {
    // One process, no connection to lose.
    return () => {};
  }

  onDisconnected(): () => void {
    return () => {};
  }

  isListening(): boolean {
    return true;
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

export class RedisEventBus implements EventBus {
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly listeners = new Map<string, Set<Listener>>();
  /** Each topic's SUBSCRIBE, so that a second listener also waits until Redis has confirmed it. */
  private readonly subscribed = new Map<string, Promise<unknown>>();
  private readonly resubscribedListeners = new Set<() => void>();
  private readonly disconnectedListeners = new Set<() => void>();
  /** Ready, resubscribed and caught up with by the listeners (false from a lost connection until then). */
  private listening = false;
  /** Topics asked for while the subscriber was not connected. */
  private readonly waitingTopics = new Set<string>();
  /**
   * How this process's `publishAll` messages start on Redis (`~<origin>~<json>`): it delivered
   * them to its own listeners already, so it skips them when Redis hands them back. Other
   * messages are plain JSON (also what Lua scripts publish), which never starts with "~".
   */
  private readonly origin = `~${randomBytes(6).toString("hex")}~`;

  constructor(
    redisUrl: string,
    private readonly prefix: string,
    logger: Logger,
  ) {
    // While Redis is away a publish fails at once instead of queueing (the relay republishes from
    // the store, in order), and a command caught by a dropped connection is not resent behind
    // later ones. A batch goes in one write through `publishAll`.
    this.publisher = createRedis(redisUrl, logger, "events-publisher", {
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      // A Redis that hangs (rather than drops) the connection must not hold the relay up either.
      commandTimeout: 2_000,
    });
    // A subscriber connection only listens: no per-command retry limit applies to it.
    this.subscriber = createRedis(redisUrl, logger, "events-subscriber", { maxRetriesPerRequest: null });
    // On every (re)connection: SUBSCRIBE the topics that were asked for while it was down (ioredis
    // resubscribes the others by itself), then PING, which Redis answers only once it has processed
    // those SUBSCRIBEs; only then do listeners catch up from the store, so that nothing published
    // between the catch-up and the subscription can fall between them.
    this.subscriber.on("ready", () => {
      const waiting = [...this.waitingTopics];
      this.waitingTopics.clear();
      Promise.all(waiting.map((topic) => this.subscriber.subscribe(this.channelPrefix + topic)))
        .then(() => this.subscriber.ping())
        .then(
          () => {
            this.listening = true;
            for (const listener of this.resubscribedListeners) listener();
          },
          (error: unknown) => logger.warn({ err: error }, "event bus: could not confirm the resubscription"),
        );
    });
    // A lost connection: messages published from now until the resubscription never arrive, and
    // the first ones after it may arrive before the listeners caught up (ioredis resubscribes the
    // known topics by itself): listeners hold live messages back until `onResubscribed`.
    this.subscriber.on("close", () => {
      if (!this.listening) return;
      this.listening = false;
      for (const listener of this.disconnectedListeners) listener();
    });
    this.subscriber.on("message", (channel: string, raw: string) => {
      let text = raw;
      if (raw.startsWith("~")) {
        if (raw.startsWith(this.origin)) return; // its own publishAll: delivered here already
        text = raw.slice(raw.indexOf("~", 1) + 1);
      }
      this.deliver(channel.slice(this.channelPrefix.length), text);
    });
  }

  private get channelPrefix() {
    return busChannel(this.prefix, "");
  }

  private deliver(topic: string, text: string): void {
    const listeners = this.listeners.get(topic);
    if (!listeners) return;
    const message: unknown = JSON.parse(text);
    for (const listener of listeners) listener(message);
  }

  async publish(topic: string, message: unknown): Promise<void> {
    await this.publisher.publish(this.channelPrefix + topic, JSON.stringify(message));
  }

  async publishAll(messages: readonly BusMessage[]): Promise<PromiseSettledResult<void>[]> {
    for (const { topic, message } of messages) {
      const listeners = this.listeners.get(topic);
      if (!listeners) continue;
      for (const listener of listeners) {
        try {
          listener(message);
        } catch {
          // A listener's failure is its own (a subscription ends itself); the others and Redis still get it.
        }
      }
    }
    const raw = messages.map(({ topic, message }) => [
      this.channelPrefix + topic,
      this.origin + JSON.stringify(message),
    ]);
    const sent: PromiseSettledResult<void> = { status: "fulfilled", value: undefined };
    if (raw.length === 1) {
      return [
        await this.publisher.publish(raw[0]![0]!, raw[0]![1]!).then(
          () => sent,
          (reason: unknown) => ({ status: "rejected", reason }),
        ),
      ];
    }
    const pipeline = this.publisher.pipeline();
    for (const [channel, text] of raw) pipeline.publish(channel!, text!);
    try {
      const results = (await pipeline.exec()) ?? [];
      return raw.map((_, index) => {
        const error = results[index]?.[0];
        return error ? { status: "rejected", reason: error } : sent;
      });
    } catch (reason) {
      return raw.map(() => ({ status: "rejected", reason }));
    }
  }

  async subscribe(topic: string, listener: Listener): Promise<void> {
    let set = this.listeners.get(topic);
    if (!set) {
      set = new Set();
      this.listeners.set(topic, set);
      if (this.subscriber.status === "ready") {
        this.subscribed.set(topic, this.subscriber.subscribe(this.channelPrefix + topic));
      } else {
        // Redis is away (or still connecting): a SUBSCRIBE written now would break the handshake.
        // The ready handler subscribes it, then tells the listeners to catch up from the store.
        this.waitingTopics.add(topic);
      }
    }
    set.add(listener);
    // Never wait on Redis for long: a subscription not confirmed in time is completed by the
    // reconnection (the ready handler above), whose catch-up delivers what was published meanwhile.
    const confirmed = this.subscribed.get(topic);
    if (confirmed) await within(confirmed, SUBSCRIBE_WAIT_MS, "Redis SUBSCRIBE").catch(() => {});
  }

  unsubscribe(topic: string, listener: Listener): void {
    const current = this.listeners.get(topic);
    if (!current?.delete(listener) || current.size > 0) return;
    this.listeners.delete(topic);
    this.subscribed.delete(topic);
    this.waitingTopics.delete(topic);
    if (this.subscriber.status === "ready")
      void this.subscriber.unsubscribe(this.channelPrefix + topic).catch(() => {});
  }

  onResubscribed(listener: () => void): () => void {
    this.resubscribedListeners.add(listener);
    return () => this.resubscribedListeners.delete(listener);
  }

  onDisconnected(listener: () => void): () => void {
    this.disconnectedListeners.add(listener);
    return () => this.disconnectedListeners.delete(listener);
  }

  isListening(): boolean {
    return this.listening;
  }

  async close(): Promise<void> {
    this.listeners.clear();
    this.resubscribedListeners.clear();
    this.disconnectedListeners.clear();
    await Promise.allSettled([this.publisher.quit(), this.subscriber.quit()]);
  }
}
