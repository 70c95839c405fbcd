// The sign-ins HTTP requests are served from memory (server/services/accounts/credential-watch.ts):
// how long one is kept, what forgets it, and that nothing is kept or used while the bus is away.
// The doors' side (a rename, a logout, a password change seen at once; two processes) is in
// test/tokens-and-sessions.test.ts and test/revocation.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import type { Database } from "../db/client.ts";
import type { AccessToken, User } from "../db/schema/index.ts";
import { ManualClock } from "../server/clock.ts";
import { InProcessEventBus, type BusMessage, type EventBus, type Listener } from "../server/events/bus.ts";
import { streams } from "../server/events/streams.ts";
import { createLogger } from "../server/logger.ts";
import { CredentialWatch, SIGN_IN_MEMORY_MS, type SignIn } from "../server/services/accounts/credential-watch.ts";

/** An in-process bus whose connection a test can drop and bring back. */
class DroppableBus implements EventBus {
  private readonly inner = new InProcessEventBus();
  private listening = true;
  private readonly dropped = new Set<() => void>();
  private readonly back = new Set<() => void>();
  publish(topic: string, message: unknown): Promise<void> {
    return this.inner.publish(topic, message);
  }
  publishAll(messages: readonly BusMessage[]) {
    return this.inner.publishAll(messages);
  }
  subscribe(topic: string, listener: Listener): Promise<void> {
    return this.inner.subscribe(topic, listener);
  }
  unsubscribe(topic: string, listener: Listener): void {
    this.inner.unsubscribe(topic, listener);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  isListening(): boolean {
    return this.listening;
  }
  onDisconnected(listener: () => void): () => void {
    this.dropped.add(listener);
    return () => this.dropped.delete(listener);
  }
  onResubscribed(listener: () => void): () => void {
    this.back.add(listener);
    return () => this.back.delete(listener);
  }
  drop(): void {
    this.listening = false;
    for (const listener of this.dropped) listener();
  }
  reconnect(): void {
    this.listening = true;
    for (const listener of this.back) listener();
  }
}

function signInOf(userId: number, tokenId: string, expiresAt: Date | null = null): SignIn {
  return {
    token: { id: tokenId, userId, expiresAt } as AccessToken,
    user: { id: userId, name: `user ${userId}` } as User,
  };
}

/** A lookup that counts its calls and answers `signIn`. */
function lookUpAnswering(signIn: SignIn | null) {
  const lookUp = async () => {
    lookUp.calls++;
    return signIn;
  };
  lookUp.calls = 0;
  return lookUp;
}

const watches: CredentialWatch[] = [];
afterEach(() => {
  for (const watch of watches.splice(0)) watch.close();
});

async function startWatch() {
  const clock = new ManualClock();
  const events = new DroppableBus();
  // No held connection is re-checked here, so the database is never asked.
  const watch = new CredentialWatch({
    db: undefined as unknown as Database,
    clock,
    logger: createLogger("silent"),
    events,
  });
  await watch.start();
  watches.push(watch);
  return { watch, clock, events };
}

describe("sign-ins of HTTP requests served from memory", () => {
  it("serves a token's sign-in without a lookup for SIGN_IN_MEMORY_MS, then looks it up again", async () => {
    const { watch, clock } = await startWatch();
    const lookUp = lookUpAnswering(signInOf(1, "t1"));
    const first = await watch.signInRequest("chat_a", lookUp);
    expect(await watch.signInRequest("chat_a", lookUp)).toBe(first);
    // The manual clock also moves with real time: a margin for the test's own milliseconds.
    clock.advance(SIGN_IN_MEMORY_MS - 200);
    await watch.signInRequest("chat_a", lookUp);
    expect(lookUp.calls).toBe(1);
    clock.advance(200);
    await watch.signInRequest("chat_a", lookUp);
    expect(lookUp.calls).toBe(2);
  });

  it("keeps each token apart, and never keeps a refusal", async () => {
    const { watch } = await startWatch();
    const other = lookUpAnswering(signInOf(2, "t2"));
    const refused = lookUpAnswering(null);
    expect(await watch.signInRequest("chat_unknown", refused)).toBeNull();
    expect(await watch.signInRequest("chat_unknown", refused)).toBeNull();
    expect(refused.calls).toBe(2);
    expect((await watch.signInRequest("chat_b", other))?.user.id).toBe(2);
    expect(other.calls).toBe(1);
  });

  it("does not serve a sign-in past its token's expiry", async () => {
    const { watch, clock } = await startWatch();
    const lookUp = lookUpAnswering(signInOf(1, "t1", new Date(clock.now().getTime() + 1_000)));
    await watch.signInRequest("chat_a", lookUp);
    clock.advance(800);
    await watch.signInRequest("chat_a", lookUp);
    expect(lookUp.calls).toBe(1);
    clock.advance(200);
    await watch.signInRequest("chat_a", lookUp);
    expect(lookUp.calls).toBe(2);
  });

  it("forgets the sign-ins of a user whose change committed here, and only theirs", async () => {
    const { watch } = await startWatch();
    const mine = lookUpAnswering(signInOf(1, "t1"));
    const theirs = lookUpAnswering(signInOf(2, "t2"));
    await watch.signInRequest("chat_a", mine);
    await watch.signInRequest("chat_b", theirs);
    watch.forgetSignIns([1]);
    await watch.signInRequest("chat_a", mine);
    await watch.signInRequest("chat_b", theirs);
    expect([mine.calls, theirs.calls]).toEqual([2, 1]);
  });

  it("forgets every token of the user, requests' and connections' sign-ins, and keeps the others'", async () => {
    const { watch } = await startWatch();
    const requests = [signInOf(1, "t1"), signInOf(1, "t1b"), signInOf(2, "t2")].map(lookUpAnswering);
    const connections = [signInOf(1, "t1c"), signInOf(2, "t2c")].map((signIn) => {
      const lookUp = async () => {
        lookUp.calls++;
        return { userId: signIn.user.id, tokenId: signIn.token.id, expiresAt: null };
      };
      lookUp.calls = 0;
      return lookUp;
    });
    const signInAll = async () => {
      for (const [index, lookUp] of requests.entries()) await watch.signInRequest(`chat_r${index}`, lookUp);
      for (const [index, lookUp] of connections.entries())
        (await watch.signInConnection(`chat_c${index}`, lookUp))?.release();
    };
    await signInAll();
    await signInAll();
    expect([...requests, ...connections].map((lookUp) => lookUp.calls)).toEqual([1, 1, 1, 1, 1]);
    watch.forgetSignIns([1]);
    await signInAll();
    expect([...requests, ...connections].map((lookUp) => lookUp.calls)).toEqual([2, 2, 1, 2, 1]);
    // Forgotten again after being kept again: what the user has now is what goes.
    watch.forgetSignIns([1, 2]);
    await signInAll();
    expect([...requests, ...connections].map((lookUp) => lookUp.calls)).toEqual([3, 3, 2, 3, 2]);
  });

  it("forgets a user's sign-ins when another process's change reaches it over the bus", async () => {
    const { watch, events } = await startWatch();
    const lookUp = lookUpAnswering(signInOf(7, "t7"));
    await watch.signInRequest("chat_a", lookUp);
    await events.publish(streams.sessions, { event: { type: "user.changed", data: { user_id: 7 } } });
    await watch.signInRequest("chat_a", lookUp);
    await events.publish(streams.sessions, { event: { type: "session.revoked", data: { user_id: 7 } } });
    await watch.signInRequest("chat_a", lookUp);
    expect(lookUp.calls).toBe(3);
  });

  it("does not keep a lookup that a change overtook (it may have read the old row)", async () => {
    const { watch } = await startWatch();
    let answer!: (signIn: SignIn) => void;
    const slow = watch.signInRequest("chat_a", () => new Promise<SignIn>((resolve) => (answer = resolve)));
    watch.forgetSignIns([1]);
    answer(signInOf(1, "t1"));
    expect((await slow)?.user.id).toBe(1);
    const lookUp = lookUpAnswering(signInOf(1, "t1"));
    await watch.signInRequest("chat_a", lookUp);
    expect(lookUp.calls).toBe(1);
  });

  it("looks every token up while the bus is away, and keeps nothing from before it left", async () => {
    const { watch, events } = await startWatch();
    const lookUp = lookUpAnswering(signInOf(1, "t1"));
    await watch.signInRequest("chat_a", lookUp);
    events.drop();
    await watch.signInRequest("chat_a", lookUp);
    await watch.signInRequest("chat_a", lookUp);
    expect(lookUp.calls).toBe(3);
    events.reconnect();
    await watch.signInRequest("chat_a", lookUp);
    await watch.signInRequest("chat_a", lookUp);
    expect(lookUp.calls).toBe(4);
  });
});
