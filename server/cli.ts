// `npm run cli -- <command> [args]`. With PostgreSQL the CLI runs the command itself. With the
// embedded database a running server holds PGlite's only connection, so the command is handed
// to it over loopback (signed with APP_KEY); when no server is running, the CLI opens PGlite.
import { openDatabase } from "../db/client.ts";
import { systemClock } from "./clock.ts";
import { ConfigError, loadConfig, type Config } from "./config.ts";
import { ADMIN_ROUTE, signAdminRequest } from "./http/admin-route.ts";
import { Keyring } from "./keyring.ts";
import { createLogger } from "./logger.ts";
import { ADMIN_USAGE, AdminCommandError, runAdminCommand } from "./services/accounts/admin-commands.ts";

async function runDirectly(config: Config, args: string[]): Promise<string> {
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    const keys = new Keyring(config.appKey, config.previousAppKeys);
    const logger = createLogger(config.logLevel);
    return await runAdminCommand({ db: database.db, clock: systemClock, keys, logger }, args);
  } finally {
    await database.close();
  }
}

/** The running server's answer, or undefined when no server listens on PORT. */
async function runThroughServer(config: Config, args: string[]): Promise<string | undefined> {
  const body = JSON.stringify({ args });
  const timestamp = Math.floor(Date.now() / 1000);
  let response: Response;
  try {
    response = await fetch(`http://127.0.0.1:${config.port}${ADMIN_ROUTE}`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-Admin-Timestamp": String(timestamp),
        "X-Admin-Signature": signAdminRequest(new Keyring(config.appKey), timestamp, body),
      },
      body,
    });
  } catch {
    return undefined;
  }
  const answer = (await response.json()) as { message: string };
  if (!response.ok) throw new AdminCommandError(answer.message);
  return answer.message;
}

async function main(args: string[]) {
  if (args.length === 0 || args[0] === "help" || args[0] === "--help") {
    console.log(`Usage: npm run cli -- <command>\n\n${ADMIN_USAGE}`);
    return;
  }
  const config = loadConfig();
  const message = config.databaseUrl
    ? await runDirectly(config, args)
    : ((await runThroughServer(config, args)) ?? (await runDirectly(config, args)));
  console.log(message);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof AdminCommandError || error instanceof ConfigError) {
    console.error(error.message);
    process.exit(1);
  }
  console.error(error);
  process.exit(1);
});
