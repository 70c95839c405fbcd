// A user's presence setting and custom status as stored (user_presence), what they mean at a
// given time (a lapsed `dnd_until` or `status_expires_at` is applied as it is read, so every
// answer shows it at once), and the presence record others see. Pure functions, and the
// statements that read and change the settings: one each.
import { sql, type SQL } from "drizzle-orm";
import { rowsOf, type Executor } from "../../../db/client.ts";
import { arrayParam } from "../../../db/prepared.ts";
import { userPresence, users, type PresenceSetting } from "../../../db/schema/index.ts";
import { isoTimestamp } from "../../clock.ts";
import { invalidField } from "../../errors.ts";
import { maySee } from "../../policy/people.ts";
import type { LiveUser } from "./live-state.ts";

export type PresenceStatus = "online" | "offline" | "away" | "dnd";

/** A user's stored presence, times in ms. */
export type StoredPresence = {
  setting: PresenceSetting;
  dndUntil: number | null;
  statusText: string | null;
  statusEmoji: string | null;
  statusExpiresAt: number | null;
  lastSeenAt: number | null;
  /** When the setting last left `invisible` (a connection closed before it closed while invisible). */
  visibleSince: number | null;
  version: number;
};

/** No row: `auto`, no status, never seen. */
export const NO_PRESENCE: StoredPresence = {
  setting: "auto",
  dndUntil: null,
  statusText: null,
  statusEmoji: null,
  statusExpiresAt: null,
  lastSeenAt: null,
  visibleSince: null,
  version: -1,
};

/** The stored presence as it stands at `now`: a lapsed dnd is `auto`, a lapsed status is gone. */
export function effectivePresence(stored: StoredPresence, now: number): StoredPresence {
  const dndLapsed = stored.setting === "dnd" && stored.dndUntil !== null && stored.dndUntil <= now;
  const statusLapsed = stored.statusExpiresAt !== null && stored.statusExpiresAt <= now;
  if (!dndLapsed && !statusLapsed) return stored;
  return {
    ...stored,
    ...(dndLapsed && { setting: "auto" as const, dndUntil: null }),
    ...(statusLapsed && { statusText: null, statusEmoji: null, statusExpiresAt: null }),
  };
}

/** The next time `stored` changes by itself (an expiry), or null. */
export function nextLapse(stored: StoredPresence, now: number): number | null {
  const times = [stored.setting === "dnd" ? stored.dndUntil : null, stored.statusExpiresAt].filter(
    (time): time is number => time !== null && time > now,
  );
  return times.length > 0 ? Math.min(...times) : null;
}

/** What others see of a user. */
export type PresenceRecord = {
  user_id: number;
  status: PresenceStatus;
  last_seen_at: string | null;
  status_text: string | null;
  status_emoji: string | null;
};

const iso = (ms: number | null) => (ms === null ? null : isoTimestamp(new Date(ms)));

/**
 * The presence record at `now`: `auto` is `online` while a connection is open and for
 * `offlineAfterMs` after the last one closed; `invisible` is always `offline` and shows the
 * last_seen_at stored before it. While visible and connected, last seen is now.
 */
export function presenceRecord(
  userId: number,
  stored: StoredPresence,
  live: LiveUser,
  now: number,
  offlineAfterMs: number,
): PresenceRecord {
  const current = effectivePresence(stored, now);
  let status: PresenceStatus;
  let lastSeen = current.lastSeenAt;
  if (current.setting === "invisible") status = "offline";
  else {
    // A connection that closed while the user was invisible is not seen: neither its time nor
    // its grace window.
    // (A settings message from a process of the release before has no visibleSince: none.)
    const visibleSince = current.visibleSince ?? null;
    const closedAt =
      live.closedAt !== null && (visibleSince === null || live.closedAt > visibleSince) ? live.closedAt : null;
    if (live.connected) lastSeen = now;
    else if (closedAt !== null && (lastSeen === null || closedAt > lastSeen)) lastSeen = closedAt;
    if (current.setting === "auto")
      status = live.connected || (closedAt !== null && now < closedAt + offlineAfterMs) ? "online" : "offline";
    else status = current.setting;
  }
  return {
    user_id: userId,
    status,
    last_seen_at: iso(lastSeen),
    status_text: current.statusText,
    status_emoji: current.statusEmoji,
  };
}

/** What is compared to decide whether watchers hear of a change. */
export const watchedKey = (record: PresenceRecord) =>
  `${record.status}\u0000${record.status_text ?? ""}\u0000${record.status_emoji ?? "\u0001"}`;

/** The caller's own settings, as GET/PUT /api/v1/me/presence answer them (with `status`). */
export type OwnPresence = {
  setting: PresenceSetting;
  dnd_until: string | null;
  status_text: string | null;
  status_emoji: string | null;
  status_expires_at: string | null;
};

export function ownPresence(stored: StoredPresence, now: number): OwnPresence {
  const current = effectivePresence(stored, now);
  return {
    setting: current.setting,
    dnd_until: iso(current.dndUntil),
    status_text: current.statusText,
    status_emoji: current.statusEmoji,
    status_expires_at: iso(current.statusExpiresAt),
  };
}

type Row = {
  user_id: number;
  setting: PresenceSetting | null;
  dnd_until: number | null;
  status_text: string | null;
  status_emoji: string | null;
  status_expires_at: number | null;
  last_seen_at: number | null;
  visible_since: number | null;
  version: number | null;
};

function storedOf(row: Row): StoredPresence {
  if (row.setting === null) return NO_PRESENCE;
  const time = (value: number | null) => (value === null ? null : Number(value));
  return {
    setting: row.setting,
    dndUntil: time(row.dnd_until),
    statusText: row.status_text,
    statusEmoji: row.status_emoji,
    statusExpiresAt: time(row.status_expires_at),
    lastSeenAt: time(row.last_seen_at),
    visibleSince: time(row.visible_since),
    version: Number(row.version),
  };
}

/** One statement: the stored presence of those of `userIds` that `viewerId` may see (others are left out). */
export async function visiblePresence(
  db: Executor,
  viewerId: number,
  userIds: readonly number[],
): Promise<Map<number, StoredPresence>> {
  const rows = rowsOf<Row>(
    await db.execute(sql`
      select u.id as user_id, ${sql.raw(presenceColumnsOf("p"))}
      from ${users} u left join ${userPresence} p on p.user_id = u.id
      where u.id = any(${arrayParam(userIds)}::int[]) and ${maySee(viewerId, sql`u.id`)}`),
  );
  return new Map(rows.map((row) => [Number(row.user_id), storedOf(row)]));
}

/** One statement: the stored presence of these users (no row: NO_PRESENCE), whoever asks. */
export async function storedPresences(db: Executor, userIds: readonly number[]): Promise<Map<number, StoredPresence>> {
  const rows = rowsOf<Row>(
    await db.execute(sql`
      select p.user_id, ${sql.raw(presenceColumnsOf("p"))} from ${userPresence} p
      where p.user_id = any(${arrayParam(userIds)}::int[])`),
  );
  const stored = new Map(rows.map((row) => [Number(row.user_id), storedOf(row)]));
  for (const userId of userIds) if (!stored.has(userId)) stored.set(userId, NO_PRESENCE);
  return stored;
}

/** A change of the settings: fields left undefined keep their value. */
export type PresenceChange = {
  setting?: PresenceSetting | undefined;
  dndUntil?: Date | null | undefined;
  statusText?: string | null | undefined;
  statusEmoji?: string | null | undefined;
  statusExpiresAt?: Date | null | undefined;
};

/**
 * One statement: applies `change` to the row as it stands now (a lapsed dnd or status counts as
 * gone), and answers the new row; a `dnd_until` for a setting that is not `dnd` after the change
 * is a 422. While the user is `connected`, last_seen_at moves to now unless they were and stay
 * invisible (going invisible keeps the moment they disappeared); `closedAt`, when their last
 * connection closed (live state), is kept too if they were visible then, since the batch that
 * would have written it skips an invisible user. Leaving `invisible` sets visible_since.
 */
export async function changePresence(
  db: Executor,
  userId: number,
  change: PresenceChange,
  now: Date,
  connected: boolean,
  closedAt: number | null = null,
): Promise<StoredPresence> {
  const sent = (value: unknown) => value !== undefined;
  const at = now.toISOString();
  // The row as it stands now, for the column's expression (`p` is the stored row, null when none).
  const dndNow = sql`(p.setting = 'dnd' and (p.dnd_until is null or p.dnd_until > ${at}::timestamptz))`;
  const statusNow = sql`(p.status_expires_at is null or p.status_expires_at > ${at}::timestamptz)`;
  const settingNow = sql`(case when p.setting is null then 'auto' when p.setting = 'dnd' and not ${dndNow} then 'auto' else p.setting end)`;
  const setting = sent(change.setting) ? sql`${change.setting}::text` : settingNow;
  const dndUntil = sql`(case when ${setting} <> 'dnd' then null::timestamptz
    when ${sent(change.dndUntil)} then ${change.dndUntil?.toISOString() ?? null}::timestamptz
    when ${dndNow} then p.dnd_until else null end)`;
  const keep = (column: string, value: string | null | undefined, type: string) =>
    sent(value)
      ? sql`${value}::${sql.raw(type)}`
      : sql`(case when ${statusNow} then p.${sql.raw(column)} else null end)`;
  const statusText = keep("status_text", change.statusText, "text");
  const statusEmoji = keep("status_emoji", change.statusEmoji, "text");
  const expires = change.statusExpiresAt;
  const statusExpiresAt = keep(
    "status_expires_at",
    expires instanceof Date ? expires.toISOString() : expires,
    "timestamptz",
  );
  const wasVisible = sql`coalesce(p.setting, 'auto') <> 'invisible'`;
  const closed = closedAt === null ? null : new Date(closedAt).toISOString();
  // greatest() leaves out nulls: the stored time, now while seen connected, the last close while seen.
  const lastSeen = sql`greatest(p.last_seen_at,
    case when ${connected} and (${wasVisible} or ${setting} <> 'invisible') then ${at}::timestamptz end,
    case when ${wasVisible} and ${closed}::timestamptz > coalesce(p.visible_since, '-infinity'::timestamptz)
      then ${closed}::timestamptz end)`;
  const visibleSince = sql`(case when not ${wasVisible} and ${setting} <> 'invisible' then ${at}::timestamptz
    else p.visible_since end)`;
  // A dnd_until needs the setting after the change to be dnd: when the setting is not sent, the stored one decides.
  const allowed = change.dndUntil instanceof Date && !sent(change.setting) ? sql`${settingNow} = 'dnd'` : sql`true`;
  const [row] = rowsOf<Row>(
    await db.execute(sql`
      with p as (
        select u.id as uid, p.* from ${users} u left join ${userPresence} p on p.user_id = u.id
        where u.id = ${userId} for update of u)
      insert into ${userPresence} as saved
        (user_id, setting, dnd_until, status_text, status_emoji, status_expires_at, last_seen_at, visible_since,
          version)
      select p.uid, ${setting}, ${dndUntil}, ${statusText}, ${statusEmoji}, ${statusExpiresAt}, ${lastSeen},
        ${visibleSince}, coalesce(p.version, 0) + 1
      from p where ${allowed}
      on conflict (user_id) do update set setting = excluded.setting, dnd_until = excluded.dnd_until,
        status_text = excluded.status_text, status_emoji = excluded.status_emoji,
        status_expires_at = excluded.status_expires_at, last_seen_at = excluded.last_seen_at,
        visible_since = excluded.visible_since, version = excluded.version
      returning saved.user_id, ${sql.raw(presenceColumnsOf("saved"))}`),
  );
  if (!row) throw invalidField("dnd_until", "The dnd until field may only be set when the setting is dnd.");
  return storedOf(row);
}

function presenceColumnsOf(table: string): string {
  const time = (column: string) => `(extract(epoch from ${table}.${column}) * 1000)::float8 as ${column}`;
  return [
    `${table}.setting`,
    time("dnd_until"),
    `${table}.status_text`,
    `${table}.status_emoji`,
    time("status_expires_at"),
    time("last_seen_at"),
    time("visible_since"),
    `${table}.version`,
  ].join(", ");
}

/**
 * One statement: last seen at these times (ms), for users who are not invisible, never moving
 * back, and never to a time before they last left `invisible` (a connection that closed while
 * they were invisible). A user without a row gets one (setting `auto`).
 */
export async function recordLastSeen(db: Executor, seen: ReadonlyMap<number, number>): Promise<void> {
  if (seen.size === 0) return;
  const entries = [...seen];
  await db.execute(sql`
    insert into ${userPresence} as saved (user_id, last_seen_at)
    select v.user_id, v.seen_at
    from unnest(${arrayParam(entries.map(([userId]) => userId))}::int[],
      ${arrayParam(entries.map(([, at]) => new Date(at).toISOString()))}::timestamptz[]) as v(user_id, seen_at)
    where exists (select 1 from ${users} u where u.id = v.user_id)
    on conflict (user_id) do update set last_seen_at = excluded.last_seen_at
    where saved.setting <> 'invisible' and (saved.last_seen_at is null or saved.last_seen_at < excluded.last_seen_at)
      and (saved.visible_since is null or saved.visible_since < excluded.last_seen_at)`);
}

/**
 * SQL true while the user whose id is the SQL expression `userId` is `dnd` at `now`, an SQL
 * `timestamptz` (push skips them).
 */
export function doNotDisturb(userId: SQL, now: SQL): SQL {
  return sql`exists (select 1 from ${userPresence} dnd where dnd.user_id = ${userId} and dnd.setting = 'dnd'
    and (dnd.dnd_until is null or dnd.dnd_until > ${now}))`;
}
