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
//
// And it serves the sign-ins of HTTP requests (REST, tRPC over HTTP, SSE) from memory for a few
// seconds (SIGN_IN_MEMORY_MS), so that a client's next request needs no token lookup. What ends
// a token or changes its user writes an event on the sessions stream (`session.revoked`,
// `user.changed`): the writing process forgets the user's sign-ins at its commit (through
// writeWithEvents), every other one when the relay publishes the event; while the bus is away
// every request looks its token up. A request over a WebSocket connection always looks its token
// up: the connection is what is watched.
import type { Database } from "../../../db/client.ts";
import type { AccessToken, User } from "../../../db/schema/index.ts";
import type { Clock } from "../../clock.ts";
import type { Logger } from "../../logger.ts";
import { listen, type EventBus } from "../../events/bus.ts";
import { streams, type BusEvent } from "../../events/streams.ts";
import { hashToken, liveTokenIds } from "./tokens.ts";

export type Credential = { userId: number; tokenId: string; expiresAt: Date | null };

/** A request's sign-in: the token and its active user. */
export type SignIn = { token: AccessToken; user: User };

/** A live connection's sign-in: its credential, and what to call when the connection closes. */
export type ConnectionSignIn = { credential: Credential; release(): void };

/** A remembered sign-in: held by `holders` open connections, else remembered until `until` (ms). */
type Remembered = { hash: string; credential: Credential; holders: number; until: number };

/** How long after a live connection closed its sign-in is remembered for a reconnect. */
export const RECONNECT_MS = 5_000;

/** How long an HTTP request's sign-in is served from memory before its token is looked up again. */
export const SIGN_IN_MEMORY_MS = 3_000;

/** At most this many request sign-ins are kept; past it a lookup is not kept until the sweep. */
const MAX_SIGN_INS = 50_000;

type Holder = { credential: Credential; onRevoked: () => void; expiry?: NodeJS.Timeout };

/** setTimeout's longest delay; a later expiry is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A live connection's hold on a remembered sign-in, let go once by `release` (an object, not a closure, per connection). */
class HeldSignIn implements ConnectionSignIn {
  private open = true;
  constructor(
    private readonly entry: Remembered,
    private readonly letGo: (entry: Remembered) => void,
  ) {}

  get credential(): Credential {
    return this.entry.credential;
  }

  release(): void {
    if (!this.open) return;
    this.open = false;
    this.letGo(this.entry);
  }
}

/**
 * Sign-ins by token hash, also found by their user: a revocation or a change to a user (every
 * sign-in writes one) forgets that user's entries without going through everyone's.
 */
class SignInsByHash<Entry> {
  private readonly byHash = new Map<string, Entry>();
  private readonly hashesOfUser = new Map<number, Set<string>>();

  constructor(private readonly userOf: (entry: Entry) => number) {}

  get size(): number {
    return this.byHash.size;
  }

  get(hash: string): Entry | undefined {
    return this.byHash.get(hash);
  }

  set(hash: string, entry: Entry): void {
    this.delete(hash);
    this.byHash.set(hash, entry);
    const userId = this.userOf(entry);
    let hashes = this.hashesOfUser.get(userId);
    if (!hashes) this.hashesOfUser.set(userId, (hashes = new Set()));
    hashes.add(hash);
  }

  delete(hash: string): void {
    const entry = this.byHash.get(hash);
    if (entry === undefined) return;
    this.byHash.delete(hash);
    const userId = this.userOf(entry);
    const hashes = this.hashesOfUser.get(userId);
    hashes?.delete(hash);
    if (hashes?.size === 0) this.hashesOfUser.delete(userId);
  }

  deleteUser(userId: number): void {
    for (const hash of this.hashesOfUser.get(userId) ?? []) this.byHash.delete(hash);
    this.hashesOfUser.delete(userId);
  }

  entries(): IterableIterator<[string, Entry]> {
    return this.byHash.entries();
  }

  clear(): void {
    this.byHash.clear();
    this.hashesOfUser.clear();
  }
}

export class CredentialWatch {
  private readonly holders = new Set<Holder>();
  private readonly cleanups: (() => void)[] = [];
  /** Sign-ins of live connections, by token hash. */
  private readonly remembered = new SignInsByHash<Remembered>((entry) => entry.credential.userId);
  /** Sign-ins of HTTP requests, by token hash, each served until `until` (ms). */
  private readonly signIns = new SignInsByHash<{ signIn: SignIn; until: number }>((kept) => kept.signIn.user.id);
  /** Counts forgettings: a lookup that one overtook is not kept (it may have read the old row). */
  private generation = 0;
  private pruneTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: { db: Database; clock: Clock; logger: Logger; events: EventBus }) {}

  async start(): Promise<void> {
    const { events } = this.deps;
    const heard = (message: unknown) => {
      const { event } = message as BusEvent;
      // An internal event: `session.revoked` or `user.changed` (server/events/catalog.ts).
      const { type, data } = event as { type: string; data: { user_id?: unknown } };
      const userId = data.user_id;
      if (typeof userId !== "number") return;
      this.forgetSignIns([userId]);
      if (type === "session.revoked") void this.recheck((holder) => holder.credential.userId === userId);
    };
    this.cleanups.push(
      await listen(events, streams.sessions, heard),
      // Revocations published while the bus was away were missed: nothing remembered is kept.
      this.deps.events.onDisconnected(() => this.forgetAll()),
      this.deps.events.onResubscribed(() => {
        this.forgetAll();
        void this.recheck(() => true);
      }),
    );
  }

  /** Forgets the users' remembered sign-ins (a change to the user, or to their tokens, committed). */
  forgetSignIns(userIds: readonly number[]): void {
    this.generation++;
    for (const userId of userIds) {
      this.remembered.deleteUser(userId);
      this.signIns.deleteUser(userId);
    }
  }

  private forgetAll(): void {
    this.generation++;
    this.remembered.clear();
    this.signIns.clear();
  }

  /**
   * An HTTP request's sign-in with `plaintext`: the one served for the same token less than
   * SIGN_IN_MEMORY_MS ago (and before its expiry), else `lookUp`, kept when nothing that would
   * change it happened meanwhile and the bus listens.
   */
  async signInRequest(plaintext: string, lookUp: () => Promise<SignIn | null>): Promise<SignIn | null> {
    if (!this.deps.events.isListening()) return lookUp();
    const now = this.deps.clock.now().getTime();
    const hash = hashToken(plaintext);
    const kept = this.signIns.get(hash);
    if (kept && kept.until > now) return kept.signIn;
    const generation = this.generation;
    const signIn = await lookUp();
    if (!signIn || generation !== this.generation || !this.deps.events.isListening()) return signIn;
    if (this.signIns.size >= MAX_SIGN_INS) return signIn;
    const expiresAt = signIn.token.expiresAt?.getTime() ?? Number.POSITIVE_INFINITY;
    this.signIns.set(hash, { signIn, until: Math.min(now + SIGN_IN_MEMORY_MS, expiresAt) });
    this.sweepLater();
    return signIn;
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
      const generation = this.generation;
      const credential = await lookUp();
      if (!credential) return null;
      entry = { hash, credential, holders: 0, until: 0 };
      // Not while the bus is away, nor after a revocation that arrived during the lookup.
      if (this.deps.events.isListening() && generation === this.generation) this.remembered.set(hash, entry);
    }
    entry.holders++;
    return new HeldSignIn(entry, this.letGoOfEntry);
  }

  /** `letGo`, made once for every HeldSignIn. */
  private readonly letGoOfEntry = (entry: Remembered) => this.letGo(entry);

  /** A connection that held `entry` closed: the last one's sign-in is remembered for RECONNECT_MS. */
  private letGo(entry: Remembered): void {
    if (--entry.holders > 0) return;
    entry.until = this.deps.clock.now().getTime() + RECONNECT_MS;
    this.sweepLater();
  }

  private sweepLater(): void {
    this.pruneTimer ??= setInterval(() => this.forgetOld(), RECONNECT_MS).unref();
  }

  /** Forgets what is no longer held or remembered; the timer stops once nothing waits. */
  private forgetOld(): void {
    const now = this.deps.clock.now().getTime();
    let waiting = false;
    for (const [hash, entry] of this.remembered.entries()) {
      if (entry.holders > 0) continue;
      if (entry.until <= now) this.remembered.delete(hash);
      else waiting = true;
    }
    for (const [hash, kept] of this.signIns.entries()) {
      if (kept.until <= now) this.signIns.delete(hash);
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
    this.forgetAll();
    for (const cleanup of this.cleanups.splice(0)) cleanup();
    for (const holder of this.holders) clearTimeout(holder.expiry);
    this.holders.clear();
  }
}
