// Long-lived uses of a credential (a WebSocket connection, a live subscription over WebSocket or
// SSE) end when it stops signing its user in, as REST answers 401 from that moment. Every
// revocation (logout, token deleted, password changed or reset, user deactivated) writes a
// `session.revoked` event in its transaction; the relay publishes it to every server process,
// and each re-checks the tokens its live connections hold for that user: one query per
// revocation, nothing per delivered event. After the bus reconnects, every held token is
// re-checked (a revocation may have been published meanwhile), and a session token that expires
// is let go at its expiry.
//
// It also remembers the sign-in of a WebSocket connection (its token's credential) while a
// connection holds it and for a few seconds after the last one closed (RECONNECT_MS): a client
// that drops and reconnects (a phone changing networks) signs in again without a query. While a
// connection held it, a revocation would have closed that connection; a revocation also forgets
// the user's remembered sign-ins on every process (the same event), and while the bus is away
// nothing is remembered or used.
import type { Database } from "../../../db/client.ts";
import type { Clock } from "../../clock.ts";
import type { Logger } from "../../logger.ts";
import type { EventBus } from "../../events/bus.ts";
import { streams, type BusEvent } from "../../events/streams.ts";
import { hashToken, liveTokenIds } from "./tokens.ts";

export type Credential = { userId: number; tokenId: string; expiresAt: Date | null };

/** A live connection's sign-in: its credential, and what to call when the connection closes. */
export type ConnectionSignIn = { credential: Credential; release(): void };

/** A remembered sign-in: held by `holders` open connections, else remembered until `until` (ms). */
type Remembered = { hash: string; credential: Credential; holders: number; until: number };

/** How long after a live connection closed its sign-in is remembered for a reconnect. */
export const RECONNECT_MS = 5_000;

type Holder = { credential: Credential; onRevoked: () => void; expiry?: NodeJS.Timeout };

/** setTimeout's longest delay; a later expiry is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class CredentialWatch {
  private readonly holders = new Set<Holder>();
  private readonly cleanups: (() => void)[] = [];
  /** Sign-ins of live connections, by token hash. */
  private readonly remembered = new Map<string, Remembered>();
  private pruneTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: { db: Database; clock: Clock; logger: Logger; events: EventBus }) {}

  async start(): Promise<void> {
    this.cleanups.push(
      await this.deps.events.subscribe(streams.sessions, (message) => {
        const { event } = message as BusEvent;
        const userId = (event.data as { user_id?: unknown }).user_id;
        if (typeof userId !== "number") return;
        for (const [hash, entry] of this.remembered)
          if (entry.credential.userId === userId) this.remembered.delete(hash);
        void this.recheck((holder) => holder.credential.userId === userId);
      }),
      this.deps.events.onResubscribed(() => {
        this.remembered.clear();
        void this.recheck(() => true);
      }),
    );
  }

  /**
   * A live connection's sign-in with `plaintext`: the credential remembered from a connection of
   * the same token (open, or closed less than RECONNECT_MS ago), else `lookUp`. Call `release`
   * when the connection closes.
   */
  async signInConnection(
    plaintext: string,
    lookUp: () => Promise<Credential | null>,
  ): Promise<ConnectionSignIn | null> {
    if (!this.deps.events.isListening()) {
      const credential = await lookUp();
      return credential && { credential, release: () => {} };
    }
    const now = this.deps.clock.now().getTime();
    const hash = hashToken(plaintext);
    let entry = this.remembered.get(hash);
    const expiresAt = entry?.credential.expiresAt;
    if (!entry || (entry.holders === 0 && entry.until <= now) || (expiresAt && expiresAt.getTime() <= now)) {
      const credential = await lookUp();
      if (!credential) return null;
      entry = { hash, credential, holders: 0, until: 0 };
      // Not while the bus is away, nor after a revocation that arrived during the lookup.
      if (this.deps.events.isListening()) this.remembered.set(hash, entry);
    }
    entry.holders++;
    const held = entry;
    let open = true;
    return {
      credential: held.credential,
      release: () => {
        if (!open) return;
        open = false;
        if (--held.holders > 0) return;
        held.until = this.deps.clock.now().getTime() + RECONNECT_MS;
        this.pruneTimer ??= setInterval(() => this.forgetOld(), RECONNECT_MS).unref();
      },
    };
  }

  /** Forgets what is no longer held or remembered; the timer stops once nothing waits. */
  private forgetOld(): void {
    const now = this.deps.clock.now().getTime();
    let waiting = false;
    for (const [hash, entry] of this.remembered) {
      if (entry.holders > 0) continue;
      if (entry.until <= now) this.remembered.delete(hash);
      else waiting = true;
    }
    if (!waiting) {
      clearInterval(this.pruneTimer);
      this.pruneTimer = undefined;
    }
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
    clearInterval(this.pruneTimer);
    this.remembered.clear();
    for (const cleanup of this.cleanups.splice(0)) cleanup();
    for (const holder of this.holders) clearTimeout(holder.expiry);
    this.holders.clear();
  }
}
