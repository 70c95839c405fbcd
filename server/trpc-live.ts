// The live door of tRPC's HTTP (SSE) subscriptions: a live subscription
// (server/events/live-subscription.ts) as the async iterable of tracked events tRPC iterates,
// a presence watch as the iterable of its (untracked) events, and their failure as the typed
// tRPC error. The WebSocket host (server/http/trpc-websocket.ts)
// takes the subscription itself and attaches a sink that writes frames.
import { tracked, type TrackedEnvelope } from "@trpc/server";
import type { LiveSubscription } from "./events/live-subscription.ts";
import type { StreamEvent } from "./events/streams.ts";
import type { PresenceChanged, PresenceWatch } from "./services/presence/presence.ts";
import { toTRPCError } from "./trpc-errors.ts";

/**
 * A queue in front of a stream's sink, read as an async iterator: `push` a value, `end` it, or
 * `fail` it (the error as tRPC's); a waiting `next` looks again after each. `close` is what
 * `return` calls (the client went away).
 */
function queuedIterator<T>(close: () => void) {
  const items: T[] = [];
  let done = false;
  let failure: { error: unknown } | undefined;
  let wake: (() => void) | undefined;
  const iterator: AsyncIterator<T> = {
    next: async () => {
      for (;;) {
        const item = items.shift();
        if (item) return { value: item, done: false };
        if (failure) throw failure.error;
        if (done) return { value: undefined, done: true };
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
    },
    return: async () => {
      close();
      return { value: undefined, done: true };
    },
  };
  return {
    iterator,
    push(item: T) {
      items.push(item);
      wake?.();
    },
    end() {
      done = true;
      wake?.();
    },
    fail(error: unknown) {
      failure = { error: toTRPCError(error) };
      wake?.();
    },
  };
}

/** What a subscription procedure returns for a live subscription: the subscription, iterable as tRPC expects. */
export class TrackedLiveStream implements AsyncIterable<TrackedEnvelope<StreamEvent>> {
  constructor(readonly subscription: LiveSubscription) {}

  /** The events as tRPC tracked envelopes. */
  [Symbol.asyncIterator](): AsyncIterator<TrackedEnvelope<StreamEvent>> {
    const { subscription } = this;
    const queue = queuedIterator<TrackedEnvelope<StreamEvent>>(() => subscription.close());
    // Closed by the abort signal, by `return`, or on failure.
    subscription.onClose(queue.end);
    subscription.attach({
      event: (position, event) => queue.push(tracked(position, event)),
      end: queue.end,
      fail: queue.fail,
    });
    return queue.iterator;
  }
}

/** A live subscription as a subscription procedure's answer (`await` the service's promise first). */
export const trackedStream = (subscription: LiveSubscription): TrackedLiveStream => new TrackedLiveStream(subscription);

/** What a `presence.onUsers` procedure returns: the watch, iterable as tRPC expects (not resumable: no ids). */
export class PresenceStream implements AsyncIterable<PresenceChanged> {
  constructor(readonly watch: PresenceWatch) {}

  [Symbol.asyncIterator](): AsyncIterator<PresenceChanged> {
    const { watch } = this;
    const queue = queuedIterator<PresenceChanged>(() => watch.close());
    watch.onClose(queue.end);
    watch.attach({ event: queue.push, fail: queue.fail });
    return queue.iterator;
  }
}

/** A live stream of either kind: what the doors watch (its credential, the SSE connection's presence). */
export function liveStreamOf(value: unknown): Pick<PresenceWatch, "onClose" | "fail" | "close"> | undefined {
  if (value instanceof TrackedLiveStream) return value.subscription;
  if (value instanceof PresenceStream) return value.watch;
  return undefined;
}
