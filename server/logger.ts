import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(level: string): Logger {
  return pino({
    level,
    // Secrets never reach the logs, even when a request object is logged whole.
    redact: {
      paths: ["*.password", "*.token", "*.access_token", "*.secret", "req.headers.authorization", "req.headers.cookie"],
      censor: "[redacted]",
    },
  });
}
