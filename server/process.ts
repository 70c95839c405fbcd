import type { Logger } from "./logger.ts";

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
 * Runs until SIGTERM/SIGINT, then shuts down gracefully; a second signal exits at once.
 * Stray errors are logged, not fatal.
 */
export function runUntilSignal(service: { close(): Promise<void> }, logger: Logger): void {
  keepServingOnStrayErrors(logger);
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
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
