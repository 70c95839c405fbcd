// Attempts of deliveries (docs/outbound-webhooks.md): the stored body is POSTed to the
// webhook's URL, signed afresh (`X-Service-Signature: t=…,v1=<hex HMAC-SHA256 of "<t>.<body>">`),
// through the SSRF guard (no private targets unless OUTBOUND_ALLOW_PRIVATE, checked at connect
// time; no redirects), within 10 s. A 2xx is success. Otherwise the next attempt is scheduled
// (8 in all, over about a day), then the delivery is failed. Every attempt is logged with its
// status code, duration, error and the first 1 KB of the answer. A webhook whose every attempt
// has failed for a day is switched off, with the reason shown to its managers. The jobs that
// arrive while others are out go together (server/jobs/batcher.ts): one read, their requests at
// once, one statement for their results.
import { and, eq, inArray, sql } from "drizzle-orm";
import { rowsOf, type Transaction } from "../../../db/client.ts";
import { arrayLiteral, arrayParam, prepared, runStatement } from "../../../db/prepared.ts";
import {
  jobOutbox,
  outboundDeliveries,
  outboundDeliveryAttempts,
  outboundWebhooks,
  type OutboundDelivery,
  type OutboundWebhook,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { retryDelayMs, type Backoff } from "../../jobs/backoff.ts";
import { DEFAULT_REQUEST_TIMEOUT_MS, describeRequestError } from "../../provider-http.ts";
import { guardedPost, RefusedTargetError } from "../../ssrf-guard.ts";
import { openStored, SEALED } from "../keys/sealed-values.ts";
import { signWebhookBody } from "../webhooks/signature.ts";
import { deliverJobId, outboundJobs, type DeliverPayload } from "./jobs.ts";

/** Attempts per delivery, the first included. */
export const DELIVERY_ATTEMPTS = 8;
/** How much of the receiver's answer is kept. */
export const RESPONSE_BODY_LIMIT = 1024;
/**
 * Deliveries sent and not yet recorded at once, in up to 4 batches (what a worker that dies may
 * send again: as many as when each job was one delivery and the queue ran 50 of them at once).
 */
export const DELIVERY_BATCH = { batchSize: 50, atOnce: 4, inFlight: 50 };
/** A webhook whose attempts have all failed for this long is switched off. */
export const FAILING_DISABLES_AFTER_MS = 24 * 3600_000;

/**
 * The wait before attempt 2…8 (`retryDelayMs(DELIVERY_BACKOFF, attempt)`): 30 s, 2 min, 8 min,
 * 32 min, 2 h 8 min, 8 h 32 min, 12 h; 23 h 23 min in all.
 */
export const DELIVERY_BACKOFF: Backoff = {
  firstMs: 30_000,
  factor: 4,
  longestMs: 12 * 3600_000,
  longestRetryAfterMs: 12 * 3600_000,
};

export type AttemptResult = {
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
};

const succeeded = (result: AttemptResult) =>
  result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300;

/** Sends the delivery's body once; never throws (a failure is a result). */
export async function send(
  deps: Pick<Deps, "config" | "clock" | "db" | "keys" | "logger">,
  webhook: OutboundWebhook,
  delivery: Pick<OutboundDelivery, "id" | "event" | "body">,
): Promise<AttemptResult> {
  const timestamp = Math.floor(deps.clock.now().getTime() / 1000);
  const secret = openStored(deps, SEALED.outboundWebhookSecret, webhook.id, webhook.secretSealed);
  if (secret === null) {
    return {
      statusCode: null,
      durationMs: 0,
      error: "no configured key opens the secret: set APP_KEY_PREVIOUS to the key that sealed it",
      responseBody: null,
    };
  }
  const signature = signWebhookBody(secret, timestamp, delivery.body);
  const started = performance.now();
  try {
    const response = await guardedPost(
      webhook.url,
      {
        headers: {
          "content-type": "application/json",
          "user-agent": "chat-service-webhooks/1",
          "x-service-event": delivery.event,
          "x-service-delivery": delivery.id,
          "x-service-signature": `t=${timestamp},v1=${signature}`,
        },
        body: delivery.body,
      },
      {
        timeoutMs: DEFAULT_REQUEST_TIMEOUT_MS,
        allowPrivate: deps.config.outboundAllowPrivate,
        maxResponseBytes: RESPONSE_BODY_LIMIT,
      },
    );
    return {
      statusCode: response.status,
      durationMs: Math.round(response.durationMs),
      error: response.status >= 300 && response.status < 400 ? "redirects are not followed" : null,
      // Kept as text: a NUL (which PostgreSQL's text refuses) becomes U+FFFD, as invalid UTF-8 does.
      responseBody: response.body.replaceAll("\u0000", "\uFFFD"),
    };
  } catch (error) {
    return {
      statusCode: null,
      durationMs: Math.round(performance.now() - started),
      error: error instanceof RefusedTargetError ? `refused target: ${error.message}` : describeRequestError(error),
      responseBody: null,
    };
  }
}

/** The deliveries of a batch of jobs with their webhooks: one statement prepared once (every batch runs it). */
function prepareDeliveryLookup(db: Deps["db"], name: string) {
  return db
    .select({ delivery: outboundDeliveries, webhook: outboundWebhooks })
    .from(outboundDeliveries)
    .innerJoin(outboundWebhooks, eq(outboundWebhooks.id, outboundDeliveries.webhookId))
    .where(sql`${outboundDeliveries.id} = any(${sql.placeholder("ids")}::text[])`)
    .prepare(name);
}

/**
 * The jobs: each delivery's attempt, unless the delivery is settled, that attempt was already
 * made (a job that ran twice), or its webhook is gone. An inactive webhook's delivery fails
 * without being sent.
 */
export async function deliverMany(deps: Deps, payloads: DeliverPayload[]): Promise<void> {
  const jobs = new Map<string, number>();
  for (const { deliveryId, attempt } of payloads) jobs.set(deliveryId, Math.max(attempt, jobs.get(deliveryId) ?? 0));
  const found = await prepared(deps.db, "outbound_deliveries_due", prepareDeliveryLookup).execute({
    ids: arrayLiteral([...jobs.keys()]),
  });
  const due = found.filter(
    ({ delivery }) => delivery.status === "pending" && delivery.attempts < jobs.get(delivery.id)!,
  );
  if (due.length === 0) return;
  const attempts = await Promise.all(
    due.map(async ({ delivery, webhook }): Promise<AttemptRecord> => ({
      delivery,
      attempt: jobs.get(delivery.id)!,
      result: webhook.isActive
        ? await send(deps, webhook, delivery)
        : { statusCode: null, durationMs: 0, error: "the webhook is inactive", responseBody: null },
      retry: webhook.isActive,
      health: webhook.isActive,
      webhookFailing: webhook.failingSince !== null,
    })),
  );
  await recordAttempts(deps, attempts);
}

export type AttemptRecord = {
  delivery: Pick<OutboundDelivery, "id" | "webhookId">;
  attempt: number;
  result: AttemptResult;
  /** A failure schedules the next attempt (while attempts remain). */
  retry: boolean;
  /** The webhook's failing streak follows the result (test sends leave it alone). */
  health: boolean;
  /** Whether its webhook had a failing streak when read (unknown: looked at in the database). */
  webhookFailing?: boolean;
};

/**
 * Logs attempts and settles their deliveries: succeeded, failed, or pending with the next
 * attempt's job, in one statement (`settleStatement`). An attempt recorded before (a job that
 * ran twice) changes nothing. When the batch may move a webhook's failing streak (a failure, or
 * a success of a webhook read with a streak), the streaks are kept in the same transaction.
 */
export async function recordAttempts(
  deps: Pick<Deps, "db" | "clock" | "jobOutbox" | "logger">,
  records: AttemptRecord[],
): Promise<void> {
  if (records.length === 0) return;
  const now = deps.clock.now();
  const movesStreaks = records.some(
    (record) => record.health && (!succeeded(record.result) || record.webhookFailing !== false),
  );
  if (!movesStreaks) {
    await runStatement(deps.db, settleStatement(now, records));
    return;
  }
  const disabled = await deps.db.transaction(async (tx) => {
    const row = await runStatement<{ recorded: string[] | null }>(tx, settleStatement(now, records));
    const recorded = new Set(row?.recorded ?? []);
    return keepHealth(
      tx,
      now,
      records.filter((record) => record.health && recorded.has(`${record.delivery.id} ${record.attempt}`)),
    );
  });
  for (const line of disabled) deps.logger.warn(line);
}

/**
 * One statement: locks the batch's deliveries (one deleted meanwhile, with its webhook, is left
 * out rather than failing the batch), logs each attempt not logged before, settles the delivery
 * of each attempt it logged, and writes the next attempt's job of those to retry. Answers the
 * attempts it logged (`<delivery id> <attempt>`).
 */
function settleStatement(now: Date, records: AttemptRecord[]) {
  const settled = records.map((record) => {
    const ok = succeeded(record.result);
    const again = !ok && record.retry && record.attempt < DELIVERY_ATTEMPTS;
    const delayMs = again ? retryDelayMs(DELIVERY_BACKOFF, record.attempt + 1) : 0;
    return {
      record,
      status: ok ? "succeeded" : again ? "pending" : "failed",
      next: again ? new Date(now.getTime() + delayMs).toISOString() : null,
      completed: again ? null : now.toISOString(),
      nextJobId: again ? deliverJobId({ deliveryId: record.delivery.id, attempt: record.attempt + 1 }) : null,
    };
  });
  const column = <T extends string | number | null>(pick: (entry: (typeof settled)[number]) => T) =>
    arrayParam(settled.map(pick));
  const at = now.toISOString();
  return sql`
    with batch as (select * from unnest(${column(({ record }) => record.delivery.id)}::text[],
        ${column(({ record }) => record.attempt)}::integer[],
        ${column(({ record }) => record.result.statusCode)}::integer[],
        ${column(({ record }) => record.result.durationMs)}::integer[],
        ${column(({ record }) => record.result.error)}::text[],
        ${column(({ record }) => record.result.responseBody)}::text[],
        ${column(({ status }) => status)}::text[],
        ${column(({ next }) => next)}::timestamptz[],
        ${column(({ completed }) => completed)}::timestamptz[],
        ${column(({ nextJobId }) => nextJobId)}::text[])
      as v(delivery_id, attempt, status_code, duration_ms, error, response_body, status, next_attempt_at,
        completed_at, next_job_id)),
    present as (select id from ${outboundDeliveries}
      where id in (select delivery_id from batch) order by id for update),
    logged as (insert into ${outboundDeliveryAttempts}
        (delivery_id, attempt, status_code, duration_ms, error, response_body, created_at)
      select v.delivery_id, v.attempt, v.status_code, v.duration_ms, v.error, v.response_body, ${at}::timestamptz
      from batch v where v.delivery_id in (select id from present)
      on conflict do nothing
      returning delivery_id, attempt),
    recorded as (select v.* from batch v join logged l on l.delivery_id = v.delivery_id and l.attempt = v.attempt),
    settled as (update ${outboundDeliveries} d set attempts = v.attempt, status = v.status,
        next_attempt_at = v.next_attempt_at, completed_at = v.completed_at
      from recorded v where d.id = v.delivery_id
      returning d.id),
    retried as (insert into ${jobOutbox} (name, payload, job_id, run_at, created_at)
      select ${outboundJobs.deliver.name}, jsonb_build_object('deliveryId', v.delivery_id, 'attempt', v.attempt + 1),
        v.next_job_id, v.next_attempt_at, ${at}::timestamptz
      from recorded v where v.next_job_id is not null
      on conflict (job_id) do nothing
      returning 1)
    select (select array_agg(delivery_id || ' ' || attempt) from recorded) as recorded,
      (select count(*) from settled)::integer as settled, (select count(*) from retried)::integer as retried`;
}

/**
 * The failing streaks: a success ends its webhook's streak; a failure starts one (when none
 * runs) or, when it started a day ago or more, switches the webhook off with the reason.
 * Resolves with a log line per webhook switched off.
 */
async function keepHealth(tx: Transaction, now: Date, records: AttemptRecord[]): Promise<string[]> {
  const healthy = new Set(records.filter((r) => succeeded(r.result)).map((r) => r.delivery.webhookId));
  // Only a streak that may be running needs ending: a webhook read without one is not written.
  const mayBeFailing = records.some((r) => healthy.has(r.delivery.webhookId) && r.webhookFailing !== false);
  if (mayBeFailing)
    await tx
      .update(outboundWebhooks)
      .set({ failingSince: null })
      .where(and(inArray(outboundWebhooks.id, [...healthy]), sql`${outboundWebhooks.failingSince} is not null`));
  const failing = new Map<string, AttemptResult>();
  for (const record of records)
    if (!healthy.has(record.delivery.webhookId) && !succeeded(record.result))
      failing.set(record.delivery.webhookId, record.result);
  const disabled: string[] = [];
  const cutoff = new Date(now.getTime() - FAILING_DISABLES_AFTER_MS).toISOString();
  for (const [webhookId, result] of failing) {
    const reason = `Every delivery failed for 24 hours; the last error: ${result.error ?? `HTTP ${result.statusCode}`}.`;
    const switchOff = sql`${outboundWebhooks.isActive} and ${outboundWebhooks.failingSince} <= ${cutoff}::timestamptz`;
    const rows = rowsOf<{ switched: boolean }>(
      await tx.execute(sql`
        update ${outboundWebhooks} set
          failing_since = coalesce(${outboundWebhooks.failingSince}, ${now.toISOString()}::timestamptz),
          is_active = ${outboundWebhooks.isActive} and not coalesce(${switchOff}, false),
          disabled_reason = case when ${switchOff} then ${reason} else ${outboundWebhooks.disabledReason} end
        where ${outboundWebhooks.id} = ${webhookId}
        returning (not ${outboundWebhooks.isActive} and ${outboundWebhooks.disabledReason} = ${reason}) as switched`),
    );
    if (rows[0]?.switched) disabled.push(`outbound webhook ${webhookId} switched off: ${reason}`);
  }
  return disabled;
}
