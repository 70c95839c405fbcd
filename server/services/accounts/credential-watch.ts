// Long-lived uses of a credential (a WebSocket connection, a live subscription over WebSocket or
// SSE) end when it stops signing its user in, as REST answers 401 from that moment. Every
// revocation (logout, token deleted, password changed or reset, user deactivated) writes a
// `session.revoked` event in its transaction; the relay publishes it to every server process,
// and each re-checks the tokens its live connections hold for that user: one query per
// revocation, nothing per delivered event. After the bus reconnects, every held token is
// re-checked (a revocation may have been published meanwhile), and a session token that expires
// is let go at its expiry.
import type { Database } from "../../../db/client.ts";
import type { Clock } from "../../clock.ts";
import type { Logger } from "../../logger.ts";
import type { EventBus } from "../../events/bus.ts";
import { streams, type BusEvent } from "../../events/streams.ts";
import { liveTokenIds } from "./tokens.ts";

export type Credential = { userId: number; tokenId: string; expiresAt: Date | null };

type Holder = { credential: Credential; onRevoked: () => void; expiry?: NodeJS.Timeout };

/** setTimeout's longest delay; a later expiry is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class CredentialWatch {
  private readonly holders = new Set<Holder>();
  private readonly cleanups: (() => void)[] = [];

  constructor(private readonly deps: { db: Database; clock: Clock; logger: Logger; events: EventBus }) {}

  async start(): Promise<void> {
    this.cleanups.push(
      await this.deps.events.subscribe(streams.sessions, (message) => {
        const { event } = message as BusEvent;
        const userId = (event.data as { user_id?: unknown }).user_id;
        if (typeof userId === "number") void this.recheck((holder) => holder.credential.userId === userId);
      }),
      this.deps.events.onResubscribed(() => void this.recheck(() => true)),
    );
  }

  /** Calls `onRevoked` (once) when the credential stops signing in; returns a function that stops watching. */
  track(credential: Credential, onRevoked: () => void): () => void {
    const holder: Holder = { credential, onRevoked };
    this.holders.add(holder);
    this.armExpiry(holder);
    return () => this.release(holder);
  }

  private armExpiry(holder: Holder): void {
    const { expiresAt } = holder.credential;
    if (!expiresAt) return;
    const delay = Math.min(Math.max(0, expiresAt.getTime() - this.deps.clock.now().getTime()), MAX_TIMER_MS);
    holder.expiry = setTimeout(() => void this.recheck((candidate) => candidate === holder), delay).unref();
  }

  private release(holder: Holder): void {
    clearTimeout(holder.expiry);
    this.holders.delete(holder);
  }

  /** Re-checks the held tokens that `which` selects; ends the uses of those that no longer sign in. */
  private async recheck(which: (holder: Holder) => boolean): Promise<void> {
    const selected = [...this.holders].filter(which);
    if (selected.length === 0) return;
    let live: Set<string>;
    try {
      live = await liveTokenIds(
        this.deps.db,
        [...new Set(selected.map((holder) => holder.credential.tokenId))],
        this.deps.clock.now(),
      );
    } catch (error) {
      this.deps.logger.warn({ err: error }, "could not re-check live credentials");
      return;
    }
    for (const holder of selected) {
      if (!this.holders.has(holder)) continue;
      if (live.has(holder.credential.tokenId)) {
        // Still valid: an expiry timer that fired early (longest delay) is armed again.
        if (holder.expiry && holder.credential.expiresAt) {
          clearTimeout(holder.expiry);
          this.armExpiry(holder);
        }
        continue;
      }
      this.release(holder);
      holder.onRevoked();
    }
  }

  close(): void {
    for (const cleanup of this.cleanups.splice(0)) cleanup();
    for (const holder of this.holders) clearTimeout(holder.expiry);
    this.holders.clear();
  }
}
