// Inbound webhook posting (contract, "Inbound webhook posting"; docs/webhooks.md): a bot posts
// into a channel of its workspace with the webhook's secret, or its signature. The checks run
// in this order, and every request past the first is written to the webhook's request log:
//   1. unknown webhook: 404 (nothing to log it under, nothing counted);
//   2. the workspace's hourly quota, counting every request, rejected ones too: 429;
//   3. inactive webhook: 403;
//   4. the secret (static scheme), or the signature (signature_required): 401;
//   5. the body (400, 415) and its fields (422), the Idempotency-Key's length (422);
//   6. a known Idempotency-Key: its first result replayed, or 422 when the fields differ;
//   7. the channel (the one named, else the default): 422 channel_id;
//   8. the message, through the one message service, with its log entry and its idempotency
//      key in its transaction: 201 {data: message}.
import type { IncomingHttpHeaders } from "node:http";
import { and, eq, gt, sql, type SQL } from "drizzle-orm";
import { z } from "zod";
import type { Executor } from "../../../db/client.ts";
import {
  inboundWebhooks,
  webhookIdempotencyKeys,
  webhookRequests,
  type InboundWebhook,
  type WebhookOutcome,
} from "../../../db/schema/index.ts";
import { safeEqual, sha256Hex, unseal } from "../../crypto.ts";
import type { Deps } from "../../deps.ts";
import { AppError, HTTP_STATUS, invalidField } from "../../errors.ts";
import { parseBody } from "../../http/body.ts";
import { idPattern, newId } from "../../ids.ts";
import { findUnsafeText, unsafeTextError } from "../../input-text.ts";
import { booleanInput, validationErrorFromZod } from "../../validation.ts";
import { postMessageOutcome } from "../messaging/post-message.ts";
import { WEBHOOK_NOT_FOUND } from "./manage.ts";
import { checkSignature } from "./signature.ts";

/** How long the first result of an Idempotency-Key is kept (and replayed). */
export const IDEMPOTENCY_RETENTION_MS = 24 * 3600_000;
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

export const SECRET_HEADER = "x-service-webhook-secret";
export const SIGNATURE_HEADER = "x-service-signature";
export const IDEMPOTENCY_HEADER = "idempotency-key";

/** The posting body. Unknown fields are ignored; `secret` is the static secret's other place. */
const postBody = z.object({
  content: z.string().trim().min(1).max(40_000),
  channel_id: z.string().min(1).max(255).optional(),
  skip_translation: booleanInput.optional(),
  secret: z.string().optional(),
  attachment_ids: z.array(z.unknown()).max(0, { message: "Webhook posts cannot carry attachments." }).optional(),
});
type PostBody = z.infer<typeof postBody>;

export type WebhookPostRequest = {
  webhookId: string;
  /** The body exactly as received: the signature is over these bytes. */
  raw: Buffer;
  /** The body could not be read (too large, cut short): reported once the secret is proved. */
  bodyError?: AppError | undefined;
  contentType: string | undefined;
  headers: IncomingHttpHeaders;
  ip: string;
};

export type WebhookPostAnswer = { status: number; body: unknown; headers: Record<string, string> };

type Rejection = { status: number; body: unknown; reason: string; headers?: Record<string, string> };

class Rejected extends Error {
  constructor(readonly rejection: Rejection) {
    super(rejection.reason);
  }
}

const reject = (status: number, message: string, reason: string, headers?: Record<string, string>): Rejected =>
  new Rejected({ status, body: { message }, reason, ...(headers && { headers }) });

/** An AppError (validation, a malformed body) as a logged rejection. */
function rejectedFrom(error: AppError, reason: string): Rejected {
  const body = error.errors ? { message: error.message, errors: error.errors } : { message: error.message };
  return new Rejected({ status: HTTP_STATUS[error.kind], body, reason });
}

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};

export async function receiveWebhookPost(deps: Deps, request: WebhookPostRequest): Promise<WebhookPostAnswer> {
  const webhook = idPattern("webhook").test(request.webhookId)
    ? (await deps.db.select().from(inboundWebhooks).where(eq(inboundWebhooks.id, request.webhookId)).limit(1))[0]
    : undefined;
  if (!webhook) return { status: 404, body: { message: WEBHOOK_NOT_FOUND }, headers: {} };

  const rawKey = header(request.headers, IDEMPOTENCY_HEADER);
  // The log keeps what was sent, cut to the column's measure when it was too long.
  const idempotencyKey = rawKey === undefined ? null : rawKey.slice(0, MAX_IDEMPOTENCY_KEY_LENGTH);
  const log = (status: number, outcome: WebhookOutcome, reason: string | null, messageId: string | null = null) =>
    logRequest(deps.db, deps, webhook, { status, outcome, reason, idempotencyKey, ip: request.ip, messageId });

  try {
    return await handle(deps, webhook, request, rawKey);
  } catch (error) {
    if (!(error instanceof Rejected)) throw error;
    const { rejection } = error;
    // A replay is an accepted request: the log says so, with the reason.
    const outcome: WebhookOutcome = rejection.status < 400 ? "accepted" : "rejected";
    await log(rejection.status, outcome, rejection.reason);
    return { status: rejection.status, body: rejection.body, headers: rejection.headers ?? {} };
  }
}

async function handle(
  deps: Deps,
  webhook: InboundWebhook,
  request: WebhookPostRequest,
  rawKey: string | undefined,
): Promise<WebhookPostAnswer> {
  // 2. The quota counts every request that reached a webhook, whatever becomes of it.
  try {
    await deps.throttle.hit("webhookQuota", webhook.workspaceId);
  } catch (error) {
    if (error instanceof AppError && error.kind === "throttled")
      throw reject(429, error.message, "quota_exceeded", { "Retry-After": String(error.retryAfterSeconds) });
    throw error;
  }
  // 3.
  if (!webhook.isActive) throw reject(403, "This webhook is inactive.", "inactive");

  // 4. The body is read before the secret is checked (the secret may be in it), but a body
  // that did not parse is reported only to a caller who proved the secret another way.
  let fields: Record<string, unknown> | undefined;
  let unreadable: AppError | undefined;
  try {
    if (request.bodyError) throw request.bodyError;
    fields = parseBody(request.raw, request.contentType);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    unreadable = error;
  }
  authenticate(deps, webhook, request, fields);
  if (unreadable) throw rejectedFrom(unreadable, "malformed_body");

  // 5.
  const unsafe = findUnsafeText(fields);
  if (unsafe.length > 0) throw rejectedFrom(unsafeTextError(unsafe), "validation_failed");
  const parsed = postBody.safeParse(fields);
  if (!parsed.success) throw rejectedFrom(validationErrorFromZod(parsed.error), "validation_failed");
  if (rawKey !== undefined && (rawKey.length === 0 || rawKey.length > MAX_IDEMPOTENCY_KEY_LENGTH))
    throw rejectedFrom(
      invalidField("idempotency_key", "The Idempotency-Key header must be 1 to 255 characters."),
      "validation_failed",
    );
  const body = parsed.data;
  const requestHash = hashOfFields(body);

  // 6.
  if (rawKey !== undefined) await replayIfKnown(deps, webhook, rawKey, requestHash);

  // 7.
  const channelId = body.channel_id ?? webhook.defaultChannelId;
  if (!channelId)
    throw rejectedFrom(
      invalidField("channel_id", "The channel id field is required when the webhook has no default channel."),
      "validation_failed",
    );

  // 8.
  const now = deps.clock.now();
  const outcome = await postMessageOutcome(deps, {
    author: {
      type: "bot",
      webhookId: webhook.id,
      name: webhook.botName ?? webhook.name,
      avatarUrl: webhook.botAvatarUrl,
    },
    target: { kind: "channel", workspaceId: webhook.workspaceId, channelId },
    content: body.content,
    skipTranslation: body.skip_translation ?? false,
    // The key and the log entry are written in the message's own statement.
    alsoWrite: (record) => ({
      guard:
        rawKey === undefined
          ? undefined
          : claimKeySql(now, webhook.id, rawKey, requestHash, JSON.stringify({ data: record })),
      after: [
        logRequestSql(now, webhook, {
          status: 201,
          outcome: "accepted",
          reason: null,
          idempotencyKey: rawKey ?? null,
          ip: request.ip,
          messageId: record.id,
        }),
      ],
    }),
  });
  // The same key committed by a request that ran at the same moment (on this process or
  // another): this one wrote nothing; answer what that one answered.
  if (outcome.kind === "guarded") {
    await replayIfKnown(deps, webhook, rawKey!, requestHash);
    throw new Error("an idempotency key was taken, then not found");
  }
  const message = outcome.kind === "posted" || outcome.kind === "repeated" ? outcome.record : null;
  if (!message)
    throw rejectedFrom(invalidField("channel_id", "The selected channel id is invalid."), "validation_failed");
  return { status: 201, body: { data: message }, headers: {} };
}

function authenticate(
  deps: Deps,
  webhook: InboundWebhook,
  request: WebhookPostRequest,
  fields: Record<string, unknown> | undefined,
): void {
  // Only the secret this webhook's scheme uses is unsealed.
  if (webhook.signatureRequired) {
    const check = checkSignature(
      header(request.headers, SIGNATURE_HEADER),
      unseal(deps.config.appKey, webhook.signingSecretSealed),
      request.raw,
      deps.clock.now().getTime(),
    );
    if (!check.ok) {
      const message =
        check.reason === "timestamp_out_of_window"
          ? "The signature's timestamp is outside the 5-minute window."
          : check.reason === "signature_missing"
            ? "This webhook requires an X-Service-Signature header."
            : "Invalid webhook signature.";
      throw reject(401, message, check.reason);
    }
    return;
  }
  const sent =
    header(request.headers, SECRET_HEADER) ?? (typeof fields?.secret === "string" ? fields.secret : undefined);
  if (!sent) throw reject(401, "The webhook secret is missing.", "secret_missing");
  // Compared as hashes: equal lengths, constant time, whatever was sent.
  const secret = unseal(deps.config.appKey, webhook.secretSealed);
  if (!safeEqual(sha256Hex(sent), sha256Hex(secret))) throw reject(401, "Invalid webhook secret.", "secret_invalid");
}

/** The request's fields as one hash, the secret left out: a retry may move the secret to a header. */
function hashOfFields(body: PostBody): string {
  return sha256Hex(JSON.stringify([body.content, body.channel_id ?? null, body.skip_translation ?? false]));
}

/** A stored result for this key (not older than the retention): replayed, or 422 for other fields. */
async function replayIfKnown(deps: Deps, webhook: InboundWebhook, key: string, requestHash: string): Promise<void> {
  const since = new Date(deps.clock.now().getTime() - IDEMPOTENCY_RETENTION_MS);
  const [stored] = await deps.db
    .select()
    .from(webhookIdempotencyKeys)
    .where(
      and(
        eq(webhookIdempotencyKeys.webhookId, webhook.id),
        eq(webhookIdempotencyKeys.key, key),
        gt(webhookIdempotencyKeys.createdAt, since),
      ),
    )
    .limit(1);
  if (!stored) return;
  if (stored.requestHash !== requestHash)
    throw rejectedFrom(
      invalidField("idempotency_key", "This Idempotency-Key was used with a different request."),
      "idempotency_key_reused",
    );
  throw new Rejected({
    status: stored.status,
    body: JSON.parse(stored.body) as unknown,
    reason: "idempotent_replay",
    headers: { "Idempotent-Replayed": "true" },
  });
}

/**
 * The key's row, as the guard of the message's statement (written only when the bot may post).
 * A concurrent request with the same key waits on the row's lock until the first commits, then
 * finds the key taken (and writes no message). A row past the retention is taken over.
 */
function claimKeySql(now: Date, webhookId: string, key: string, requestHash: string, body: string): SQL {
  const at = now.toISOString();
  const expired = new Date(now.getTime() - IDEMPOTENCY_RETENTION_MS).toISOString();
  return sql`insert into ${webhookIdempotencyKeys} (webhook_id, key, request_hash, status, body, created_at)
    select ${webhookId}, ${key}, ${requestHash}, 201, ${body}, ${at}::timestamptz where exists (select 1 from allowed)
    on conflict (webhook_id, key) do update set request_hash = excluded.request_hash, status = 201,
      body = excluded.body, created_at = excluded.created_at
    where ${webhookIdempotencyKeys.createdAt} <= ${expired}::timestamptz
    returning 1`;
}

type LogEntry = {
  status: number;
  outcome: WebhookOutcome;
  reason: string | null;
  idempotencyKey: string | null;
  ip: string;
  messageId: string | null;
};

/** The log entry of an accepted post, written in the message's statement once the message is. */
function logRequestSql(now: Date, webhook: InboundWebhook, entry: LogEntry): SQL {
  return sql`insert into ${webhookRequests} (id, webhook_id, status, outcome, reason, idempotency_key, ip, message_id, created_at)
    select ${newId("webhookRequest", now.getTime())}, ${webhook.id}, ${entry.status}::integer, ${entry.outcome},
      ${entry.reason}, ${entry.idempotencyKey}, ${entry.ip}, ${entry.messageId}, ${now.toISOString()}::timestamptz
    where exists (select 1 from inserted)`;
}

async function logRequest(
  db: Executor,
  deps: Pick<Deps, "clock">,
  webhook: InboundWebhook,
  entry: LogEntry,
): Promise<void> {
  const now = deps.clock.now();
  await db.insert(webhookRequests).values({
    id: newId("webhookRequest", now.getTime()),
    webhookId: webhook.id,
    ...entry,
    createdAt: now,
  });
}
