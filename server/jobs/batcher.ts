// Gathers the jobs of one kind that a process is running, so that they share their database
// round trips (and, for translation, provider requests). A job goes at once when fewer than
// `atOnce` batches are running; otherwise it waits for the next batch (with up to `batchSize`
// others) and resolves or fails with it. Alone, a job goes at once; under load, jobs go together.
// Used by the translation and outbound-webhook queues, whose jobs are stable per record, so a
// batch that fails is retried job by job by the queue.
export class Batcher<Item> {
  private waiting: { item: Item; settle: (error?: unknown) => void }[] = [];
  private running = 0;
  /** Items of the batches running now. */
  private runningItems = 0;

  constructor(
    private readonly run: (items: Item[]) => Promise<void>,
    /**
     * `inFlight`: the most items the running batches hold together (what a process that dies
     * leaves half done); a batch then takes only what fits.
     */
    private readonly options: { batchSize: number; atOnce: number; inFlight?: number },
  ) {}

  /** Resolves when the item's batch is done. */
  add(item: Item): Promise<void> {
    return this.addAll([item]);
  }

  /** Several items that arrived together: they go in the same batch (up to `batchSize`). Resolves when all are done. */
  async addAll(items: Item[]): Promise<void> {
    const settled = items.map(
      (item) =>
        new Promise<void>((resolve, reject) => {
          this.waiting.push({ item, settle: (error) => (error === undefined ? resolve() : reject(error)) });
        }),
    );
    this.next();
    await Promise.all(settled);
  }

  private next(): void {
    if (this.running >= this.options.atOnce || this.waiting.length === 0) return;
    const room = Math.min(this.options.batchSize, (this.options.inFlight ?? Infinity) - this.runningItems);
    if (room <= 0) return;
    const batch = this.waiting.splice(0, room);
    this.running++;
    this.runningItems += batch.length;
    this.run(batch.map((job) => job.item))
      .then(
        () => batch.forEach((job) => job.settle()),
        (error: unknown) => batch.forEach((job) => job.settle(error ?? new Error("batch failed"))),
      )
      .finally(() => {
        this.running--;
        this.runningItems -= batch.length;
        this.next();
      });
  }
}
