import { Redis, type RedisOptions } from "ioredis";
import { oncePer, type Logger } from "./logger.ts";

/** The longest a request waits on a Redis command before it falls back or answers 503. */
export const REDIS_COMMAND_TIMEOUT_MS = 1_000;

/**
 * An ioredis client whose connection errors go to our logger, at most one line per 10 s per
 * client; without a listener ioredis prints every reconnect failure to stderr.
 */
export function createRedis(
  url: string,
  logger: Logger,
  name: string,
  options: Pick<
    RedisOptions,
    | "maxRetriesPerRequest"
    | "enableAutoPipelining"
    | "enableOfflineQueue"
    | "autoResendUnfulfilledCommands"
    | "commandTimeout"
  > = {},
): Redis {
  const client = new Redis(url, {
    maxRetriesPerRequest: 3,
    enableAutoPipelining: false,
    ...options,
    connectionName: name,
  });
  const mayLog = oncePer();
  client.on("error", (error: Error) => {
    if (mayLog()) logger.warn({ err: error, redis: name }, "redis connection error");
  });
  return client;
}
