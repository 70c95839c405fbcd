// `npm run worker`: BullMQ workers as their own process (scale them apart from the API).
import { startWorkers } from "../server/app.ts";
import { loadConfig } from "../server/config.ts";
import { createLogger } from "../server/logger.ts";
import { exitOnStartupFailure, runUntilSignal } from "../server/process.ts";

try {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  runUntilSignal(await startWorkers(config, { logger }), logger);
} catch (error) {
  exitOnStartupFailure(error);
}
