// `npm run worker`: BullMQ workers as their own process (scale them apart from the API).
import { startWorkers } from "../server/app.ts";
import { ConfigError, loadConfig } from "../server/config.ts";
import { createLogger } from "../server/logger.ts";
import { runUntilSignal } from "../server/process.ts";

try {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  runUntilSignal(await startWorkers(config, { logger }), logger);
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(error.message);
    process.exit(78);
  }
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
