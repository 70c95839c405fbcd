// The queue dashboard (bull-board) at /admin/queues, only where jobs run on BullMQ (REDIS_URL):
// the in-process queue has nothing to show after the fact. It can retry and remove jobs, so it
// is for admins: HTTP Basic with QUEUE_DASHBOARD_PASSWORD (any user name), which a browser
// asks for by itself. Unset, there is no dashboard: a loopback-only rule (as /metrics has) would
// open it to everyone behind a reverse proxy on the same host.
import type { IncomingMessage, ServerResponse } from "node:http";
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { HonoAdapter } from "@bull-board/hono";
import { getRequestListener } from "@hono/node-server";
import { serveStatic } from "@hono/node-server/serve-static";
import type { Queue } from "bullmq";
import { Hono } from "hono";
import { safeEqual } from "../crypto.ts";
import { sendJson } from "./respond.ts";

export const QUEUE_DASHBOARD_PATH = "/admin/queues";

export function isQueueDashboardPath(pathname: string): boolean {
  return pathname === QUEUE_DASHBOARD_PATH || pathname.startsWith(`${QUEUE_DASHBOARD_PATH}/`);
}

/** The password of an `Authorization: Basic` header, whatever the user name. */
function basicPassword(header: string | undefined): string | undefined {
  const encoded = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header?.trim() ?? "")?.[1];
  if (!encoded) return undefined;
  const decoded = Buffer.from(encoded, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon === -1 ? undefined : decoded.slice(colon + 1);
}

/** The dashboard's request handler; its queues are opened at its first request. */
export function createQueueDashboard(queues: () => Queue[], password: string) {
  let listener: ReturnType<typeof getRequestListener> | undefined;
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const refusal = refusalOf(req, password);
    if (refusal) return sendJson(res, refusal.status, { message: refusal.message }, refusal.headers);
    listener ??= dashboardListener(queues());
    await listener(req, res);
  };
}

function refusalOf(
  req: IncomingMessage,
  password: string,
): { status: 401; message: string; headers: Record<string, string> } | undefined {
  const sent = basicPassword(req.headers.authorization);
  if (sent !== undefined && safeEqual(sent, password)) return undefined;
  return {
    status: 401,
    message: "Unauthenticated.",
    headers: { "WWW-Authenticate": 'Basic realm="queues", charset="UTF-8"' },
  };
}

function dashboardListener(queues: Queue[]) {
  const serverAdapter = new HonoAdapter(serveStatic);
  serverAdapter.setBasePath(QUEUE_DASHBOARD_PATH);
  createBullBoard({
    queues: queues.map((queue) => new BullMQAdapter(queue)),
    serverAdapter,
    options: { uiConfig: { boardTitle: "Chat service queues" } },
  });
  const app = new Hono();
  app.route(QUEUE_DASHBOARD_PATH, serverAdapter.registerPlugin());
  return getRequestListener(app.fetch);
}
