// The push worker's work (docs/push.md). For the messages of a consumer's batch
// (`push.messages`): find whom each is for (audience.ts: levels, mentions, threads, muted
// places), their devices and each recipient's badge, in one statement, and send through each
// configured provider in its batch size, SENT_AT_ONCE messages at a time, saving the job's
// progress between steps. For a retry (`push.message`): the same for one message and the devices
// it names. For a silent badge update (`push.badge`, badge-updates.ts): one user's devices and
// badge. A device the provider calls dead is deleted; the sends that may still succeed (429, 5xx,
// timeouts) are enqueued again for just those devices, after the provider's Retry-After or an
// exponential backoff, so an outage delays pushes and doubles none.
import { setImmediate } from "node:timers/promises";
import { inArray, sql, type SQL } from "drizzle-orm";
import { jsonOf } from "../../../db/client.ts";
import {
  arrayLiteral,
  arrayParam,
  prepared,
  renderStatement,
  runRendered,
  runStatement,
} from "../../../db/prepared.ts";
import { attachments, channels, messages, pushDevices, rooms, users } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { retryDelayMs, type Backoff } from "../../jobs/backoff.ts";
import { enqueueJobs, type OutboxJob } from "../../jobs/outbox.ts";
import { mapLimit } from "../../provider-http.ts";
import { openStored, SEALED } from "../keys/sealed-values.ts";
import { totalMentions } from "../messaging/unread-counts.ts";
import { doNotDisturb } from "../presence/settings.ts";
import { pushCandidatesOfPlace, pushMessageRows, pushWanted } from "./audience.ts";
import { pushJobId, pushJobs, SENT_AT_ONCE, type PushJobPayload, type PushMessagesPayload } from "./jobs.ts";
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

/** A message of the delivery statement's answer, with the ids of the users it goes to. */
type RecipientMessage = {
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
  user_ids: number[];
};

/** The delivery statement's one row: its messages, and every recipient's devices once. */
type RecipientDevicesRow = { messages: unknown; devices: unknown };

/** A message to push: what its notification says, and the devices it goes to with their badges. */
type MessagePush = { messageId: string; loaded: MessageForPush; devices: DeviceRow[] };

/**
 * One statement for several messages (`messageIds`, an SQL text[]), answering one row: the
 * messages somebody gets, each with the users it is for (audience.ts) who have a device and are
 * not `dnd` now (docs/presence.md: their counts still grow, nothing is pushed) and what its
 * notification says (its sender, its place's name, its files' names); and the devices of all
 * those users once, each with its user's badge, counted once for all the messages (they
 * committed before their events reached the consumer, so they count). Badges are computed for
 * recipients with a device only. `messageIds` and `now` (a `timestamptz`) are SQL: values, or
 * placeholders of the kept rendering. Each place's candidates are made distinct once (a user
 * appears twice in a conversation with oneself), so the pairs of message and recipient need no
 * `distinct`: sorting a job's thousand pairs by their text ids was 3.5 ms of its 8.
 */
function recipientDevicesStatement(messageIds: SQL, now: SQL, retry: PushJobPayload["retry"]): SQL {
  return sql`
      with pushed as materialized (select * from ${pushMessageRows(messageIds)}),
      candidates as materialized (
        select distinct m.kind, m.place_id, c.user_id, c.level
        from (select distinct kind, place_id, workspace_id from pushed) m cross join lateral (${pushCandidatesOfPlace}) c
        where exists (select 1 from ${pushDevices} rd where rd.user_id = c.user_id ${retryFilter("rd", retry)})
          and not ${doNotDisturb(sql`c.user_id`, now)}),
      recipients as materialized (
        select m.id as message_id, c.user_id
        from pushed m join candidates c on c.kind = m.kind and c.place_id = m.place_id
        where ${pushWanted}),
      badges as materialized (
        select recipient.user_id, ${totalMentions(sql`recipient.user_id`)} as badge
        from (select distinct user_id from recipients) recipient),
      by_message as materialized (
        select message_id, array_agg(user_id) as user_ids from recipients group by message_id)
      select
        (select json_agg(json_build_object('id', m.id, 'workspace_id', m.workspace_id, 'channel_id', m.channel_id,
            'conversation_id', m.conversation_id, 'room_id', m.room_id, 'parent_message_id', m.parent_message_id,
            'content', m.content, 'sender_name', coalesce(u.name, m.author_name, 'Someone'), 'channel_name', c.name,
            'room_name', rm.name, 'user_ids', b.user_ids,
            'attachment_names', (select array_agg(a.filename order by a.id) from ${attachments} a where a.message_id = m.id)))
          from by_message b join ${messages} m on m.id = b.message_id
            left join ${users} u on u.id = m.author_user_id
            left join ${channels} c on c.id = m.channel_id
            left join ${rooms} rm on rm.id = m.room_id) as messages,
        (select json_agg(json_build_object('user_id', d.user_id, 'id', d.id, 'provider', d.provider,
            'platform', d.platform, 'token_sealed', d.token_sealed, 'badge', b.badge))
          from badges b join ${pushDevices} d on d.user_id = b.user_id
          where true ${retryFilter("d", retry)}) as devices`;
}

/** The pushes of `messageIds` that go to anyone, in the order of `messageIds`. */
async function recipientDevices(
  deps: Deps,
  messageIds: string[],
  retry: PushJobPayload["retry"],
): Promise<MessagePush[]> {
  // Prepared (its text is the same for every job): PostgreSQL took about 5 ms to plan it, more
  // than to run it, when it came as a new statement for every job. A first send's rendering is
  // kept too (drizzle built its text anew for every job); a retry names its devices in it.
  const now = deps.clock.now().toISOString();
  const row = retry
    ? await runStatement<RecipientDevicesRow>(
        deps.db,
        recipientDevicesStatement(sql`${arrayParam(messageIds)}::text[]`, sql`${now}::timestamptz`, retry),
      )
    : await runRendered<RecipientDevicesRow>(
        deps.db,
        prepared(deps.db, "push_recipient_devices", () =>
          renderStatement(
            recipientDevicesStatement(
              sql`${sql.placeholder("messageIds")}::text[]`,
              sql`${sql.placeholder("now")}::timestamptz`,
              undefined,
            ),
          ),
        ),
        { messageIds: arrayLiteral(messageIds), now },
      );
  // Each user's devices, read once for all the messages.
  const devicesOf = new Map<number, DeviceRow[]>();
  for (const device of jsonOf<(DeviceRow & { user_id: number })[] | null>(row?.devices ?? null) ?? []) {
    const ofUser = devicesOf.get(device.user_id);
    if (ofUser) ofUser.push(device);
    else devicesOf.set(device.user_id, [device]);
  }
  const byId = new Map(
    (jsonOf<RecipientMessage[] | null>(row?.messages ?? null) ?? []).map((message) => [message.id, message]),
  );
  return messageIds.flatMap((messageId) => {
    const message = byId.get(messageId);
    if (!message) return [];
    const devices = message.user_ids.flatMap((userId) => devicesOf.get(userId) ?? []);
    if (devices.length === 0) return [];
    return [
      {
        messageId,
        loaded: {
          message: {
            id: message.id,
            workspaceId: message.workspace_id,
            channelId: message.channel_id,
            conversationId: message.conversation_id,
            roomId: message.room_id,
            parentMessageId: message.parent_message_id,
            content: message.content,
          },
          senderName: message.sender_name,
          channelName: message.channel_name,
          roomName: message.room_name,
          attachmentNames: message.attachment_names ?? [],
        },
        devices,
      },
    ];
  });
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

/**
 * `push.messages`: the messages of one batch of the consumer, SENT_AT_ONCE at a time (their
 * sends share the providers' requests), after one statement for all of them. After each step
 * that sent anything, the job saves how many messages it has done, so that a run after a crash
 * starts after them: what it can send twice is the step in flight.
 */
export async function deliverPushes(
  deps: Deps,
  providers: PushProviders,
  payload: PushMessagesPayload,
  saveProgress: (payload: PushMessagesPayload) => Promise<void>,
): Promise<void> {
  const done = payload.done ?? 0;
  // Whom they are for, and what to tell them, in one statement: at the default level most
  // channel messages are for nobody, and such a job costs just that.
  const pushes = await recipientDevices(deps, payload.messageIds.slice(done), undefined);
  const indexOf = new Map(payload.messageIds.map((id, index) => [id, index]));
  for (let start = 0; start < pushes.length;) {
    // The next step: the messages to send up to SENT_AT_ONCE places further in the payload.
    const first = indexOf.get(pushes[start]!.messageId)!;
    const end = Math.min(first + SENT_AT_ONCE, payload.messageIds.length);
    let stop = start;
    while (stop < pushes.length && indexOf.get(pushes[stop]!.messageId)! < end) stop++;
    // What the steps before sent is not sent again by a later run.
    if (start > 0) await saveProgress({ ...payload, done: first });
    await sendPushes(deps, providers, pushes.slice(start, stop), undefined);
    start = stop;
  }
}

/** `push.message`: one message, or its retry for the devices a provider refused for now. */
export async function deliverPush(deps: Deps, providers: PushProviders, payload: PushJobPayload): Promise<void> {
  const pushes = await recipientDevices(deps, [payload.messageId], payload.retry);
  await sendPushes(deps, providers, pushes, payload.retry);
}

/**
 * Sends the notifications of `pushes` (one each, the original text: translations are not built
 * yet, with each recipient's badge) together, and enqueues in one statement the retries of the
 * sends that may still succeed, one job per message and provider.
 */
async function sendPushes(
  deps: Deps,
  providers: PushProviders,
  pushes: MessagePush[],
  retry: PushJobPayload["retry"],
): Promise<void> {
  if (pushes.length === 0) return;
  // The device is referred to, not spread: copying its parsed row was 3.5 µs a send.
  const rows = pushes.flatMap((push) => {
    const notification = pushNotificationFor(push.loaded);
    return push.devices.map((device) => ({ device, messageId: push.messageId, notification }));
  });
  const log = pushes.length === 1 ? { messageId: pushes[0]!.messageId } : { messageIds: pushes.length };
  const outcomes = await sendToDevices(
    deps,
    providers,
    rows,
    (row, target) => ({ target, notification: row.notification, badge: Number(row.device.badge) }),
    log,
  );
  const retries: OutboxJob<PushJobPayload>[] = [];
  for (const [provider, sent] of outcomes) {
    const byMessage = new Map<string, PushOutcome[]>();
    for (const { row, outcome } of sent) {
      const ofMessage = byMessage.get(row.messageId);
      if (ofMessage) ofMessage.push(outcome);
      else byMessage.set(row.messageId, [outcome]);
    }
    for (const [messageId, ofMessage] of byMessage) {
      const next = retryJob(deps, provider, ofMessage, {
        attempt: retry?.attempt ?? 1,
        maxAttempts: MAX_PUSH_ATTEMPTS,
        next: (again) => ({
          payload: { messageId, retry: again },
          jobId: `${pushJobId(messageId)}-${provider}-${again.attempt}`,
        }),
        log: { messageId },
      });
      if (next) retries.push(next);
    }
  }
  await enqueueJobs(deps.db, deps.clock.now(), pushJobs.message, retries);
}

/**
 * Sends to each device through its provider, in the provider's batch size; deletes the devices
 * the provider calls dead (and those whose token no longer opens); answers, per provider, each
 * send's row with its outcome, for the caller's retries.
 */
export async function sendToDevices<Row extends { device: DeviceRow }>(
  deps: Deps,
  providers: PushProviders,
  rows: Row[],
  sendOf: (row: Row, target: PushTarget) => PushSend,
  log: Record<string, unknown>,
): Promise<Map<PushProviderName, { row: Row; outcome: PushOutcome }[]>> {
  const byProvider = new Map<PushProviderName, { rows: Row[]; sends: PushSend[] }>();
  const unreadable = new Set<string>();
  for (const [index, row] of rows.entries()) {
    // The server's requests share this thread: a large channel is prepared in slices.
    if (index > 0 && index % SLICE === 0) await setImmediate();
    const device = row.device;
    if (!providers.has(device.provider)) continue; // not configured: said once at start
    // Opened once per process (openStored keeps what it opened): a channel's devices are read for each of its messages.
    const token = openStored(deps, SEALED.pushToken, device.id, device.token_sealed);
    if (token === null) {
      // Sealed under a key this process does not hold: kept, and skipped until the key is back.
      unreadable.add(device.id);
      continue;
    }
    const ofProvider = byProvider.get(device.provider) ?? { rows: [], sends: [] };
    ofProvider.rows.push(row);
    ofProvider.sends.push(sendOf(row, { deviceId: device.id, token, platform: device.platform }));
    byProvider.set(device.provider, ofProvider);
  }

  // A provider answers one outcome per send, in the order of the sends.
  const results = await Promise.all(
    [...byProvider].map(async ([name, { rows: sentRows, sends }]) => {
      const outcomes = await inBatches(providers.get(name)!, sends);
      return [name, outcomes.map((outcome, index) => ({ row: sentRows[index]!, outcome }))] as const;
    }),
  );

  const gone = new Set<string>();
  for (const [name, sent] of results) {
    for (const { outcome } of sent) if (outcome.result === "unregistered") gone.add(outcome.deviceId);
    const failed = sent.flatMap(({ outcome }) => (outcome.result === "failed" ? [outcome] : []));
    if (failed.length > 0) {
      deps.logger.warn(
        { provider: name, ...log, failed: failed.length, reason: failed[0]!.reason },
        "push: the provider refused some notifications; not retried",
      );
    }
  }
  if (unreadable.size > 0) {
    deps.logger.warn(
      { ...log, devices: unreadable.size },
      "push: skipped devices whose token no configured key opens (set APP_KEY_PREVIOUS to the key that sealed them; docs/operations.md)",
    );
  }
  if (gone.size > 0) await deps.db.delete(pushDevices).where(inArray(pushDevices.id, [...gone]));
  return new Map(results);
}

type Retry = NonNullable<PushJobPayload["retry"]>;

/** How a job is tried again for the devices whose send may still succeed. */
export type RetryPlan<Payload> = {
  /** The attempt that just ran (1: the first). */
  attempt: number;
  maxAttempts: number;
  /** The next attempt's payload and (stable) job id. */
  next: (retry: Retry) => { payload: Payload; jobId: string };
  log: Record<string, unknown>;
};

/**
 * The job that tries again the sends of `outcomes` that may still succeed (one provider's), after
 * the provider's Retry-After or the backoff; none when there are none or it was the last attempt.
 * The caller enqueues it (with the others of its sends, in one statement).
 */
export function retryJob<Payload>(
  deps: Deps,
  provider: PushProviderName,
  outcomes: PushOutcome[],
  plan: RetryPlan<Payload>,
): OutboxJob<Payload> | undefined {
  const retries = outcomes.flatMap((outcome) => (outcome.result === "retry" ? [outcome] : []));
  if (retries.length === 0) return undefined;
  const attempt = plan.attempt + 1;
  if (attempt > plan.maxAttempts) {
    deps.logger.warn(
      { provider, ...plan.log, devices: retries.length, reason: retries[0]!.reason },
      "push: gave up after the last attempt",
    );
    return undefined;
  }
  const retryAfters = retries.flatMap((outcome) => (outcome.retryAfterMs === undefined ? [] : [outcome.retryAfterMs]));
  const delayMs = retryDelayMs(PUSH_BACKOFF, attempt, retryAfters.length > 0 ? Math.max(...retryAfters) : undefined);
  const { payload, jobId } = plan.next({ provider, deviceIds: retries.map((outcome) => outcome.deviceId), attempt });
  deps.logger.info(
    { provider, ...plan.log, devices: retries.length, attempt, delayMs, reason: retries[0]!.reason },
    "push: will try again",
  );
  return { payload, jobId, delayMs };
}
