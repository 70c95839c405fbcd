// WEB_CONCURRENCY above 1: this process becomes a node:cluster primary that serves nothing
// itself. It forks the server processes, each running startApp on the same port (the primary
// accepts each connection and hands it to the next process in turn), replaces one that dies,
// and on SIGTERM or SIGINT passes the signal on and exits once every one has drained.
import cluster, { type Worker } from "node:cluster";
import type { Config } from "./config.ts";
import type { Logger } from "./logger.ts";
import { ECHO_WINDOW_MS, EXIT_CODES } from "./process.ts";

/** Replacements that keep dying before they listen (the database away, say) wait up to this long. */
const MAX_RESTART_DELAY_MS = 30_000;

export function runServerProcesses(config: Config, logger: Logger): void {
  const running = new Set<Worker>();
  const listened = new WeakSet<Worker>();
  const restarts = new Set<NodeJS.Timeout>();
  let started = false;
  let restartDelayMs = 0;
  let stoppingSince: number | undefined;
  let exitCode = 0;

  const fork = () => void running.add(cluster.fork());
  const exitOnceAllStopped = () => {
    if (running.size === 0) {
      logger.info({ exitCode }, "server processes stopped");
      process.exit(exitCode);
    }
  };

  cluster.on("listening", (worker) => {
    if (listened.has(worker)) return;
    listened.add(worker);
    restartDelayMs = 0;
    // One process starts first, so a start that cannot go on (database away, port taken) fails
    // once, with one line and its exit code, as with one process. The rest then start together.
    if (!started && stoppingSince === undefined) {
      started = true;
      for (let i = 1; i < config.webConcurrency; i++) fork();
    }
  });

  cluster.on("exit", (worker, code, signal) => {
    running.delete(worker);
    if (stoppingSince !== undefined) {
      if (code !== 0) exitCode = 1;
      exitOnceAllStopped();
      return;
    }
    // The first process could not start: it has said why on stderr, and its exit code is ours.
    if (!started) process.exit(code ?? EXIT_CODES.bug);
    // A process that listened is replaced at once; a replacement that dies before it listens,
    // after a delay that doubles each time, so a lasting fault is not a busy loop of forks.
    restartDelayMs = listened.has(worker) ? 0 : Math.min(Math.max(restartDelayMs * 2, 1000), MAX_RESTART_DELAY_MS);
    logger.error(
      { worker: worker.process.pid, code, signal, restartInMs: restartDelayMs },
      "a server process exited: starting another",
    );
    const timer = setTimeout(() => {
      restarts.delete(timer);
      fork();
    }, restartDelayMs);
    restarts.add(timer);
  });

  // Each process drains as it would alone. Ctrl-C reaches the processes from the terminal too:
  // the copy passed on here falls in their echo window (server/process.ts), as npm's does here.
  // A second signal after that window is passed on as well, and they exit at once.
  const stop = (signal: NodeJS.Signals) => {
    const now = performance.now();
    if (stoppingSince !== undefined && now - stoppingSince < ECHO_WINDOW_MS) return;
    if (stoppingSince === undefined) logger.info({ signal }, "stopping the server processes");
    stoppingSince = now;
    for (const timer of restarts) clearTimeout(timer);
    restarts.clear();
    for (const worker of running) worker.process.kill(signal);
    exitOnceAllStopped();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);

  logger.info({ processes: config.webConcurrency }, "starting server processes");
  fork();
}
