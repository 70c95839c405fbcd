// The one HTTP server: routes each request to its door. tRPC at /trpc (HTTP here, WebSocket
// on upgrade), REST at /api/v1 through trpc-to-openapi, and the few plain routes.
import type { IncomingMessage, ServerResponse } from "node:http";
import { TRPCError } from "@trpc/server";
import { createHTTPHandler } from "@trpc/server/adapters/standalone";
import { statementScope } from "../../db/statement-count.ts";
import type { AppRouter } from "../../routers/index.ts";
import { createHttpContext, type RequestContext } from "../context.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { handleAdminCommand, ADMIN_ROUTE } from "./admin-route.ts";
import { MAX_JSON_BODY_BYTES, readBody, readRawBody } from "./body.ts";
import { requestClientAddress, trustedRangesOf } from "./client-address.ts";
import { trustedOrigins } from "./cookies.ts";
import { serveDocs } from "./docs.ts";
import { fileRoute } from "./file-routes.ts";
import { webhookRoute } from "./webhook-route.ts";
import { JSON_TOO_DEEP_MESSAGE, jsonNestsDeeperThan, MAX_JSON_DEPTH } from "./json-limits.ts";
import { buildAsyncApiDocument } from "./asyncapi.ts";
import { buildOpenApiDocument } from "./openapi.ts";
import type { Metrics } from "../metrics.ts";
import { METRICS_ROUTE, serveMetrics } from "./metrics-route.ts";
import { isQueueDashboardPath } from "./queue-dashboard.ts";
import { withRequestLog } from "./request-log.ts";
import { UNMATCHED_ROUTE, type RouteTemplates } from "./route-templates.ts";
import { sendJson } from "./respond.ts";
import { createRestHandler, refuseRestBody } from "./rest.ts";
import { restErrorFromAppError } from "./rest-errors.ts";
import { appErrorToTRPC, unavailableDependency } from "../trpc-errors.ts";

export type Readiness = () => Promise<{ ok: boolean; checks: Record<string, "ok" | "failing"> }>;

/** What operators use: metrics, the request log's route templates, and the queue dashboard (with Redis). */
export type Operations = {
  metrics: Metrics;
  routes: RouteTemplates;
  queueDashboard?: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
};

/**
 * The request target as a URL: origin-form ("/path?query", "//" included: a path, not a host)
 * or absolute-form; undefined when it is neither (answered 400).
 */
function requestUrl(target: string): URL | undefined {
  try {
    return target.startsWith("/") ? new URL(`http://localhost${target}`) : new URL(target);
  } catch {
    return undefined;
  }
}

const isJsonMediaType = (req: IncomingMessage) =>
  req.headers["content-type"]?.split(";")[0]?.trim().toLowerCase() === "application/json";

/**
 * The JSON of a tRPC request over HTTP, checked before tRPC parses it: a JSON body is read here
 * (at most MAX_JSON_BODY_BYTES, else 413) and handed to the adapter as `req.body`, a string the
 * adapter uses as the body instead of reading the stream again; the body, `?input=` and
 * `?connectionParams=` may nest at most MAX_JSON_DEPTH deep (a batch's `{"0": …}` not counted).
 * Too deep is what malformed JSON is there: BAD_REQUEST for the input, PARSE_ERROR for the
 * connection params. Returns the refusal, if any.
 */
async function screenRpcRequest(
  req: IncomingMessage & { body?: unknown },
  searchParams: URLSearchParams,
): Promise<TRPCError | undefined> {
  const connectionParams = searchParams.get("connectionParams");
  if (connectionParams !== null && jsonNestsDeeperThan(connectionParams)) {
    return new TRPCError({ code: "PARSE_ERROR", message: JSON_TOO_DEEP_MESSAGE });
  }
  const maxDepth = MAX_JSON_DEPTH + (searchParams.get("batch") === "1" ? 1 : 0);
  let input = req.method === "GET" ? searchParams.get("input") : null;
  if (req.method === "POST" && isJsonMediaType(req)) {
    try {
      input = (await readRawBody(req, MAX_JSON_BODY_BYTES)).toString("utf8");
    } catch (error) {
      if (error instanceof AppError) return appErrorToTRPC(error);
      throw error;
    }
    req.body = input;
  }
  if (input !== null && jsonNestsDeeperThan(input, maxDepth)) {
    return new TRPCError({ code: "BAD_REQUEST", message: JSON_TOO_DEEP_MESSAGE });
  }
  return undefined;
}

/**
 * The request target without query keys that name Object.prototype members (`valueOf`,
 * `__proto__`, ...): no endpoint takes them, and the REST adapter's query parsing trips over
 * them (it finds the inherited member where it expects its own array). Other keys are untouched.
 */
function withoutInheritedQueryKeys(url: URL, target: string): string {
  const keys = [...url.searchParams.keys()];
  if (!keys.some((key) => key in Object.prototype)) return target;
  for (const key of keys) if (key in Object.prototype) url.searchParams.delete(key);
  return url.pathname + url.search;
}

export function createRequestListener(deps: Deps, router: AppRouter, readiness: Readiness, operations: Operations) {
  const rest = createRestHandler(deps, router);
  /**
   * tRPC requests refused by screenRpcRequest: createContext throws the refusal, so that tRPC
   * answers it in its own shape (for every call of a batch).
   */
  const rpcRefusals = new WeakMap<IncomingMessage, TRPCError>();
  const rpc = createHTTPHandler({
    router,
    basePath: "/trpc/",
    // Bodies of other types than JSON (which screenRpcRequest reads) are read by the adapter.
    maxBodySize: MAX_JSON_BODY_BYTES,
    // Subscriptions over SSE (httpSubscriptionLink) cannot send headers: they pass the token
    // as a connection parameter, like WebSocket clients.
    createContext: ({ req, info }) => {
      const refusal = rpcRefusals.get(req);
      if (refusal) throw refusal;
      return createHttpContext(deps, req, info.connectionParams?.token);
    },
    responseMeta: ({ ctx, errors }) => {
      const headers: Record<string, string | string[]> = { ...(ctx as RequestContext | undefined)?.response.headers };
      const retryAfter = errors
        .map((error) => (error.cause instanceof AppError ? error.cause.retryAfterSeconds : undefined))
        .find(Boolean);
      if (retryAfter) headers["Retry-After"] = String(retryAfter);
      return { headers };
    },
    onError: ({ error, path }) => {
      if (error.code === "INTERNAL_SERVER_ERROR") deps.logger.error({ err: error.cause ?? error, path }, "rpc failed");
    },
  });
  let openApiJson: string | undefined;
  let asyncApiJson: string | undefined;
  const origins = trustedOrigins(deps.config);
  const trusted = trustedRangesOf(deps.config);

  function applyCors(req: IncomingMessage, res: ServerResponse): boolean {
    const origin = req.headers.origin;
    if (!origin || !origins.has(origin)) return false;
    res.setHeader("Access-Control-Allow-Origin", origin);
    res.setHeader("Access-Control-Allow-Credentials", "true");
    res.setHeader("Vary", "Origin");
    // Browser apps may read the request id (to quote it when reporting a problem).
    res.setHeader("Access-Control-Expose-Headers", "X-Request-Id, Retry-After");
    if (req.method === "OPTIONS") {
      res.setHeader("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS");
      res.setHeader(
        "Access-Control-Allow-Headers",
        req.headers["access-control-request-headers"] ?? "Content-Type, Authorization",
      );
      res.setHeader("Access-Control-Max-Age", "600");
      res.writeHead(204).end();
      return true;
    }
    return false;
  }

  async function route(req: IncomingMessage & { body?: unknown }, res: ServerResponse, url: URL | undefined) {
    if (!url) return sendJson(res, 400, { message: "Bad Request." });
    const pathname = url.pathname;
    if (applyCors(req, res)) return;

    if (pathname === "/healthz") return sendJson(res, 200, { status: "ok" });
    if (pathname === METRICS_ROUTE) {
      return serveMetrics(operations.metrics, { token: deps.config.metricsToken, trusted }, req, res);
    }
    if (operations.queueDashboard && isQueueDashboardPath(pathname)) return operations.queueDashboard(req, res);
    if (pathname === "/readyz") {
      const { ok, checks } = await readiness();
      return sendJson(res, ok ? 200 : 503, { status: ok ? "ok" : "unavailable", checks });
    }
    if (pathname === "/api/v1/openapi.json") {
      openApiJson ??= JSON.stringify(buildOpenApiDocument(router));
      res.writeHead(200, { "Content-Type": "application/json" }).end(openApiJson);
      return;
    }
    if (pathname === "/api/v1/asyncapi.json") {
      asyncApiJson ??= JSON.stringify(buildAsyncApiDocument(router, deps.config.appUrl));
      res.writeHead(200, { "Content-Type": "application/json" }).end(asyncApiJson);
      return;
    }
    if (pathname.startsWith("/docs") && (await serveDocs(pathname, res))) return;
    if (pathname === "/trpc" || pathname.startsWith("/trpc/")) {
      const refusal = await screenRpcRequest(req, url.searchParams);
      if (refusal) rpcRefusals.set(req, refusal);
      return rpc(req, res);
    }
    if (pathname === ADMIN_ROUTE) return handleAdminCommand(deps, req, res);
    // Multipart upload and binary downloads: plain routes, read before any JSON body parsing.
    const attachmentRoute = fileRoute(req.method, pathname);
    if (attachmentRoute) return attachmentRoute(deps, req, res);
    const postingRoute = webhookRoute(pathname);
    if (postingRoute) return postingRoute(deps, req, res);
    if (pathname.startsWith("/api/v1/")) {
      req.url = withoutInheritedQueryKeys(url, req.url!);
      if (req.method !== "GET" && req.method !== "HEAD") {
        try {
          req.body = (await readBody(req)).value;
          // The adapter parses nothing itself once a body is present; it only checks the type.
          req.headers["content-type"] = "application/json";
        } catch (error) {
          if (!(error instanceof AppError)) throw error;
          // Answered by the REST door, after the route and the caller (a bearer endpoint's 401 first).
          refuseRestBody(req, error);
        }
      }
      return rest(req, res);
    }
    sendJson(res, 404, { message: `The route ${pathname.replace(/^\//, "")} could not be found.` });
  }

  // Each request runs in a statement scope labelled by its request id (assigned by withRequestLog):
  // the database statements it sends are counted under it (db/statement-count.ts).
  // The request log records the client address (decided once, before the socket may be gone).
  return withRequestLog(
    deps.logger,
    operations.routes,
    (req) => requestClientAddress(req, trusted),
    (req: IncomingMessage, res: ServerResponse, reqId: string) => statementScope(reqId, () => serve(req, res)),
  );

  function serve(req: IncomingMessage, res: ServerResponse) {
    // The route's template (never its ids) labels the request's latency.
    // Parsed once: the metrics' label and the routing read the same URL.
    const url = requestUrl(req.url ?? "/");
    const template = url === undefined ? UNMATCHED_ROUTE : operations.routes.templateOf(url.pathname);
    operations.metrics.observeRequest(req, res, template);
    route(req, res, url).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const appError = error instanceof AppError ? error : unavailableDependency(error);
      if (appError) {
        const mapped = restErrorFromAppError(appError);
        return sendJson(res, mapped.status, mapped.body, mapped.headers);
      }
      deps.logger.error({ err: error }, "request failed");
      sendJson(res, 500, { message: "Server Error" });
    });
  }
}
