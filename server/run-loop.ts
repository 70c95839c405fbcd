// One run at a time of a batch job that is asked for often (after every commit) and by timers:
// requests made while a run is going make it run again once it ends, never twice at once, and
// requests made in the same turn of the event loop share one run. Used by the event relay and
// the job outbox.
import { detached } from "../db/statement-count.ts";

export class RunLoop {
  /** A run was asked for since the current one started. */
  private pending = false;
  private loop: Promise<void> | undefined;
  /** When the last run started (performance.now()). */
  private lastStart = -Infinity;

  /**
   * @param runOnce one batch; true when there may be more right away (a full batch). It
   *   handles its own errors: false stops the loop until the next request.
   * @param enabled runs happen only while this holds (the relay's leadership, the outbox open).
   * @param minIntervalMs a run starts at least this long after the one before it: requests that
   *   come faster wait and share the next run, so a busy loop works in larger batches, while one
   *   asked for after a quiet spell runs at once.
   */
  constructor(
    private readonly runOnce: () => Promise<boolean>,
    private readonly enabled: () => boolean,
    private readonly minIntervalMs = 0,
  ) {}

  request(): void {
    this.pending = true;
    if (this.loop) return;
    // Detached: the runs are nobody's, not the request's that woke them (setImmediate and the
    // promise callbacks would otherwise carry its statement scope).
    this.loop = detached(() =>
      new Promise<void>((resolve) => setImmediate(resolve))
        .then(() => this.drain())
        .finally(() => {
          this.loop = undefined;
          if (this.pending && this.enabled()) this.request();
        }),
    );
  }

  /** Resolves once no run is going (after the ones asked for so far). */
  async idle(): Promise<void> {
    while (this.loop) await this.loop;
  }

  private async drain(): Promise<void> {
    while (this.pending && this.enabled()) {
      const wait = this.lastStart + this.minIntervalMs - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      this.lastStart = performance.now();
      this.pending = false;
      if (await this.runOnce()) this.pending = true;
    }
  }
}
