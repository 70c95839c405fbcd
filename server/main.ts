// `npm start`: configuration, migrations, HTTP + WebSocket, workers (unless WORKERS=off).
import { startApp } from "./app.ts";
import { ConfigError, loadConfig } from "./config.ts";
import { runUntilSignal } from "./process.ts";

try {
  const app = await startApp(loadConfig());
  runUntilSignal(app, app.deps.logger);
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(error.message);
    process.exit(78);
  }
  throw error;
}
