// Values that live a few minutes and can be taken once (OAuth state and PKCE verifier):
// in Redis when it is configured (SET PX + GETDEL), in the database otherwise
// (DELETE … RETURNING). Either way, of two requests taking the same key, one gets it.
// The expiry is also checked against the service clock, so tests can move time.
// While Redis is away a command gives up within a second (the commands client's timeout,
// server/app.ts) and the request answers 503 (server/trpc-errors.ts): the values live nowhere else.
import { and, eq, gt, lt } from "drizzle-orm";
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { ephemeralEntries } from "../../db/schema/index.ts";
import type { Clock } from "../clock.ts";

export interface SingleUseStore {
  put(key: string, value: unknown, ttlMs: number): Promise<void>;
  /** The value, removed so nobody gets it again; undefined when unknown, taken or expired. */
  take(key: string): Promise<unknown>;
}

type Envelope = { value: unknown; expiresAt: number };

export function createSingleUseStore(options: {
  redis: Redis | undefined;
  prefix: string;
  db: Database;
  clock: Clock;
}): SingleUseStore {
  const { redis, db, clock } = options;
  if (redis) {
    const redisKey = (key: string) => `${options.prefix}:single-use:${key}`;
    return {
      async put(key, value, ttlMs) {
        const envelope: Envelope = { value, expiresAt: clock.now().getTime() + ttlMs };
        await redis.set(redisKey(key), JSON.stringify(envelope), "PX", ttlMs);
      },
      async take(key) {
        const raw = await redis.getdel(redisKey(key));
        if (!raw) return undefined;
        const envelope = JSON.parse(raw) as Envelope;
        return envelope.expiresAt > clock.now().getTime() ? envelope.value : undefined;
      },
    };
  }
  return {
    async put(key, value, ttlMs) {
      const now = clock.now();
      // Expired entries go when new ones come, so the table stays small without a sweeper.
      await db.delete(ephemeralEntries).where(lt(ephemeralEntries.expiresAt, now));
      await db.insert(ephemeralEntries).values({ key, value, expiresAt: new Date(now.getTime() + ttlMs) });
    },
    async take(key) {
      const [row] = await db
        .delete(ephemeralEntries)
        .where(and(eq(ephemeralEntries.key, key), gt(ephemeralEntries.expiresAt, clock.now())))
        .returning({ value: ephemeralEntries.value });
      return row?.value;
    },
  };
}
