import { ConfigError, type Config } from "./config.ts";
import type { Logger } from "./logger.ts";

/**
 * Exit codes of a start that failed, so a supervisor (or a person) can tell a fix in the
 * environment from a bug: 78 is sysexits' EX_CONFIG, 69 its EX_UNAVAILABLE; 98 is Linux's
 * errno for "address already in use".
 */
export const EXIT_CODES = { config: 78, unavailable: 69, cannotListen: 98, bug: 1 } as const;

/** A start-up failure the person running the process can fix; its message is one plain line. */
export class StartupError extends Error {
  override name = "StartupError";
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** The errno-style code of a network error (an AggregateError from a dual-stack connect carries it on its parts). */
function errorCode(error: unknown): string | undefined {
  const { code, errors } = (error ?? {}) as { code?: unknown; errors?: unknown[] };
  if (typeof code === "string") return code;
  return errors?.length ? errorCode(errors[0]) : undefined;
}

const NETWORK_PROBLEMS: Record<string, string> = {
  ECONNREFUSED: "connection refused (is it running, and on that port?)",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found",
  ETIMEDOUT: "timed out",
  CONNECT_TIMEOUT: "timed out",
  ECONNRESET: "the connection was reset",
  EACCES: "permission denied",
};

/** A URL as it can be printed: without its password. */
function withoutPassword(url: string): string {
  const parsed = new URL(url);
  parsed.password = "";
  return parsed.toString();
}

/** openDatabase failed: where it tried, and why, in one line (PostgreSQL's own messages are plain already). */
export function cannotOpenDatabase(config: Config, error: unknown): StartupError {
  const code = errorCode(error);
  const why = (code && NETWORK_PROBLEMS[code]) ?? (error instanceof Error ? error.message : String(error));
  const where = config.databaseUrl
    ? `at ${withoutPassword(config.databaseUrl)} (DATABASE_URL)`
    : `in ${config.dataDir} (DATA_DIR)`;
  return new StartupError(`Cannot open the database ${where}: ${why}`, EXIT_CODES.unavailable);
}

/** server.listen failed: the port is taken, privileged, or HOST is not an address of this machine. */
export function cannotListen(config: Config, error: unknown): StartupError {
  const code = errorCode(error);
  const where = `Port ${config.port} on ${config.host}`;
  const message =
    code === "EADDRINUSE"
      ? `${where} is already in use (PORT, HOST).`
      : code === "EACCES"
        ? `${where} needs privileges this process does not have (PORT, HOST).`
        : code === "EADDRNOTAVAIL" || code === "ENOTFOUND" || code === "EAI_AGAIN"
          ? `${config.host} is not an address of this machine (HOST).`
          : `${where} cannot be opened: ${code ?? String(error)} (PORT, HOST).`;
  return new StartupError(message, EXIT_CODES.cannotListen);
}

/**
 * The end of a start that failed: a problem in the environment is one line on stderr and its
 * exit code; anything else is a bug, printed whole.
 */
export function exitOnStartupFailure(error: unknown): never {
  if (error instanceof ConfigError) {
    console.error(error.message);
    process.exit(EXIT_CODES.config);
  }
  if (error instanceof StartupError) {
    console.error(error.message);
    process.exit(error.exitCode);
  }
  console.error(error);
  process.exit(EXIT_CODES.bug);
}

/**
 * The last line of defence: an error nothing caught (a library's event without a listener, a
 * promise nobody awaited) is logged and the process keeps serving, rather than every
 * connection and request in flight dying with it. Each such log line is a bug to fix.
 */
function keepServingOnStrayErrors(logger: Logger): void {
  process.on("uncaughtException", (error) => logger.error({ err: error }, "uncaught exception: still serving"));
  process.on("unhandledRejection", (reason) => logger.error({ err: reason }, "unhandled rejection: still serving"));
}

/**
 * One signal can reach us twice: Ctrl-C (or `kill -- -<pgid>`) signals the whole process group,
 * and `npm start` forwards the same signal to its child. A repeat this soon is that echo, not a
 * person asking to skip the drain (who presses Ctrl-C again once the drain seems to hang).
 */
export const ECHO_WINDOW_MS = 2000;

/**
 * Runs until SIGTERM/SIGINT, then shuts down gracefully; a second signal (after the echo
 * window) exits at once. Stray errors are logged, not fatal.
 */
export function runUntilSignal(service: { close(): Promise<void> }, logger: Logger): void {
  keepServingOnStrayErrors(logger);
  let stoppingSince: number | undefined;
  const stop = (signal: NodeJS.Signals) => {
    if (stoppingSince !== undefined) {
      if (performance.now() - stoppingSince < ECHO_WINDOW_MS) return;
      logger.warn({ signal }, "second signal: exiting without waiting for the drain");
      process.exit(1);
    }
    stoppingSince = performance.now();
    logger.info({ signal }, "shutting down");
    service.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
