// Request throttling (contract, "Throttling (429)") with rate-limiter-flexible: counters live
// in Redis when it is configured, so every server process shares them; in memory otherwise.
import type { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import { throttled } from "../errors.ts";

export const THROTTLE_RULES = {
  /** 5 sign-in tries a minute per e-mail + IP. */
  login: { points: 5, durationSeconds: 60 },
  /** 3 one-time-code requests a minute per e-mail. */
  otp: { points: 3, durationSeconds: 60 },
  /** 3 password-reset mails a minute per e-mail. */
  passwordReset: { points: 3, durationSeconds: 60 },
  /** 30 public invite previews a minute per IP. */
  invitePreview: { points: 30, durationSeconds: 60 },
} as const;

export type ThrottleBucket = keyof typeof THROTTLE_RULES;

export type ThrottleState = { limit: number; remaining: number };

export interface Throttle {
  /** Counts one attempt; throws a 429 AppError (with Retry-After) once the limit is spent. */
  hit(bucket: ThrottleBucket, key: string): Promise<ThrottleState>;
  reset(bucket: ThrottleBucket, key: string): Promise<void>;
}

export function createThrottle(options: { redis: Redis | undefined; prefix: string }): Throttle {
  const limiters = new Map<ThrottleBucket, RateLimiterAbstract>();
  for (const [bucket, rule] of Object.entries(THROTTLE_RULES) as [
    ThrottleBucket,
    (typeof THROTTLE_RULES)[ThrottleBucket],
  ][]) {
    const common = {
      keyPrefix: `${options.prefix}:throttle:${bucket}`,
      points: rule.points,
      duration: rule.durationSeconds,
    };
    limiters.set(
      bucket,
      options.redis ? new RateLimiterRedis({ ...common, storeClient: options.redis }) : new RateLimiterMemory(common),
    );
  }
  const limiterFor = (bucket: ThrottleBucket) => limiters.get(bucket)!;

  return {
    async hit(bucket, key) {
      const limit = THROTTLE_RULES[bucket].points;
      try {
        const result = await limiterFor(bucket).consume(key);
        return { limit, remaining: result.remainingPoints };
      } catch (rejection) {
        if (rejection instanceof RateLimiterRes) throw throttled(rejection.msBeforeNext / 1000);
        throw rejection;
      }
    },
    async reset(bucket, key) {
      await limiterFor(bucket).delete(key);
    },
  };
}
