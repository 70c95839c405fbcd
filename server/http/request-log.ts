// Request logs: one line per request when its response ends, with a request id that the client
// may choose (X-Request-Id, if sane) and that every answer returns. The request is served inside
// the logger's request scope, so every line logged meanwhile, by any module through deps.logger,
// carries the same `reqId` (server/logger.ts).
//
// Written here rather than with pino-http, which made two child loggers per request and
// serialized the request (a URL parse and a redaction pass) for them whether or not the line was
// logged: about 150 µs of a post's CPU. Here a request costs an id, a header and a listener; the
// line is built only when its level is enabled.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { WebSocketServer } from "ws";
import { requestScope, type Logger } from "../logger.ts";
import type { RouteTemplates } from "./route-templates.ts";

export const REQUEST_ID_HEADER = "X-Request-Id";

/** A client's id is kept when it is short and plain (no spaces, quotes or control characters to forge log lines). */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:@=+/-]{1,128}$/;

/** Query parameters that carry credentials or payloads that may (a tRPC `input` of a token, for instance). */
const SECRET_QUERY_KEYS = ["token", "signature", "connectionParams", "input", "code", "state", "access_token"];

const REDACTED = "[redacted]";

/** Routes polled by machines (probes, scrapes): their lines are logged at debug, not info. */
const QUIET_PATHS = new Set(["/healthz", "/readyz", "/metrics"]);

export function requestIdOf(req: IncomingMessage): string {
  const sent = req.headers["x-request-id"];
  return typeof sent === "string" && SANE_REQUEST_ID.test(sent) ? sent : randomUUID();
}

/** The request target as it may be logged: secret query values and path parameters replaced. */
export function redactTarget(target: string, routes: RouteTemplates): string {
  let url: URL;
  try {
    url = new URL(target, "http://localhost");
  } catch {
    return REDACTED;
  }
  for (const key of SECRET_QUERY_KEYS) if (url.searchParams.has(key)) url.searchParams.set(key, REDACTED);
  return routes.redactPath(url.pathname, REDACTED) + url.search.replaceAll(encodeURIComponent(REDACTED), REDACTED);
}

const pathOf = (target: string) => target.split("?")[0]!;

/**
 * Wraps the request listener: names the request, logs its completion, and serves it inside the
 * request scope; `serve` gets the request id. Only the method, the redacted target and the
 * client address (`addressOf`: TRUST_PROXY's decision, server/http/client-address.ts) are
 * logged of the request, never a header.
 */
export function withRequestLog(
  logger: Logger,
  routes: RouteTemplates,
  addressOf: (req: IncomingMessage) => string,
  serve: (req: IncomingMessage, res: ServerResponse, reqId: string) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const started = Date.now();
    const reqId = requestIdOf(req);
    // Now, while the socket still has its address (a client that left takes it with it).
    const ip = addressOf(req);
    // What was asked: a route may rewrite req.url (the REST door drops some query keys).
    const target = req.url ?? "/";
    res.setHeader(REQUEST_ID_HEADER, reqId);
    // 'close' comes once, after 'finish' when the response was sent, alone when the client left.
    res.once("close", () => {
      const failed = res.statusCode >= 500;
      const level = failed ? "error" : QUIET_PATHS.has(pathOf(target)) ? "debug" : "info";
      if (!logger.isLevelEnabled(level)) return;
      const line: Record<string, unknown> = {
        reqId,
        req: { method: req.method, url: redactTarget(target, routes), ip },
        res: { statusCode: res.statusCode },
        responseTime: Date.now() - started,
      };
      if (failed) {
        line.err = new Error(`failed with status code ${res.statusCode}`);
        logger[level](line, "request errored");
      } else {
        logger[level](line, !req.readableAborted && res.writableEnded ? "request completed" : "request aborted");
      }
    });
    requestScope.run({ reqId }, () => serve(req, res, reqId));
  };
}

/** The request id of each WebSocket connection, by its upgrade request (while the handshake is under way). */
const socketRequestIds = new WeakMap<IncomingMessage, string>();

/** The request id given to a WebSocket connection's upgrade request (the connection keeps it, not the request). */
export function socketRequestId(req: IncomingMessage): string | undefined {
  return socketRequestIds.get(req);
}

/** Runs `work` (a frame's handling) in the request scope of the connection's handshake (`socketRequestId`). */
export function inSocketScope(reqId: string | undefined, work: () => void): void {
  if (reqId === undefined) work();
  else requestScope.run({ reqId }, work);
}

/**
 * WebSocket connections are logged too: opened (with the request id, also returned in the 101
 * answer's X-Request-Id, and the client address of the upgrade) and closed (with the close code
 * and how long it lasted).
 */
export function logWebSocketConnections(
  wss: WebSocketServer,
  logger: Logger,
  routes: RouteTemplates,
  addressOf: (req: IncomingMessage) => string,
): void {
  wss.on("headers", (headers, req) => {
    // Kept as long as the connection is open: one flat string, not the chain of ten pieces
    // randomUUID's concatenation makes (about 300 bytes).
    const id = Buffer.from(requestIdOf(req), "latin1").toString("latin1");
    socketRequestIds.set(req, id);
    addressOf(req); // decided during the handshake, with the socket's address at hand
    headers.push(`${REQUEST_ID_HEADER}: ${id}`);
  });
  wss.on("connection", (client, req) => {
    const opened = Date.now();
    // The id as a field of each line rather than a child logger kept for the connection's life.
    const reqId = socketRequestIds.get(req);
    logger.info({ reqId, url: redactTarget(req.url ?? "/", routes), ip: addressOf(req) }, "websocket connected");
    client.on("close", (code) => logger.info({ reqId, code, durationMs: Date.now() - opened }, "websocket closed"));
  });
}
