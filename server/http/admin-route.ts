// POST /internal/admin-command: how `npm run cli` reaches a running server that holds the
// embedded database (PGlite admits one process). Loopback callers only, and the request must
// carry an HMAC of its body under a key derived from APP_KEY (or an APP_KEY_PREVIOUS), made
// within the last minute.
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import type { Deps } from "../deps.ts";
import type { Keyring } from "../keyring.ts";
import { isSafeText } from "../input-text.ts";
import { AdminCommandError, runAdminCommand } from "../services/accounts/admin-commands.ts";
import { readRawBody } from "./body.ts";
import { isLoopbackAddress, requestClientAddress, trustedRangesOf } from "./client-address.ts";
import { parseJsonWithinLimits } from "./json-limits.ts";
import { sendJson } from "./respond.ts";

export const ADMIN_ROUTE = "/internal/admin-command";
const FRESHNESS_SECONDS = 60;

export function signAdminRequest(keys: Keyring, timestamp: number, body: string): string {
  return keys.mac("admin-command", `${timestamp}.${body}`);
}

export async function handleAdminCommand(deps: Deps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  // Loopback by the client address (server/http/client-address.ts): behind a trusted proxy on
  // the same host, a visitor it forwards is not loopback.
  const client = requestClientAddress(req, trustedRangesOf(deps.config));
  if (req.method !== "POST" || !isLoopbackAddress(client)) {
    return sendJson(res, 404, { message: "Not found." });
  }
  const raw = (await readRawBody(req, 64 * 1024)).toString("utf8");
  const timestamp = Number(req.headers["x-admin-timestamp"]);
  const signature = String(req.headers["x-admin-signature"] ?? "");
  const fresh = Math.abs(Date.now() / 1000 - timestamp) <= FRESHNESS_SECONDS;
  const valid = fresh && deps.keys.verifyMac("admin-command", `${timestamp}.${raw}`, signature);
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
