// The batcher (server/jobs/batcher.ts): jobs that arrive while batches run go together; with
// `inFlight`, the running batches never hold more items than that (the outbound worker's bound
// on what a worker that dies may send again).
import { describe, expect, it } from "vitest";
import { Batcher } from "../server/jobs/batcher.ts";

describe("the batcher", () => {
  it("runs at most `inFlight` items at once, in batches of at most `batchSize`, and settles every item", async () => {
    const batches: number[][] = [];
    let running = 0;
    let most = 0;
    const batcher = new Batcher<number>(
      async (items) => {
        batches.push(items);
        running += items.length;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 5));
        running -= items.length;
      },
      { batchSize: 100, atOnce: 4, inFlight: 50 },
    );
    const items = Array.from({ length: 230 }, (_, index) => index);
    // As the outbound worker gets them: jobs of 100 items, and single ones.
    await Promise.all([
      batcher.addAll(items.slice(0, 100)),
      batcher.addAll(items.slice(100, 200)),
      ...items.slice(200).map((item) => batcher.add(item)),
    ]);
    expect(most).toBe(50);
    expect(batches.every((batch) => batch.length <= 50)).toBe(true);
    expect(batches.flat().sort((a, b) => a - b)).toEqual(items);
  });

  it("without `inFlight`, a batch takes up to `batchSize` items", async () => {
    const batches: number[][] = [];
    const batcher = new Batcher<number>(async (items) => void batches.push(items), { batchSize: 100, atOnce: 1 });
    await batcher.addAll(Array.from({ length: 150 }, (_, index) => index));
    expect(batches.map((batch) => batch.length)).toEqual([100, 50]);
  });
});
