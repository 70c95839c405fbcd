// The push worker's work for one message (docs/push.md): find whom it is for (the members of its
// channel or conversation but its author, active accounts only), their devices, and send through each configured provider
// in its batch size. A device the provider calls dead is deleted; the sends that may still
// succeed (429, 5xx, timeouts) are enqueued again for just those devices, after the provider's
// Retry-After or an exponential backoff, so an outage delays pushes and doubles none.
import { setImmediate } from "node:timers/promises";
import { and, asc, eq, inArray, ne, type SQL } from "drizzle-orm";
import { attachments, channels, messages, pushDevices, rooms, users } from "../../../db/schema/index.ts";
import { unseal } from "../../crypto.ts";
import type { Deps } from "../../deps.ts";
import { retryDelayMs, type Backoff } from "../../jobs/backoff.ts";
import { enqueueJob } from "../../jobs/outbox.ts";
import { mapLimit } from "../../outbound-http.ts";
import { placeMemberIds } from "../../policy/audiences.ts";
import { messageTargetOf, type MessageTarget } from "../../policy/places.ts";
import { pushJobId, pushJobs, type PushJobPayload } from "./jobs.ts";
import { pushNotificationFor, type MessageForPush } from "./notification.ts";
import type { PushOutcome, PushProvider, PushProviderName, PushSend } from "./provider.ts";
import { retryAll } from "./providers/http.ts";

export type PushProviders = ReadonlyMap<PushProviderName, PushProvider>;

/** Tries per device, the first included: with the backoff below, about an hour of outage. */
export const MAX_PUSH_ATTEMPTS = 16;
const PUSH_BACKOFF: Backoff = { firstMs: 1_000, longestMs: 10 * 60_000, longestRetryAfterMs: 60 * 60_000 };

/** Devices prepared between two turns of the event loop. */
const SLICE = 250;

/**
 * Unsealed tokens by their sealed form, per process: a channel's devices are read for each of
 * its messages, and opening 1000 seals per message is most of the worker's time. Bounded; the
 * process holds APP_KEY anyway.
 */
const unsealedTokens = new WeakMap<Deps, Map<string, string>>();
const UNSEALED_TOKENS_KEPT = 100_000;

function pushToken(deps: Deps, sealed: string): string | undefined {
  let cache = unsealedTokens.get(deps);
  if (!cache) unsealedTokens.set(deps, (cache = new Map()));
  let token = cache.get(sealed);
  if (token === undefined) {
    try {
      token = unseal(deps.config.appKey, sealed);
    } catch {
      return undefined;
    }
    if (cache.size >= UNSEALED_TOKENS_KEPT) cache.clear();
    cache.set(sealed, token);
  }
  return token;
}

type Loaded = MessageForPush & { authorUserId: number | null; target: MessageTarget };

async function loadMessage(deps: Deps, messageId: string): Promise<Loaded | undefined> {
  const [row] = await deps.db
    .select({ message: messages, userName: users.name, channelName: channels.name, roomName: rooms.name })
    .from(messages)
    .leftJoin(users, eq(users.id, messages.authorUserId))
    .leftJoin(channels, eq(channels.id, messages.channelId))
    .leftJoin(rooms, eq(rooms.id, messages.roomId))
    .where(eq(messages.id, messageId))
    .limit(1);
  // Gone (deleted with its channel or conversation), or a server notice nobody is woken for.
  if (!row || row.message.type === "system") return undefined;
  const { message } = row;
  const target = messageTargetOf(message);
  const files = await deps.db
    .select({ filename: attachments.filename })
    .from(attachments)
    .where(eq(attachments.messageId, messageId))
    .orderBy(asc(attachments.id));
  return {
    message,
    senderName: row.userName ?? message.authorName ?? "Someone",
    channelName: row.channelName,
    roomName: row.roomName,
    attachmentNames: files.map((file) => file.filename),
    authorUserId: message.authorUserId,
    target,
  };
}

/** The devices of the message's channel or conversation members, its author and deactivated accounts left out. */
async function recipientDevices(deps: Deps, loaded: Loaded, retry: PushJobPayload["retry"]) {
  const conditions: SQL[] = [inArray(pushDevices.userId, placeMemberIds(deps.db, loaded.target))];
  if (loaded.authorUserId !== null) conditions.push(ne(pushDevices.userId, loaded.authorUserId));
  if (retry) conditions.push(eq(pushDevices.provider, retry.provider), inArray(pushDevices.id, retry.deviceIds));
  return deps.db
    .select({
      id: pushDevices.id,
      provider: pushDevices.provider,
      platform: pushDevices.platform,
      tokenSealed: pushDevices.tokenSealed,
    })
    .from(pushDevices)
    .innerJoin(users, and(eq(users.id, pushDevices.userId), eq(users.isActive, true)))
    .where(and(...conditions));
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
  const loaded = await loadMessage(deps, payload.messageId);
  if (!loaded) return;
  const rows = await recipientDevices(deps, loaded, payload.retry);
  if (rows.length === 0) return;

  // One notification for every recipient: the original text (translations are not built yet).
  const notification = pushNotificationFor(loaded);
  const byProvider = new Map<PushProviderName, PushSend[]>();
  const unreadable: string[] = [];
  for (const [index, device] of rows.entries()) {
    // The server's requests share this thread: a large channel is prepared in slices.
    if (index > 0 && index % SLICE === 0) await setImmediate();
    if (!providers.has(device.provider)) continue; // not configured: said once at start
    const token = pushToken(deps, device.tokenSealed);
    if (token === undefined) {
      // Sealed under another APP_KEY: the app registers its token again on its next launch.
      unreadable.push(device.id);
      continue;
    }
    const sends = byProvider.get(device.provider) ?? [];
    sends.push({ target: { deviceId: device.id, token, platform: device.platform }, notification });
    byProvider.set(device.provider, sends);
  }

  const results = await Promise.all(
    [...byProvider].map(async ([name, sends]) => ({ name, outcomes: await inBatches(providers.get(name)!, sends) })),
  );

  const gone = [...unreadable];
  for (const { name, outcomes } of results) {
    gone.push(...outcomes.filter((outcome) => outcome.result === "unregistered").map((outcome) => outcome.deviceId));
    const failed = outcomes.filter((outcome) => outcome.result === "failed");
    if (failed.length > 0) {
      deps.logger.warn(
        { provider: name, messageId: payload.messageId, failed: failed.length, reason: failed[0]!.reason },
        "push: the provider refused some notifications; not retried",
      );
    }
    await scheduleRetry(deps, payload, name, outcomes);
  }
  if (unreadable.length > 0) {
    deps.logger.warn(
      { devices: unreadable.length },
      "push: device tokens sealed under another APP_KEY; devices removed",
    );
  }
  if (gone.length > 0) await deps.db.delete(pushDevices).where(inArray(pushDevices.id, gone));
}

async function scheduleRetry(
  deps: Deps,
  payload: PushJobPayload,
  provider: PushProviderName,
  outcomes: PushOutcome[],
): Promise<void> {
  const retries = outcomes.flatMap((outcome) => (outcome.result === "retry" ? [outcome] : []));
  if (retries.length === 0) return;
  const attempt = (payload.retry?.attempt ?? 1) + 1;
  if (attempt > MAX_PUSH_ATTEMPTS) {
    deps.logger.warn(
      { provider, messageId: payload.messageId, devices: retries.length, reason: retries[0]!.reason },
      "push: gave up after the last attempt",
    );
    return;
  }
  const retryAfters = retries.flatMap((outcome) => (outcome.retryAfterMs === undefined ? [] : [outcome.retryAfterMs]));
  const delayMs = retryDelayMs(PUSH_BACKOFF, attempt, retryAfters.length > 0 ? Math.max(...retryAfters) : undefined);
  await enqueueJob(
    deps.db,
    deps.clock.now(),
    pushJobs.message,
    {
      messageId: payload.messageId,
      retry: { provider, deviceIds: retries.map((outcome) => outcome.deviceId), attempt },
    },
    { jobId: `${pushJobId(payload.messageId)}-${provider}-${attempt}`, delayMs },
  );
  deps.logger.info(
    { provider, messageId: payload.messageId, devices: retries.length, attempt, delayMs, reason: retries[0]!.reason },
    "push: will try again",
  );
}
