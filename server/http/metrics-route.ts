// GET /metrics on the main port, for Prometheus. With METRICS_TOKEN set a scrape must send
// `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise); unset, only loopback clients are
// answered (403 otherwise), decided by the socket's address: a forwarded-for header proves nothing.
import type { IncomingMessage, ServerResponse } from "node:http";
import { safeEqual } from "../crypto.ts";
import type { Metrics } from "../metrics.ts";
import { sendJson } from "./respond.ts";

export const METRICS_ROUTE = "/metrics";

const LOOPBACK_ADDRESSES = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);

export function isLoopback(remoteAddress: string | undefined): boolean {
  return LOOPBACK_ADDRESSES.has(remoteAddress ?? "");
}

/** Whether the request may read /metrics: the answer to send when it may not. */
export function metricsRefusal(
  req: IncomingMessage,
  token: string | undefined,
): { status: 401 | 403; message: string } | undefined {
  if (token === undefined) {
    return isLoopback(req.socket.remoteAddress)
      ? undefined
      : { status: 403, message: "Set METRICS_TOKEN to allow scrapes from other hosts." };
  }
  const sent = /^Bearer\s+(.+)$/i.exec(req.headers.authorization?.trim() ?? "")?.[1]?.trim();
  return sent !== undefined && safeEqual(sent, token) ? undefined : { status: 401, message: "Unauthenticated." };
}

export async function serveMetrics(
  metrics: Metrics,
  token: string | undefined,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("Allow", "GET, HEAD");
    return sendJson(res, 405, { message: "Method not allowed." });
  }
  const refusal = metricsRefusal(req, token);
  if (refusal) {
    const headers: Record<string, string> = refusal.status === 401 ? { "WWW-Authenticate": "Bearer" } : {};
    return sendJson(res, refusal.status, { message: refusal.message }, headers);
  }
  const body = await metrics.registry.metrics();
  res.writeHead(200, { "Content-Type": metrics.registry.contentType }).end(req.method === "HEAD" ? undefined : body);
}
