// The plain route of inbound webhook posting, POST /webhooks/{webhook}/messages (no /api/v1,
// no bearer): it needs the body's exact bytes for the signature, so it is not a procedure.
// The rules live in services/webhooks/post.ts.
import type { IncomingMessage, ServerResponse } from "node:http";
import { clientIp } from "../context.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { receiveWebhookPost } from "../services/webhooks/post.ts";
import { MAX_JSON_BODY_BYTES, mediaType, readRawBody } from "./body.ts";
import { sendJson } from "./respond.ts";

const POSTING_PATH = /^\/webhooks\/([^/]+)\/messages$/;

/** The plain route for this request, if it is webhook posting. */
export function webhookRoute(pathname: string) {
  const webhookId = POSTING_PATH.exec(pathname)?.[1];
  if (webhookId === undefined) return undefined;
  return (deps: Deps, req: IncomingMessage, res: ServerResponse) => postToWebhook(deps, req, res, webhookId);
}

async function postToWebhook(deps: Deps, req: IncomingMessage, res: ServerResponse, webhookId: string) {
  if (req.method !== "POST") {
    res.setHeader("Allow", "POST");
    return sendJson(res, 405, { message: "Method not allowed." });
  }
  let raw: Buffer = Buffer.alloc(0);
  let bodyError: AppError | undefined;
  try {
    raw = await readRawBody(req, MAX_JSON_BODY_BYTES);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    // Reported (and logged) once the caller proved the secret by a header.
    bodyError = error;
    if (error.kind === "payload_too_large") res.setHeader("Connection", "close");
  }
  const answer = await receiveWebhookPost(deps, {
    webhookId,
    raw,
    bodyError,
    contentType: mediaType(req),
    headers: req.headers,
    ip: clientIp(req),
  });
  sendJson(res, answer.status, answer.body, answer.headers);
}
