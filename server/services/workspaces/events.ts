// Membership and channel events on a workspace's stream (topic "workspace:<id>"), through the
// event seam; live delivery to subscribers is the messaging work's.
import type { Deps } from "../../deps.ts";
import { isoTimestamp } from "../../clock.ts";
import { newId } from "../../ids.ts";

export type WorkspaceEventType =
  | "member.joined"
  | "member.left"
  | "member.updated"
  | "channel.created"
  | "channel.updated"
  | "channel.deleted"
  | "channel.member_joined"
  | "channel.member_left";

export type WorkspaceEvent = {
  id: string;
  type: WorkspaceEventType;
  workspace_id: string;
  created_at: string;
  data: Record<string, unknown>;
};

export const workspaceTopic = (workspaceId: string) => `workspace:${workspaceId}`;

export async function publishWorkspaceEvent(
  deps: Deps,
  workspaceId: string,
  type: WorkspaceEventType,
  data: Record<string, unknown>,
): Promise<void> {
  const now = deps.clock.now();
  const event: WorkspaceEvent = {
    id: newId("event", now.getTime()),
    type,
    workspace_id: workspaceId,
    created_at: isoTimestamp(now),
    data,
  };
  await deps.events.publish(workspaceTopic(workspaceId), event);
}
