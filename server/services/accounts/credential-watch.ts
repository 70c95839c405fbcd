// Long-lived uses of a credential (a WebSocket connection, a live subscription over WebSocket or
// SSE) end when it stops signing its user in, as REST answers 401 from that moment. Every
// revocation (logout, token deleted, password changed or reset, user deactivated) writes a
// `session.revoked` event in its transaction; the relay publishes it to every server process,
// and each re-checks the tokens its live connections hold for that user: one query per
// revocation, nothing per delivered event. After the bus reconnects, every held token is
// re-checked (a revocation may have been published meanwhile), and a session token that expires
// is let go at its expiry.
//
// It also remembers the sign-in of a live connection for a few seconds after the connection
// closes (RECONNECT_MS): a client that drops and reconnects (a phone changing networks) signs in
// again without a query. Until that connection closed, a revocation would have closed it; after,
// a revocation forgets the user's remembered sign-ins on every process (the same event), and
// while the bus is away nothing is remembered or used.
import type { Database } from "../../../db/client.ts";
import type { Clock } from "../../clock.ts";
import type { Logger } from "../../logger.ts";
import type { EventBus } from "../../events/bus.ts";
import { streams, type BusEvent } from "../../events/streams.ts";
import type { AccessToken, User } from "../../../db/schema/index.ts";
import { hashToken, liveTokenIds } from "./tokens.ts";

export type Credential = { userId: number; tokenId: string; expiresAt: Date | null };

/** A token's sign-in, as the token lookup answers it. */
export type SignIn = { token: AccessToken; user: User };

/** How long after a live connection closed its sign-in is remembered for a reconnect. */
export const RECONNECT_MS = 5_000;

type Holder = { credential: Credential; onRevoked: () => void; expiry?: NodeJS.Timeout };

/** setTimeout's longest delay; a later expiry is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class CredentialWatch {
  private readonly holders = new Set<Holder>();
  private readonly cleanups: (() => void)[] = [];
  /** Recent sign-ins of live connections, by token hash, until a time (ms). */
  private readonly recent = new Map<string, { signIn: SignIn; until: number }>();
  /** The token hash of each remembered sign-in, by token id. */
  private readonly recentHashes = new Map<string, string>();

  constructor(private readonly deps: { db: Database; clock: Clock; logger: Logger; events: EventBus }) {}

  async start(): Promise<void> {
    this.cleanups.push(
      await this.deps.events.subscribe(streams.sessions, (message) => {
        const { event } = message as BusEvent;
        const userId = (event.data as { user_id?: unknown }).user_id;
        if (typeof userId !== "number") return;
        for (const [hash, entry] of this.recent) if (entry.signIn.user.id === userId) this.forget(hash);
        void this.recheck((holder) => holder.credential.userId === userId);
      }),
      this.deps.events.onResubscribed(() => {
        this.recent.clear();
        this.recentHashes.clear();
        void this.recheck(() => true);
      }),
    );
  }

  /**
   * A live connection's sign-in with `plaintext`: remembered from a connection of the same token
   * that closed less than RECONNECT_MS ago (or signed in as recently), else `lookUp`.
   */
  async signInConnection(plaintext: string, lookUp: () => Promise<SignIn | null>): Promise<SignIn | null> {
    if (!this.deps.events.isListening()) return lookUp();
    const now = this.deps.clock.now().getTime();
    const hash = hashToken(plaintext);
    const entry = this.recent.get(hash);
    const expiresAt = entry?.signIn.token.expiresAt;
    if (entry && entry.until > now && (!expiresAt || expiresAt.getTime() > now)) return entry.signIn;
    const signIn = await lookUp();
    if (signIn && this.deps.events.isListening()) {
      this.forgetOld(now);
      this.recent.set(hash, { signIn, until: now + RECONNECT_MS });
      this.recentHashes.set(signIn.token.id, hash);
    }
    return signIn;
  }

  /** A live connection signed in with this token closed: its sign-in is remembered a little longer. */
  connectionClosed(tokenId: string): void {
    const hash = this.recentHashes.get(tokenId);
    const entry = hash === undefined ? undefined : this.recent.get(hash);
    if (entry) entry.until = this.deps.clock.now().getTime() + RECONNECT_MS;
  }

  private forget(hash: string): void {
    const entry = this.recent.get(hash);
    if (!entry) return;
    this.recent.delete(hash);
    this.recentHashes.delete(entry.signIn.token.id);
  }

  private forgetOld(now: number): void {
    if (this.recent.size < 1_000) return;
    for (const [hash, entry] of this.recent) if (entry.until <= now) this.forget(hash);
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
    this.recent.clear();
    this.recentHashes.clear();
    for (const cleanup of this.cleanups.splice(0)) cleanup();
    for (const holder of this.holders) clearTimeout(holder.expiry);
    this.holders.clear();
  }
}
