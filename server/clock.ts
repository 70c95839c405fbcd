// Time comes from one place so that tests can move it (expiry of codes, rooms, sessions)
// without sleeping. The server uses the system clock; tests may pass a ManualClock.
export interface Clock {
  now(): Date;
  /**
   * Calls `listener` when the clock jumps (a ManualClock moved by a test): timers set for a
   * time on this clock (a delayed job's run_at) are set again. The system clock never jumps.
   */
  onJump?(listener: () => void): void;
}

export const systemClock: Clock = { now: () => new Date() };

export class ManualClock implements Clock {
  private offsetMs = 0;
  private readonly listeners = new Set<() => void>();
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
  advance(milliseconds: number): void {
    this.offsetMs += milliseconds;
    for (const listener of this.listeners) listener();
  }
  onJump(listener: () => void): void {
    this.listeners.add(listener);
  }
}

/** ISO 8601 with an explicit UTC offset, as the contract asks ("…+00:00"). */
export function isoTimestamp(date: Date): string;
export function isoTimestamp(date: Date | null): string | null;
export function isoTimestamp(date: Date | null): string | null {
  return date === null ? null : date.toISOString().replace("Z", "+00:00");
}
