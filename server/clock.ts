// Time comes from one place so that tests can move it (expiry of codes, rooms, sessions)
// without sleeping. The server uses the system clock; tests may pass a ManualClock.
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export class ManualClock implements Clock {
  private offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
  advance(milliseconds: number): void {
    this.offsetMs += milliseconds;
  }
}

/** ISO 8601 with an explicit UTC offset, as the contract asks ("…+00:00"). */
export function isoTimestamp(date: Date): string;
export function isoTimestamp(date: Date | null): string | null;
export function isoTimestamp(date: Date | null): string | null {
  return date === null ? null : date.toISOString().replace("Z", "+00:00");
}
