// The plain route of inbound webhook posting, POST /webhooks/{webhook}/messages (no /api/v1,
// no bearer): it needs the body's exact bytes for the signature, so it is not a procedure.
// The rules live in services/webhooks/post.ts; this door reads and parses the body, and turns
// the outcome the service returns into a status, a body and headers.
import type { IncomingMessage, ServerResponse } from "node:http";
import { clientIp } from "../context.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { receiveWebhookPost, type WebhookPostOutcome } from "../services/webhooks/post.ts";
import { MAX_JSON_BODY_BYTES, mediaType, parseBody, readRawBody } from "./body.ts";
import { sendJson } from "./respond.ts";
import { restErrorFromAppError } from "./rest-errors.ts";

type Answer = { status: number; body: unknown; headers: Record<string, string> };

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
  const contentType = mediaType(req);
  const outcome = await receiveWebhookPost(deps, {
    webhookId,
    raw,
    fields: () => {
      if (bodyError) throw bodyError;
      return parseBody(raw, contentType);
    },
    headers: req.headers,
    ip: clientIp(req, deps.config),
  });
  const answer = webhookAnswer(outcome);
  sendJson(res, answer.status, answer.body, answer.headers);
}

/**
 * What the client is told: 201 {data: message} for a post, the same with Idempotent-Replayed
 * for a replay, and a refusal as every REST error is (status, body and Retry-After of its AppError).
 */
function webhookAnswer(outcome: WebhookPostOutcome): Answer {
  switch (outcome.kind) {
    case "posted":
      return { status: 201, body: { data: outcome.message }, headers: {} };
    case "replayed":
      return { status: 201, body: { data: outcome.message }, headers: { "Idempotent-Replayed": "true" } };
    case "rejected":
      return restErrorFromAppError(outcome.error);
  }
}
