// The relay's batch loop (server/run-loop.ts): requests that come faster than its minimum
// interval share the next run, and a request after a quiet spell runs at once.
import { expect, it } from "vitest";
import { RunLoop } from "../server/run-loop.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it("gathers requests that come within the minimum interval into one later run, and runs at once after a quiet spell", async () => {
  const INTERVAL_MS = 1_000;
  const starts: number[] = [];
  const loop = new RunLoop(
    async () => {
      starts.push(performance.now());
      return false;
    },
    () => true,
    INTERVAL_MS,
  );

  const first = performance.now();
  loop.request();
  await sleep(20);
  expect(starts).toHaveLength(1);
  expect(starts[0]! - first).toBeLessThan(INTERVAL_MS / 2);

  // Three requests right after the first run: one run, not before the interval has passed.
  for (let i = 0; i < 3; i++) {
    loop.request();
    await sleep(10);
  }
  await loop.idle();
  expect(starts).toHaveLength(2);
  // (A timer may fire a millisecond early against performance.now(): a margin, not a measure.)
  expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(INTERVAL_MS - 10);

  // After a quiet spell longer than the interval, a request runs at once.
  await sleep(INTERVAL_MS + 50);
  const late = performance.now();
  loop.request();
  await loop.idle();
  expect(starts).toHaveLength(3);
  expect(starts[2]! - late).toBeLessThan(INTERVAL_MS / 2);
});

it("without an interval, runs again as soon as the run before it ends", async () => {
  const starts: number[] = [];
  const loop = new RunLoop(
    async () => {
      starts.push(performance.now());
      await sleep(5);
      return false;
    },
    () => true,
  );
  loop.request();
  // Requests made before the run starts share it: ask again once it is running.
  while (starts.length === 0) await sleep(1);
  loop.request();
  await loop.idle();
  expect(starts).toHaveLength(2);
  expect(starts[1]! - starts[0]!).toBeLessThan(100);
});
