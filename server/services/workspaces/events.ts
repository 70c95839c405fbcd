// Membership and channel events on a workspace's stream, through the durable event store
// (server/events/streams.ts), so subscribers can resume after a reconnect.
import type { Deps } from "../../deps.ts";
import { emitEvent, streams, type StreamEvent } from "../../events/streams.ts";

export type WorkspaceEventType =
  | "member.joined"
  | "member.left"
  | "member.updated"
  | "channel.created"
  | "channel.updated"
  | "channel.deleted"
  | "channel.member_joined"
  | "channel.member_left";

export function publishWorkspaceEvent(
  deps: Deps,
  workspaceId: string,
  type: WorkspaceEventType,
  data: Record<string, unknown>,
): Promise<StreamEvent> {
  return emitEvent(deps, { stream: streams.workspace(workspaceId), type, scope: { workspace_id: workspaceId }, data });
}
