// Request logs (pino-http): one line per request when its response ends, with a request id that
// the client may choose (X-Request-Id, if sane) and that every answer returns. The request is
// served inside the logger's request scope, so every line logged meanwhile, by any module
// through deps.logger, carries the same `reqId` (server/logger.ts).
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { pinoHttp } from "pino-http";
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

const pathOf = (req: IncomingMessage) => (req.url ?? "/").split("?")[0]!;

/**
 * Wraps the request listener: names the request, logs its completion, and serves it inside the
 * request scope. Only the method and the redacted target are logged of the request, never a header.
 */
export function withRequestLog(
  logger: Logger,
  routes: RouteTemplates,
  serve: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  /** What was asked: a route may rewrite req.url (the REST door drops some query keys). */
  const targets = new WeakMap<IncomingMessage, string>();
  const log = pinoHttp({
    logger,
    genReqId: (req, res) => {
      const id = requestIdOf(req);
      res.setHeader(REQUEST_ID_HEADER, id);
      return id;
    },
    // req.log carries only the id; the completion line also says what was asked.
    quietReqLogger: true,
    serializers: {
      req: (req: IncomingMessage & { raw?: IncomingMessage }) => {
        const raw = req.raw ?? req;
        return { method: raw.method, url: redactTarget(targets.get(raw) ?? raw.url ?? "/", routes) };
      },
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
    },
    wrapSerializers: true,
    customLogLevel: (req, res, error) => {
      if (error || res.statusCode >= 500) return "error";
      return QUIET_PATHS.has(pathOf(req)) ? "debug" : "info";
    },
  });
  return (req, res) => {
    targets.set(req, req.url ?? "/");
    log(req, res);
    requestScope.run({ reqId: String(req.id) }, () => serve(req, res));
  };
}

/** The request id of each WebSocket connection, by its upgrade request. */
const socketRequestIds = new WeakMap<IncomingMessage, string>();

/** Runs `work` (a frame's handling) in the request scope of the connection's handshake. */
export function inSocketScope(req: IncomingMessage, work: () => void): void {
  const reqId = socketRequestIds.get(req);
  if (reqId === undefined) work();
  else requestScope.run({ reqId }, work);
}

/**
 * WebSocket connections are logged too: opened (with the request id, also returned in the 101
 * answer's X-Request-Id) and closed (with the close code and how long it lasted).
 */
export function logWebSocketConnections(wss: WebSocketServer, logger: Logger, routes: RouteTemplates): void {
  wss.on("headers", (headers, req) => {
    const id = requestIdOf(req);
    socketRequestIds.set(req, id);
    headers.push(`${REQUEST_ID_HEADER}: ${id}`);
  });
  wss.on("connection", (client, req) => {
    const opened = Date.now();
    const connectionLog = logger.child({ reqId: socketRequestIds.get(req) });
    connectionLog.info({ url: redactTarget(req.url ?? "/", routes) }, "websocket connected");
    client.once("close", (code) => connectionLog.info({ code, durationMs: Date.now() - opened }, "websocket closed"));
  });
}
