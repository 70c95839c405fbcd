import { Redis } from "ioredis";
import type { Logger } from "./logger.ts";

const ERROR_LOG_INTERVAL_MS = 10_000;

/**
 * An ioredis client whose connection errors go to our logger, at most one line per 10 s per
 * client; without a listener ioredis prints every reconnect failure to stderr.
 */
export function createRedis(
  url: string,
  logger: Logger,
  name: string,
  options: { maxRetriesPerRequest?: number | null; enableAutoPipelining?: boolean } = {},
): Redis {
  const client = new Redis(url, {
    maxRetriesPerRequest: options.maxRetriesPerRequest ?? 3,
    connectionName: name,
    enableAutoPipelining: options.enableAutoPipelining ?? false,
  });
  let lastLogged = 0;
  client.on("error", (error: Error) => {
    const now = Date.now();
    if (now - lastLogged < ERROR_LOG_INTERVAL_MS) return;
    lastLogged = now;
    logger.warn({ err: error, redis: name }, "redis connection error");
  });
  return client;
}
