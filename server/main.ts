// `npm start`: configuration, migrations, HTTP + WebSocket, workers (unless WORKERS=off). With
// WEB_CONCURRENCY above 1, this process forks that many such processes on the port and serves
// nothing itself (server/cluster.ts); each of them runs this file again, as a cluster worker.
import cluster from "node:cluster";
import { runServerProcesses } from "./cluster.ts";
import { loadConfig } from "./config.ts";
import { createLogger } from "./logger.ts";
import { exitOnStartupFailure, runUntilSignal } from "./process.ts";

try {
  const config = loadConfig();
  if (config.webConcurrency > 1 && cluster.isPrimary) {
    runServerProcesses(config, createLogger(config.logLevel));
  } else {
    // Imported here so that a primary, which serves nothing, never loads the service.
    const { startApp } = await import("./app.ts");
    const app = await startApp(config);
    runUntilSignal(app, app.deps.logger);
  }
} catch (error) {
  exitOnStartupFailure(error);
}
