// Request throttling (contract, "Throttling (429)") with rate-limiter-flexible: counters live
// in Redis when it is configured, so every server process shares them; in memory otherwise.
// When Redis is down (or slower than REDIS_THROTTLE_TIMEOUT_MS), each process counts in memory
// instead (the insurance limiter): a throttled endpoint keeps answering as usual, with limits
// per process until Redis is back, rather than failing or waiting for Redis.
import type { Redis } from "ioredis";
import {
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  RLWrapperTimeouts,
  type RateLimiterAbstract,
} from "rate-limiter-flexible";
import { throttled } from "../errors.ts";

/** How long a throttle check waits for Redis before counting in memory instead. */
export const REDIS_THROTTLE_TIMEOUT_MS = 500;

export const THROTTLE_RULES = {
  /** 5 sign-in tries a minute per e-mail + IP. */
  login: { points: 5, durationSeconds: 60 },
  /** 3 one-time-code requests a minute per e-mail. */
  otp: { points: 3, durationSeconds: 60 },
  /** 3 password-reset mails a minute per e-mail. */
  passwordReset: { points: 3, durationSeconds: 60 },
  /** 30 public invite previews a minute per IP. */
  invitePreview: { points: 30, durationSeconds: 60 },
  /** 5 tries of a workspace's password a minute per user + workspace. */
  workspacePassword: { points: 5, durationSeconds: 60 },
  /** 5 tries of a channel's password a minute per user + channel. */
  channelPassword: { points: 5, durationSeconds: 60 },
  /** 5 tries of the current password (password change) a minute per user. */
  changePassword: { points: 5, durationSeconds: 60 },
} as const;

/** Inbound webhook requests per workspace per hour (WEBHOOK_QUOTA_PER_HOUR), rejected ones too. */
const webhookQuotaRule = (perHour: number) => ({ points: perHour, durationSeconds: 3600 });

export type ThrottleBucket = keyof typeof THROTTLE_RULES | "webhookQuota";
type ThrottleRule = { points: number; durationSeconds: number };

export type ThrottleState = { limit: number; remaining: number };

/**
 * One attempt counted, as data: the limit, the attempts left, and the seconds until the count
 * starts over. `exceeded`: this attempt was over the limit (and was refused).
 */
export type RateResult = { limit: number; remaining: number; resetSeconds: number; exceeded: boolean };

export interface Throttle {
  /** Counts one attempt; throws a 429 AppError (with Retry-After) once the limit is spent. */
  hit(bucket: ThrottleBucket, key: string): Promise<ThrottleState>;
  /** Counts one attempt and says how it went; never throws for an exceeded limit. */
  take(bucket: ThrottleBucket, key: string): Promise<RateResult>;
  reset(bucket: ThrottleBucket, key: string): Promise<void>;
}

export function createThrottle(options: {
  redis: Redis | undefined;
  prefix: string;
  webhookQuotaPerHour: number;
}): Throttle {
  const rules: Record<ThrottleBucket, ThrottleRule> = {
    ...THROTTLE_RULES,
    webhookQuota: webhookQuotaRule(options.webhookQuotaPerHour),
  };
  const limiters = new Map<ThrottleBucket, RateLimiterAbstract>();
  /** With Redis: each bucket's in-memory stand-in while Redis is away. */
  const insurances = new Map<ThrottleBucket, RateLimiterMemory>();
  for (const [bucket, rule] of Object.entries(rules) as [ThrottleBucket, ThrottleRule][]) {
    const common = {
      keyPrefix: `${options.prefix}:throttle:${bucket}`,
      points: rule.points,
      duration: rule.durationSeconds,
    };
    if (!options.redis) {
      limiters.set(bucket, new RateLimiterMemory(common));
      continue;
    }
    const insuranceLimiter = new RateLimiterMemory(common);
    insurances.set(bucket, insuranceLimiter);
    // rejectIfRedisNotReady: while ioredis is reconnecting, fail at once (to the insurance)
    // instead of queueing the command until Redis answers or the client gives up; the timeout
    // covers a Redis that is connected but does not answer.
    const redisLimiter = new RateLimiterRedis({ ...common, storeClient: options.redis, rejectIfRedisNotReady: true });
    limiters.set(
      bucket,
      new RLWrapperTimeouts({ limiter: redisLimiter, timeoutMs: REDIS_THROTTLE_TIMEOUT_MS, insuranceLimiter }),
    );
  }
  const limiterFor = (bucket: ThrottleBucket) => limiters.get(bucket)!;
  const { redis } = options;

  const take = async (bucket: ThrottleBucket, key: string): Promise<RateResult> => {
    const limit = rules[bucket].points;
    try {
      const result = await limiterFor(bucket).consume(key);
      return { limit, remaining: result.remainingPoints, resetSeconds: seconds(result), exceeded: false };
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes)
        return { limit, remaining: 0, resetSeconds: seconds(rejection), exceeded: true };
      throw rejection;
    }
  };

  return {
    async hit(bucket, key) {
      const result = await take(bucket, key);
      if (result.exceeded) throw throttled(result.resetSeconds);
      return { limit: result.limit, remaining: result.remaining };
    },
    take,
    async reset(bucket, key) {
      // rejectIfRedisNotReady does not cover deletes: while Redis is away, clear the in-memory
      // count only, rather than wait REDIS_THROTTLE_TIMEOUT_MS for Redis first.
      if (redis && redis.status !== "ready") await insurances.get(bucket)!.delete(key);
      else await limiterFor(bucket).delete(key);
    },
  };
}

/** Whole seconds until the count starts over, at least 1 (the Retry-After of a 429). */
const seconds = (result: RateLimiterRes) => Math.max(1, Math.ceil(result.msBeforeNext / 1000));
