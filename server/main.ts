// `npm start`: configuration, migrations, HTTP + WebSocket, workers (unless WORKERS=off).
import { startApp } from "./app.ts";
import { loadConfig } from "./config.ts";
import { exitOnStartupFailure, runUntilSignal } from "./process.ts";

try {
  const app = await startApp(loadConfig());
  runUntilSignal(app, app.deps.logger);
} catch (error) {
  exitOnStartupFailure(error);
}
