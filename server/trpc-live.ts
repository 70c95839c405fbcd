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

/** What a subscription procedure returns for a live subscription: the subscription, iterable as tRPC expects. */
export class TrackedLiveStream implements AsyncIterable<TrackedEnvelope<StreamEvent>> {
  constructor(readonly subscription: LiveSubscription) {}

  /** The events as tRPC tracked envelopes, with a queue in front of the subscription's sink. */
  [Symbol.asyncIterator](): AsyncIterator<TrackedEnvelope<StreamEvent>> {
    const { subscription } = this;
    const items: TrackedEnvelope<StreamEvent>[] = [];
    let ended = false;
    let closed = false;
    let failure: { error: unknown } | undefined;
    let wake: (() => void) | undefined;
    // Closed by the abort signal, by `return`, or on failure: a waiting `next` looks again.
    subscription.onClose(() => {
      closed = true;
      wake?.();
    });
    subscription.attach({
      event: (position, event) => {
        items.push(tracked(position, event));
        wake?.();
      },
      end: () => {
        ended = true;
        wake?.();
      },
      fail: (error) => {
        failure = { error: toTRPCError(error) };
        wake?.();
      },
    });
    return {
      next: async () => {
        for (;;) {
          const item = items.shift();
          if (item) return { value: item, done: false };
          if (failure) throw failure.error;
          if (ended || closed) return { value: undefined, done: true };
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
        }
      },
      return: async () => {
        subscription.close();
        return { value: undefined, done: true };
      },
    };
  }
}

/** A live subscription as a subscription procedure's answer (`await` the service's promise first). */
export const trackedStream = (subscription: LiveSubscription): TrackedLiveStream => new TrackedLiveStream(subscription);

/** What a `presence.onUsers` procedure returns: the watch, iterable as tRPC expects (not resumable: no ids). */
export class PresenceStream implements AsyncIterable<PresenceChanged> {
  constructor(readonly watch: PresenceWatch) {}

  [Symbol.asyncIterator](): AsyncIterator<PresenceChanged> {
    const { watch } = this;
    const items: PresenceChanged[] = [];
    let closed = false;
    let failure: { error: unknown } | undefined;
    let wake: (() => void) | undefined;
    watch.onClose(() => {
      closed = true;
      wake?.();
    });
    watch.attach({
      event: (event) => {
        items.push(event);
        wake?.();
      },
      fail: (error) => {
        failure = { error: toTRPCError(error) };
        wake?.();
      },
    });
    return {
      next: async () => {
        for (;;) {
          const item = items.shift();
          if (item) return { value: item, done: false };
          if (failure) throw failure.error;
          if (closed) return { value: undefined, done: true };
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
        }
      },
      return: async () => {
        watch.close();
        return { value: undefined, done: true };
      },
    };
  }
}

/** A live stream of either kind: what the doors watch (its credential, the SSE connection's presence). */
export function liveStreamOf(value: unknown): Pick<PresenceWatch, "onClose" | "fail" | "close"> | undefined {
  if (value instanceof TrackedLiveStream) return value.subscription;
  if (value instanceof PresenceStream) return value.watch;
  return undefined;
}
