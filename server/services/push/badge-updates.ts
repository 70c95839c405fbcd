// Silent badge updates (docs/push.md): when a read lowers a user's `total_mentions`, every device
// of theirs gets the new badge without an alert, so the phone in the pocket stops showing the
// mentions just read on the laptop. The push consumer enqueues one `push.badge` job per user per
// BADGE_WINDOW_MS, due at the window's end (server/consumers/push.ts); the job counts the badge
// when it runs, so the last read of the window is the one the devices show.
import { sql } from "drizzle-orm";
import { rowsOf } from "../../../db/client.ts";
import { pushDevices, users } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { totalMentions } from "../messaging/unread-counts.ts";
import { enqueueJobs } from "../../jobs/outbox.ts";
import { retryFilter, retryJob, sendToDevices, type DeviceRow, type PushProviders } from "./delivery.ts";
import { badgeJobId, pushJobs, type BadgeJobPayload } from "./jobs.ts";

/**
 * Tries per device, the first included (1 s, 2 s, 4 s, 8 s apart, or the provider's Retry-After):
 * a badge is also corrected by the user's next push or read, so it is not chased for an hour.
 */
export const MAX_BADGE_ATTEMPTS = 5;

/** One statement: the user's devices (none when the account is deactivated) and their badge, counted once. */
async function badgeDevices(deps: Deps, payload: BadgeJobPayload): Promise<DeviceRow[]> {
  return rowsOf<DeviceRow>(
    await deps.db.execute(sql`
      select d.id, d.provider, d.platform, d.token_sealed, ${totalMentions(payload.userId)} as badge
      from ${pushDevices} d join ${users} u on u.id = d.user_id and u.is_active
      where d.user_id = ${payload.userId}::integer ${retryFilter("d", payload.retry)}`),
  );
}

export async function deliverBadgeUpdate(deps: Deps, providers: PushProviders, payload: BadgeJobPayload) {
  const rows = await badgeDevices(deps, payload);
  if (rows.length === 0) return;
  const outcomes = await sendToDevices(
    deps,
    providers,
    rows.map((device) => ({ device })),
    (row, target) => ({ target, badge: Number(row.device.badge) }),
    { badgeOf: payload.userId },
  );
  const firstJobId = badgeJobId(payload.userId, payload.window);
  const retries = [...outcomes].flatMap(([provider, sent]) => {
    const next = retryJob(
      deps,
      provider,
      sent.map(({ outcome }) => outcome),
      {
        attempt: payload.retry?.attempt ?? 1,
        maxAttempts: MAX_BADGE_ATTEMPTS,
        next: (retry) => ({
          payload: { userId: payload.userId, window: payload.window, retry },
          jobId: `${firstJobId}-${provider}-${retry.attempt}`,
        }),
        log: { badgeOf: payload.userId },
      },
    );
    return next ? [next] : [];
  });
  await enqueueJobs(deps.db, deps.clock.now(), pushJobs.badge, retries);
}
