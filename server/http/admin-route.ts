// POST /internal/admin-command: how `npm run cli` reaches a running server that holds the
// embedded database (PGlite admits one process). Loopback callers only, and the request must
// carry an HMAC of its body keyed with APP_KEY, made within the last minute.
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { hmacSha256Hex, safeEqual } from "../crypto.ts";
import type { Deps } from "../deps.ts";
import { isSafeText } from "../input-text.ts";
import { AdminCommandError, runAdminCommand } from "../services/accounts/admin-commands.ts";
import { readRawBody } from "./body.ts";
import { parseJsonWithinLimits } from "./json-limits.ts";
import { sendJson } from "./respond.ts";

export const ADMIN_ROUTE = "/internal/admin-command";
const FRESHNESS_SECONDS = 60;

export function signAdminRequest(appKey: string, timestamp: number, body: string): string {
  return hmacSha256Hex(appKey, `${timestamp}.${body}`);
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);

export async function handleAdminCommand(deps: Deps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== "POST" || !LOOPBACK.has(req.socket.remoteAddress ?? "")) {
    return sendJson(res, 404, { message: "Not found." });
  }
  const raw = (await readRawBody(req, 64 * 1024)).toString("utf8");
  const timestamp = Number(req.headers["x-admin-timestamp"]);
  const signature = String(req.headers["x-admin-signature"] ?? "");
  const expected = signAdminRequest(deps.config.appKey, timestamp, raw);
  const fresh = Math.abs(Date.now() / 1000 - timestamp) <= FRESHNESS_SECONDS;
  const valid = fresh && safeEqual(signature, expected);
  if (!valid) return sendJson(res, 401, { message: "Unauthenticated." });
  const parsed = z.object({ args: z.array(z.string()) }).safeParse(parseJsonWithinLimits(raw));
  if (!parsed.success) return sendJson(res, 422, { message: "The body must be {args: string[]}." });
  if (!parsed.data.args.every(isSafeText)) {
    return sendJson(res, 422, { message: "The arguments contain characters that are not allowed." });
  }
  try {
    sendJson(res, 200, { message: await runAdminCommand(deps, parsed.data.args) });
  } catch (error) {
    if (error instanceof AdminCommandError) return sendJson(res, 422, { message: error.message });
    throw error;
  }
}
