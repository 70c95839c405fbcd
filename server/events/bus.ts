// Live events between server processes: Redis pub/sub when REDIS_URL is set, an in-process
// emitter otherwise (one process only). Topics are plain strings such as "user:42".
import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import type { Logger } from "../logger.ts";
import { createRedis } from "../redis.ts";

export type Listener = (message: unknown) => void;

export interface EventBus {
  publish(topic: string, message: unknown): Promise<void>;
  /** Resolves once messages published from now on reach the listener; returns a function that removes it. */
  subscribe(topic: string, listener: Listener): Promise<() => void>;
  /**
   * Called after the bus lost its connection and listens again: messages published meanwhile
   * never arrived, so whoever depends on them catches up from the store.
   */
  onResubscribed(listener: () => void): () => void;
  close(): Promise<void>;
}

export class InProcessEventBus implements EventBus {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  async publish(topic: string, message: unknown): Promise<void> {
    // Serialise like Redis does, so both buses hand listeners the same plain data.
    this.emitter.emit(topic, JSON.parse(JSON.stringify(message)));
  }

  async subscribe(topic: string, listener: Listener): Promise<() => void> {
    this.emitter.on(topic, listener);
    return () => this.emitter.off(topic, listener);
  }

  onResubscribed(): () => void {
    // One process, no connection to lose.
    return () => {};
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

  constructor(
    redisUrl: string,
    private readonly prefix: string,
    logger: Logger,
  ) {
    // Publishes made in the same tick (a busy server) leave in one write.
    this.publisher = createRedis(redisUrl, logger, "events-publisher", { enableAutoPipelining: true });
    // A subscriber connection only listens: no per-command retry limit applies to it.
    this.subscriber = createRedis(redisUrl, logger, "events-subscriber", { maxRetriesPerRequest: null });
    // ioredis resubscribes by itself after a reconnect; the PING is answered only once Redis has
    // processed those SUBSCRIBEs, so catching up after it cannot fall between the two.
    let connectedBefore = false;
    this.subscriber.on("ready", () => {
      if (!connectedBefore) {
        connectedBefore = true;
        return;
      }
      this.subscriber.ping().then(
        () => {
          for (const listener of this.resubscribedListeners) listener();
        },
        (error: unknown) => logger.warn({ err: error }, "event bus: could not confirm the resubscription"),
      );
    });
    this.subscriber.on("message", (channel: string, raw: string) => {
      const topic = channel.slice(this.channelPrefix.length);
      const listeners = this.listeners.get(topic);
      if (!listeners) return;
      const message: unknown = JSON.parse(raw);
      for (const listener of listeners) listener(message);
    });
  }

  private get channelPrefix() {
    return `${this.prefix}:events:`;
  }

  async publish(topic: string, message: unknown): Promise<void> {
    await this.publisher.publish(this.channelPrefix + topic, JSON.stringify(message));
  }

  async subscribe(topic: string, listener: Listener): Promise<() => void> {
    let set = this.listeners.get(topic);
    if (!set) {
      set = new Set();
      this.listeners.set(topic, set);
      this.subscribed.set(
        topic,
        this.whenReady().then(() => this.subscriber.subscribe(this.channelPrefix + topic)),
      );
    }
    set.add(listener);
    const unsubscribe = () => {
      const current = this.listeners.get(topic);
      if (!current?.delete(listener) || current.size > 0) return;
      this.listeners.delete(topic);
      this.subscribed.delete(topic);
      void this.subscriber.unsubscribe(this.channelPrefix + topic).catch(() => {});
    };
    try {
      await this.subscribed.get(topic);
    } catch (error) {
      unsubscribe();
      throw error;
    }
    return unsubscribe;
  }

  /**
   * ioredis writes a SUBSCRIBE at once to a connection still in its handshake, which then fails
   * its own ready check ("only subscriber commands may be used") and drops the connection: a
   * subscription made while the process starts (or reconnects) waits until the connection is ready.
   */
  private whenReady(): Promise<void> {
    if (this.subscriber.status === "ready") return Promise.resolve();
    return new Promise((resolve) => this.subscriber.once("ready", () => resolve()));
  }

  onResubscribed(listener: () => void): () => void {
    this.resubscribedListeners.add(listener);
    return () => this.resubscribedListeners.delete(listener);
  }

  async close(): Promise<void> {
    this.listeners.clear();
    this.resubscribedListeners.clear();
    await Promise.allSettled([this.publisher.quit(), this.subscriber.quit()]);
  }
}
