// Inbound webhook posting (contract, "Inbound webhook posting"; docs/webhooks.md): a bot posts
// into a channel of its workspace with the webhook's secret, or its signature. The checks run
// in this order, and every request past the first is written to the webhook's request log:
//   1. unknown webhook: not found (nothing to log it under, nothing counted);
//   2. the workspace's hourly quota, counting every request, rejected ones too: throttled;
//   3. inactive webhook: forbidden;
//   4. the secret (static scheme), or the signature (signature_required): unauthenticated;
//   5. the body (bad request, unsupported media type) and its fields (validation), the
//      Idempotency-Key's length (validation);
//   6. a known Idempotency-Key: its first result replayed, or validation when the fields differ;
//   7. the channel (the one named, else the default): validation on channel_id;
//   8. the message, through the one message service, with its log entry and its idempotency
//      key in its transaction: posted.
// The service answers what happened (WebhookPostOutcome); the door (server/http/webhook-route.ts)
// turns it into statuses, bodies and headers. The log records the status of that answer: the
// AppError's (HTTP_STATUS, the one table of errors.ts), or 201 for a message posted or replayed.
import { randomBytes } from "node:crypto";
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
import { safeEqual, sha256Hex } from "../../crypto.ts";
import type { Deps } from "../../deps.ts";
import { AppError, forbidden, HTTP_STATUS, invalidField, notFound, throttled } from "../../errors.ts";
import { idPattern, newId } from "../../ids.ts";
import { findUnsafeText, unsafeTextError } from "../../input-text.ts";
import type { MessageRecord } from "../../records/message.ts";
import { booleanInput, validationErrorFromZod } from "../../validation.ts";
import { postMessageOutcome } from "../messaging/post-message.ts";
import { WEBHOOK_NOT_FOUND } from "./manage.ts";
import { openStored, SEALED } from "../keys/sealed-values.ts";
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
  /**
   * The body's fields, parsed by the door. Throws the AppError of a body that could not be read
   * (too large, cut short) or parsed (malformed, another media type): reported once the secret
   * is proved. Called only for a webhook that exists, is within its quota and is active.
   */
  fields: () => Record<string, unknown>;
  headers: IncomingHttpHeaders;
  ip: string;
};

/** Why a request was refused, as the request log records it. */
export type WebhookRejectionReason =
  | "unknown_webhook"
  | "quota_exceeded"
  | "inactive"
  | "signature_missing"
  | "signature_malformed"
  | "timestamp_out_of_window"
  | "signature_invalid"
  | "secret_missing"
  | "secret_invalid"
  | "malformed_body"
  | "validation_failed"
  | "idempotency_key_reused";

/**
 * What became of a post. `replayed`: a known Idempotency-Key, answered with its first result.
 * `rejected`: the AppError says what the client is told (a throttled one its retryAfterSeconds).
 */
export type WebhookPostOutcome =
  | { kind: "posted"; message: MessageRecord }
  | { kind: "replayed"; message: MessageRecord }
  | { kind: "rejected"; reason: WebhookRejectionReason; error: AppError };

type Settled = Exclude<WebhookPostOutcome, { kind: "posted" }>;

/** A request settled before a message was posted (refused, or replayed): ends `handle`, logged once. */
class SettledEarly extends Error {
  constructor(
    readonly outcome: Settled,
    /** The status the request log records: the first result's, for a replay. */
    readonly loggedStatus: number,
  ) {
    super(outcome.kind);
  }
}

const rejected = (reason: WebhookRejectionReason, error: AppError): SettledEarly =>
  new SettledEarly({ kind: "rejected", reason, error }, HTTP_STATUS[error.kind]);

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};

export async function receiveWebhookPost(deps: Deps, request: WebhookPostRequest): Promise<WebhookPostOutcome> {
  const webhook = idPattern("webhook").test(request.webhookId)
    ? (await deps.db.select().from(inboundWebhooks).where(eq(inboundWebhooks.id, request.webhookId)).limit(1))[0]
    : undefined;
  if (!webhook) return { kind: "rejected", reason: "unknown_webhook", error: notFound(WEBHOOK_NOT_FOUND) };

  const rawKey = header(request.headers, IDEMPOTENCY_HEADER);
  // The log keeps what was sent, cut to the column's measure when it was too long.
  const idempotencyKey = rawKey === undefined ? null : rawKey.slice(0, MAX_IDEMPOTENCY_KEY_LENGTH);
  const log = (status: number, outcome: WebhookOutcome, reason: string | null, messageId: string | null = null) =>
    logRequest(deps.db, deps, webhook, { status, outcome, reason, idempotencyKey, ip: request.ip, messageId });

  try {
    return await handle(deps, webhook, request, rawKey);
  } catch (error) {
    if (!(error instanceof SettledEarly)) throw error;
    const { outcome } = error;
    // A replay is an accepted request: the log says so, with the reason.
    if (outcome.kind === "replayed") await log(error.loggedStatus, "accepted", "idempotent_replay");
    else await log(error.loggedStatus, "rejected", outcome.reason);
    return outcome;
  }
}

async function handle(
  deps: Deps,
  webhook: InboundWebhook,
  request: WebhookPostRequest,
  rawKey: string | undefined,
): Promise<WebhookPostOutcome> {
  // 2. The quota counts every request that reached a webhook, whatever becomes of it.
  const quota = await deps.throttle.take("webhookQuota", webhook.workspaceId);
  if (quota.exceeded) throw rejected("quota_exceeded", throttled(quota.resetSeconds));
  // 3.
  if (!webhook.isActive) throw rejected("inactive", forbidden("This webhook is inactive."));

  // 4. The body is read before the secret is checked (the secret may be in it), but a body
  // that did not parse is reported only to a caller who proved the secret another way.
  let fields: Record<string, unknown> | undefined;
  let unreadable: AppError | undefined;
  try {
    fields = request.fields();
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    unreadable = error;
  }
  authenticate(deps, webhook, request, fields);
  if (unreadable) throw rejected("malformed_body", unreadable);

  // 5.
  const unsafe = findUnsafeText(fields);
  if (unsafe.length > 0) throw rejected("validation_failed", unsafeTextError(unsafe));
  const parsed = postBody.safeParse(fields);
  if (!parsed.success) throw rejected("validation_failed", validationErrorFromZod(parsed.error));
  if (rawKey !== undefined && (rawKey.length === 0 || rawKey.length > MAX_IDEMPOTENCY_KEY_LENGTH))
    throw rejected(
      "validation_failed",
      invalidField("idempotency_key", "The Idempotency-Key header must be 1 to 255 characters."),
    );
  const body = parsed.data;
  const requestHash = hashOfFields(body);

  // 6.
  if (rawKey !== undefined) await replayIfKnown(deps, webhook, rawKey, requestHash);

  // 7.
  const channelId = body.channel_id ?? webhook.defaultChannelId;
  if (!channelId)
    throw rejected(
      "validation_failed",
      invalidField("channel_id", "The channel id field is required when the webhook has no default channel."),
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
  if (!message) throw rejected("validation_failed", invalidField("channel_id", "The selected channel id is invalid."));
  return { kind: "posted", message };
}

function authenticate(
  deps: Deps,
  webhook: InboundWebhook,
  request: WebhookPostRequest,
  fields: Record<string, unknown> | undefined,
): void {
  // Only the secret this webhook's scheme uses is unsealed.
  if (webhook.signatureRequired) {
    // A secret no configured key opens matches no signature (it is kept, and said at start).
    const signingSecret = openStored(deps, SEALED.webhookSigningSecret, webhook.id, webhook.signingSecretSealed);
    const check = checkSignature(
      header(request.headers, SIGNATURE_HEADER),
      signingSecret ?? randomBytes(32).toString("base64url"),
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
      throw rejected(check.reason, new AppError("unauthenticated", message));
    }
    return;
  }
  const sent =
    header(request.headers, SECRET_HEADER) ?? (typeof fields?.secret === "string" ? fields.secret : undefined);
  if (!sent) throw rejected("secret_missing", new AppError("unauthenticated", "The webhook secret is missing."));
  // Compared as hashes: equal lengths, constant time, whatever was sent.
  const secret = openStored(deps, SEALED.webhookSecret, webhook.id, webhook.secretSealed);
  if (secret === null || !safeEqual(sha256Hex(sent), sha256Hex(secret)))
    throw rejected("secret_invalid", new AppError("unauthenticated", "Invalid webhook secret."));
}

/** The request's fields as one hash, the secret left out: a retry may move the secret to a header. */
function hashOfFields(body: PostBody): string {
  return sha256Hex(JSON.stringify([body.content, body.channel_id ?? null, body.skip_translation ?? false]));
}

/** A stored result for this key (not older than the retention): replayed, or a validation error for other fields. */
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
    throw rejected(
      "idempotency_key_reused",
      invalidField("idempotency_key", "This Idempotency-Key was used with a different request."),
    );
  // The key's row keeps the first answer as written by claimKeySql: {data: message}.
  const first = JSON.parse(stored.body) as { data: MessageRecord };
  throw new SettledEarly({ kind: "replayed", message: first.data }, stored.status);
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
