// Turns a bus topic into an async iterable for a tRPC subscription: subscribe first, then
// yield each message as it arrives, until the client goes away.
import type { EventBus } from "./bus.ts";

export async function* topicMessages(
  bus: EventBus,
  topic: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<unknown> {
  const pending: unknown[] = [];
  let wake: (() => void) | undefined;
  const unsubscribe = await bus.subscribe(topic, (message) => {
    pending.push(message);
    wake?.();
  });
  const aborted = new Promise<void>((resolve) => signal?.addEventListener("abort", () => resolve(), { once: true }));
  try {
    while (!signal?.aborted) {
      const next = pending.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      await Promise.race([new Promise<void>((resolve) => (wake = resolve)), aborted]);
      wake = undefined;
    }
  } finally {
    unsubscribe();
  }
}
