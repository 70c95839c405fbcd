// GET /metrics on the main port, for Prometheus. With METRICS_TOKEN set a scrape must send
// `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise); unset, only loopback clients are
// answered (403 otherwise), decided by the client address (server/http/client-address.ts): the
// socket's, or with TRUST_PROXY the one the trusted proxy forwarded, so that a visitor behind a
// proxy on the same host is not taken for loopback. An X-Forwarded-For from anyone else proves nothing.
import type { IncomingMessage, ServerResponse } from "node:http";
import { safeEqual } from "../crypto.ts";
import type { Metrics } from "../metrics.ts";
import { isLoopbackAddress, requestClientAddress, type TrustedRanges } from "./client-address.ts";
import { sendJson } from "./respond.ts";

export const METRICS_ROUTE = "/metrics";

/** Whether the request may read /metrics: the answer to send when it may not. */
export function metricsRefusal(
  req: IncomingMessage,
  token: string | undefined,
  trusted: TrustedRanges,
): { status: 401 | 403; message: string } | undefined {
  if (token === undefined) {
    return isLoopbackAddress(requestClientAddress(req, trusted))
      ? undefined
      : { status: 403, message: "Set METRICS_TOKEN to allow scrapes from other hosts." };
  }
  const sent = /^Bearer\s+(.+)$/i.exec(req.headers.authorization?.trim() ?? "")?.[1]?.trim();
  return sent !== undefined && safeEqual(sent, token) ? undefined : { status: 401, message: "Unauthenticated." };
}

export async function serveMetrics(
  metrics: Metrics,
  access: { token: string | undefined; trusted: TrustedRanges },
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("Allow", "GET, HEAD");
    return sendJson(res, 405, { message: "Method not allowed." });
  }
  const refusal = metricsRefusal(req, access.token, access.trusted);
  if (refusal) {
    const headers: Record<string, string> = refusal.status === 401 ? { "WWW-Authenticate": "Bearer" } : {};
    return sendJson(res, refusal.status, { message: refusal.message }, headers);
  }
  const body = await metrics.registry.metrics();
  res.writeHead(200, { "Content-Type": metrics.registry.contentType }).end(req.method === "HEAD" ? undefined : body);
}
