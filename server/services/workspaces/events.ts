// Membership and channel events on a workspace's stream. Services emit them inside the
// transaction of the change (writeWithEvents), so a change and its event commit together.
import type { Audience, EventData, EventEntry } from "../../events/catalog.ts";
import { streams } from "../../events/streams.ts";

export type WorkspaceEventType =
  | "member.joined"
  | "member.left"
  | "member.updated"
  | "channel.created"
  | "channel.updated"
  | "channel.deleted"
  | "channel.member_joined"
  | "channel.member_left";

/** An event of the workspace's stream; `audience` narrows it to a private channel's members. */
export function workspaceEvent<T extends WorkspaceEventType>(
  workspaceId: string,
  type: T,
  data: EventData<T>,
  audience?: Audience,
): EventEntry {
  return {
    stream: streams.workspace(workspaceId),
    type,
    scope: { workspace_id: workspaceId },
    data,
    ...(audience && { audience }),
  } as EventEntry;
}
