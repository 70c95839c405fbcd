// The presence procedures' work (docs/presence.md): the caller's own settings (read: one
// statement; change: one statement, then the presence topic), others' records (one statement),
// and the live watch.
import type { Auth } from "../../auth.ts";
import type { Deps } from "../../deps.ts";
import { NOT_CONNECTED, type LiveUser } from "./live-state.ts";
import type { PresenceWatch } from "./presence.ts";
import {
  changePresence,
  ownPresence,
  presenceRecord,
  storedPresences,
  type OwnPresence,
  type PresenceChange,
  type PresenceRecord,
  type PresenceStatus,
  type StoredPresence,
} from "./settings.ts";

type OwnAnswer = OwnPresence & { status: PresenceStatus };

/** The caller's settings as they stand now, with what others see of them. */
function ownAnswer(deps: Deps, userId: number, stored: StoredPresence, live: LiveUser): OwnAnswer {
  const now = deps.clock.now().getTime();
  const record = presenceRecord(userId, stored, live, now, deps.presence.offlineAfterMs);
  return { ...ownPresence(stored, now), status: record.status };
}

export async function getOwnPresence(deps: Deps, auth: Auth): Promise<OwnAnswer> {
  const userId = auth.user.id;
  const [stored, live] = await Promise.all([storedPresences(deps.db, [userId]), deps.presence.liveStateOf([userId])]);
  return ownAnswer(deps, userId, stored.get(userId)!, live.get(userId) ?? NOT_CONNECTED);
}

export async function updateOwnPresence(deps: Deps, auth: Auth, change: PresenceChange): Promise<OwnAnswer> {
  const userId = auth.user.id;
  const live = (await deps.presence.liveStateOf([userId])).get(userId) ?? NOT_CONNECTED;
  const stored = await changePresence(deps.db, userId, change, deps.clock.now(), live.connected, live.closedAt);
  await deps.presence.settingsChanged(userId, stored);
  return ownAnswer(deps, userId, stored, live);
}

export function listPresence(deps: Deps, auth: Auth, userIds: readonly number[]): Promise<PresenceRecord[]> {
  return deps.presence.records(auth.user.id, userIds);
}

export function watchPresence(
  deps: Deps,
  auth: Auth,
  userIds: readonly number[],
  signal: AbortSignal | undefined,
): PresenceWatch {
  return deps.presence.watch(auth.user.id, userIds, signal);
}
