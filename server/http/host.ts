// The one HTTP server: routes each request to its door. tRPC at /trpc (HTTP here, WebSocket
// on upgrade), REST at /api/v1 through trpc-to-openapi, and the few plain routes.
import type { IncomingMessage, ServerResponse } from "node:http";
import { createHTTPHandler } from "@trpc/server/adapters/standalone";
import type { AppRouter } from "../../routers/index.ts";
import { createHttpContext, type RequestContext } from "../context.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { handleAdminCommand, ADMIN_ROUTE } from "./admin-route.ts";
import { readBody } from "./body.ts";
import { trustedOrigins } from "./cookies.ts";
import { serveDocs } from "./docs.ts";
import { fileRoute } from "./file-routes.ts";
import { buildOpenApiDocument } from "./openapi.ts";
import { sendJson } from "./respond.ts";
import { createRestHandler } from "./rest.ts";
import { restErrorFromAppError } from "./rest-errors.ts";

export type Readiness = () => Promise<{ ok: boolean; checks: Record<string, "ok" | "failing"> }>;

export function createRequestListener(deps: Deps, router: AppRouter, readiness: Readiness) {
  const rest = createRestHandler(deps, router);
  const rpc = createHTTPHandler({
    router,
    basePath: "/trpc/",
    // Subscriptions over SSE (httpSubscriptionLink) cannot send headers: they pass the token
    // as a connection parameter, like WebSocket clients.
    createContext: ({ req, info }) => createHttpContext(deps, req, info.connectionParams?.token),
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
  const origins = trustedOrigins(deps.config);

  function applyCors(req: IncomingMessage, res: ServerResponse): boolean {
    const origin = req.headers.origin;
    if (!origin || !origins.has(origin)) return false;
    res.setHeader("Access-Control-Allow-Origin", origin);
    res.setHeader("Access-Control-Allow-Credentials", "true");
    res.setHeader("Vary", "Origin");
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

  async function route(req: IncomingMessage & { body?: unknown }, res: ServerResponse) {
    const url = new URL(req.url ?? "/", "http://localhost");
    const pathname = url.pathname;
    if (applyCors(req, res)) return;

    if (pathname === "/healthz") return sendJson(res, 200, { status: "ok" });
    if (pathname === "/readyz") {
      const { ok, checks } = await readiness();
      return sendJson(res, ok ? 200 : 503, { status: ok ? "ok" : "unavailable", checks });
    }
    if (pathname === "/api/v1/openapi.json") {
      openApiJson ??= JSON.stringify(buildOpenApiDocument(router, deps.config.appUrl));
      res.writeHead(200, { "Content-Type": "application/json" }).end(openApiJson);
      return;
    }
    if (pathname.startsWith("/docs") && (await serveDocs(pathname, res))) return;
    if (pathname === "/trpc" || pathname.startsWith("/trpc/")) return rpc(req, res);
    if (pathname === ADMIN_ROUTE) return handleAdminCommand(deps, req, res);
    // Multipart upload and binary downloads: plain routes, read before any JSON body parsing.
    const attachmentRoute = fileRoute(req.method, pathname);
    if (attachmentRoute) return attachmentRoute(deps, req, res);
    if (pathname.startsWith("/api/v1/")) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        req.body = (await readBody(req)).value;
        // The adapter parses nothing itself once a body is present; it only checks the type.
        req.headers["content-type"] = "application/json";
      }
      return rest(req, res);
    }
    sendJson(res, 404, { message: `The route ${pathname.replace(/^\//, "")} could not be found.` });
  }

  return (req: IncomingMessage, res: ServerResponse) => {
    route(req, res).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (error instanceof AppError) {
        const mapped = restErrorFromAppError(error);
        return sendJson(res, mapped.status, mapped.body, mapped.headers);
      }
      deps.logger.error({ err: error, url: req.url }, "request failed");
      sendJson(res, 500, { message: "Server Error" });
    });
  };
}
