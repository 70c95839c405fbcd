// The push worker's work (docs/push.md). For a message (`push.message`): find whom it is for
// (audience.ts: levels, mentions, threads, muted places), their devices and each one's badge,
// in one statement, and send through each configured provider in its batch size. For a silent
// badge update (`push.badge`, badge-updates.ts): one user's devices and badge. A device the
// provider calls dead is deleted; the sends that may still succeed (429, 5xx, timeouts) are
// enqueued again for just those devices, after the provider's Retry-After or an exponential
// backoff, so an outage delays pushes and doubles none.
import { setImmediate } from "node:timers/promises";
import { inArray, sql, type SQL } from "drizzle-orm";
import { jsonOf } from "../../../db/client.ts";
import { arrayParam, prepared, renderStatement, runRendered, runStatement } from "../../../db/prepared.ts";
import { attachments, channels, messages, pushDevices, rooms, users } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { retryDelayMs, type Backoff } from "../../jobs/backoff.ts";
import type { JobDefinition } from "../../jobs/definition.ts";
import { enqueueJob } from "../../jobs/outbox.ts";
import { mapLimit } from "../../provider-http.ts";
import { openStored, SEALED } from "../keys/sealed-values.ts";
import { totalMentions } from "../messaging/unread-counts.ts";
import { doNotDisturb } from "../presence/settings.ts";
import { pushMessageRows, pushRecipientsOfRow } from "./audience.ts";
import { pushJobId, pushJobs, type PushJobPayload } from "./jobs.ts";
import { pushNotificationFor, type MessageForPush } from "./notification.ts";
import type { PushOutcome, PushPlatform, PushProvider, PushProviderName, PushSend, PushTarget } from "./provider.ts";
import { retryAll } from "./providers/http.ts";

export type PushProviders = ReadonlyMap<PushProviderName, PushProvider>;

/** Tries per device, the first included: with the backoff below, about an hour of outage. */
export const MAX_PUSH_ATTEMPTS = 16;
const PUSH_BACKOFF: Backoff = { firstMs: 1_000, longestMs: 10 * 60_000, longestRetryAfterMs: 60 * 60_000 };

/** Devices prepared between two turns of the event loop. */
const SLICE = 250;

/** A device to send to, with its user's badge (`total_mentions`), as the delivery statements answer it. */
export type DeviceRow = {
  id: string;
  provider: PushProviderName;
  platform: PushPlatform;
  token_sealed: string;
  badge: number;
};

/** A retry's own devices: `and <device>.provider = … and <device>.id = any(…)`, or nothing. */
export function retryFilter(device: string, retry: PushJobPayload["retry"]): SQL {
  if (!retry) return sql``;
  return sql`and ${sql.raw(device)}.provider = ${retry.provider}
    and ${sql.raw(device)}.id = any(${arrayParam(retry.deviceIds)}::text[])`;
}

type RecipientDevicesRow = {
  id: string;
  workspace_id: string | null;
  channel_id: string | null;
  conversation_id: string | null;
  room_id: string | null;
  parent_message_id: string | null;
  content: string;
  sender_name: string;
  channel_name: string | null;
  room_name: string | null;
  attachment_names: string[] | null;
  devices: unknown;
};

/**
 * One statement: the users the message is for (audience.ts) who have a device and are not
 * `dnd` now (docs/presence.md: their counts still grow, nothing is pushed), each one's
 * badge, counted now (the message committed before its event reached the consumer, so it
 * counts), their devices, and what the notification says of the message (its sender, its
 * place's name, its files' names). Badges are computed once per recipient with a device, never
 * for members without one. No row when nobody gets it (or the message is gone). `messageId`
 * and `now` (a `timestamptz`) are SQL: values, or placeholders of the kept rendering.
 */
function recipientDevicesStatement(messageId: SQL, now: SQL, retry: PushJobPayload["retry"]): SQL {
  return sql`
      with recipients as materialized (
        select distinct r.user_id
        from ${pushMessageRows(sql`array[${messageId}::text]`)} cross join lateral (${pushRecipientsOfRow}) r
        where exists (select 1 from ${pushDevices} rd where rd.user_id = r.user_id ${retryFilter("rd", retry)})
          and not ${doNotDisturb(sql`r.user_id`, now)}),
      badges as materialized (
        select recipient.user_id, ${totalMentions(sql`recipient.user_id`)} as badge from recipients recipient),
      devices as (
        select d.id, d.provider, d.platform, d.token_sealed, b.badge
        from ${pushDevices} d join badges b on b.user_id = d.user_id
        where true ${retryFilter("d", retry)})
      select m.id, m.workspace_id, m.channel_id, m.conversation_id, m.room_id, m.parent_message_id, m.content,
        coalesce(u.name, m.author_name, 'Someone') as sender_name, c.name as channel_name, rm.name as room_name,
        (select array_agg(a.filename order by a.id) from ${attachments} a where a.message_id = m.id) as attachment_names,
        (select json_agg(devices) from devices) as devices
      from ${messages} m
        left join ${users} u on u.id = m.author_user_id
        left join ${channels} c on c.id = m.channel_id
        left join ${rooms} rm on rm.id = m.room_id
      where m.id = ${messageId} and exists (select 1 from devices)`;
}

async function recipientDevices(
  deps: Deps,
  messageId: string,
  retry: PushJobPayload["retry"],
): Promise<{ loaded: MessageForPush; devices: DeviceRow[] } | undefined> {
  // Prepared (its text is the same for every message): PostgreSQL took about 5 ms to plan it,
  // more than to run it, when it came as a new statement for every job. A first send's rendering
  // is kept too (drizzle built its text anew for every job); a retry names its devices in it.
  const now = deps.clock.now().toISOString();
  const row = retry
    ? await runStatement<RecipientDevicesRow>(
        deps.db,
        recipientDevicesStatement(sql`${messageId}`, sql`${now}::timestamptz`, retry),
      )
    : await runRendered<RecipientDevicesRow>(
        deps.db,
        prepared(deps.db, "push_recipient_devices", () =>
          renderStatement(
            recipientDevicesStatement(
              sql`${sql.placeholder("messageId")}`,
              sql`${sql.placeholder("now")}::timestamptz`,
              undefined,
            ),
          ),
        ),
        { messageId, now },
      );
  if (!row) return undefined;
  return {
    loaded: {
      message: {
        id: row.id,
        workspaceId: row.workspace_id,
        channelId: row.channel_id,
        conversationId: row.conversation_id,
        roomId: row.room_id,
        parentMessageId: row.parent_message_id,
        content: row.content,
      },
      senderName: row.sender_name,
      channelName: row.channel_name,
      roomName: row.room_name,
      attachmentNames: row.attachment_names ?? [],
    },
    devices: jsonOf<DeviceRow[]>(row.devices),
  };
}

async function inBatches(provider: PushProvider, sends: PushSend[]): Promise<PushOutcome[]> {
  const batches: PushSend[][] = [];
  for (let start = 0; start < sends.length; start += provider.batchSize) {
    batches.push(sends.slice(start, start + provider.batchSize));
  }
  const outcomes = await mapLimit(batches, provider.concurrentBatches, (batch) =>
    // A provider promises outcomes, not exceptions; if one throws anyway, its batch waits for a retry.
    provider
      .send(batch)
      .catch((error: unknown) => retryAll(batch, error instanceof Error ? error.message : "send failed")),
  );
  return outcomes.flat();
}

export async function deliverPush(deps: Deps, providers: PushProviders, payload: PushJobPayload): Promise<void> {
  // Whom it is for, and what to tell them, in one statement: at the default level most channel
  // messages are for nobody, and such a job costs just that.
  const found = await recipientDevices(deps, payload.messageId, payload.retry);
  if (!found) return;
  // One notification for every recipient (the original text: translations are not built yet),
  // each with their own badge.
  const notification = pushNotificationFor(found.loaded);
  const outcomes = await sendToDevices(
    deps,
    providers,
    found.devices,
    (target, badge) => ({ target, notification, badge }),
    { messageId: payload.messageId },
  );
  for (const [provider, sent] of outcomes) {
    await scheduleRetry(deps, provider, sent, {
      definition: pushJobs.message,
      attempt: payload.retry?.attempt ?? 1,
      maxAttempts: MAX_PUSH_ATTEMPTS,
      next: (retry) => ({
        payload: { messageId: payload.messageId, retry },
        jobId: `${pushJobId(payload.messageId)}-${provider}-${retry.attempt}`,
      }),
      log: { messageId: payload.messageId },
    });
  }
}

/**
 * Sends to each device through its provider, in the provider's batch size; deletes the devices
 * the provider calls dead (and those whose token no longer opens); answers each provider's
 * outcomes, for the caller's retries.
 */
export async function sendToDevices(
  deps: Deps,
  providers: PushProviders,
  rows: DeviceRow[],
  sendOf: (target: PushTarget, badge: number) => PushSend,
  log: Record<string, unknown>,
): Promise<Map<PushProviderName, PushOutcome[]>> {
  const byProvider = new Map<PushProviderName, PushSend[]>();
  const unreadable: string[] = [];
  for (const [index, device] of rows.entries()) {
    // The server's requests share this thread: a large channel is prepared in slices.
    if (index > 0 && index % SLICE === 0) await setImmediate();
    if (!providers.has(device.provider)) continue; // not configured: said once at start
    // Opened once per process (openStored keeps what it opened): a channel's devices are read for each of its messages.
    const token = openStored(deps, SEALED.pushToken, device.id, device.token_sealed);
    if (token === null) {
      // Sealed under a key this process does not hold: kept, and skipped until the key is back.
      unreadable.push(device.id);
      continue;
    }
    const sends = byProvider.get(device.provider) ?? [];
    sends.push(sendOf({ deviceId: device.id, token, platform: device.platform }, Number(device.badge)));
    byProvider.set(device.provider, sends);
  }

  const results = await Promise.all(
    [...byProvider].map(async ([name, sends]) => [name, await inBatches(providers.get(name)!, sends)] as const),
  );

  const gone: string[] = [];
  for (const [name, outcomes] of results) {
    gone.push(...outcomes.filter((outcome) => outcome.result === "unregistered").map((outcome) => outcome.deviceId));
    const failed = outcomes.filter((outcome) => outcome.result === "failed");
    if (failed.length > 0) {
      deps.logger.warn(
        { provider: name, ...log, failed: failed.length, reason: failed[0]!.reason },
        "push: the provider refused some notifications; not retried",
      );
    }
  }
  if (unreadable.length > 0) {
    deps.logger.warn(
      { ...log, devices: unreadable.length },
      "push: skipped devices whose token no configured key opens (set APP_KEY_PREVIOUS to the key that sealed them; docs/operations.md)",
    );
  }
  if (gone.length > 0) await deps.db.delete(pushDevices).where(inArray(pushDevices.id, gone));
  return new Map(results);
}

type Retry = NonNullable<PushJobPayload["retry"]>;

/** How a job is tried again for the devices whose send may still succeed. */
export type RetryPlan<Payload> = {
  definition: JobDefinition<Payload>;
  /** The attempt that just ran (1: the first). */
  attempt: number;
  maxAttempts: number;
  /** The next attempt's payload and (stable) job id. */
  next: (retry: Retry) => { payload: Payload; jobId: string };
  log: Record<string, unknown>;
};

export async function scheduleRetry<Payload>(
  deps: Deps,
  provider: PushProviderName,
  outcomes: PushOutcome[],
  plan: RetryPlan<Payload>,
): Promise<void> {
  const retries = outcomes.flatMap((outcome) => (outcome.result === "retry" ? [outcome] : []));
  if (retries.length === 0) return;
  const attempt = plan.attempt + 1;
  if (attempt > plan.maxAttempts) {
    deps.logger.warn(
      { provider, ...plan.log, devices: retries.length, reason: retries[0]!.reason },
      "push: gave up after the last attempt",
    );
    return;
  }
  const retryAfters = retries.flatMap((outcome) => (outcome.retryAfterMs === undefined ? [] : [outcome.retryAfterMs]));
  const delayMs = retryDelayMs(PUSH_BACKOFF, attempt, retryAfters.length > 0 ? Math.max(...retryAfters) : undefined);
  const { payload, jobId } = plan.next({ provider, deviceIds: retries.map((outcome) => outcome.deviceId), attempt });
  await enqueueJob(deps.db, deps.clock.now(), plan.definition, payload, { jobId, delayMs });
  deps.logger.info(
    { provider, ...plan.log, devices: retries.length, attempt, delayMs, reason: retries[0]!.reason },
    "push: will try again",
  );
}
