// What an outbound webhook receives (contract, "Outbound webhooks"): the workspace's events
// below, each as `POST` JSON `{id, event, created_at, workspace_id, data}` where `id` is the
// delivery's id and `data` the live event's data (server/events/catalog.ts). A message's
// `translation` is null: a webhook is no reader.
import type { EventPayload } from "../../events/streams.ts";

/** The events a webhook may ask for; `webhook.test` is what the test send delivers. */
export const OUTBOUND_EVENTS = [
  "message.created",
  "message.updated",
  "message.deleted",
  "member.joined",
  "member.left",
  "channel.created",
  "channel.updated",
  "channel.deleted",
  "reaction.added",
  "reaction.removed",
  "webhook.test",
] as const;
export type OutboundEvent = (typeof OUTBOUND_EVENTS)[number];

const OUTBOUND_EVENT_SET: ReadonlySet<string> = new Set(OUTBOUND_EVENTS);

/** The workspace an event belongs to when a webhook may receive it, else null (a direct message, typing, …). */
export function outboundWorkspaceOf(payload: EventPayload): string | null {
  if (payload.type === "webhook.test" || !OUTBOUND_EVENT_SET.has(payload.type)) return null;
  return payload.scope.workspace_id ?? null;
}

/** The exact bytes a delivery sends, every attempt alike. */
export function deliveryBody(delivery: {
  id: string;
  event: string;
  createdAt: string;
  workspaceId: string;
  data: Record<string, unknown>;
}): string {
  const data =
    "message" in delivery.data && typeof delivery.data.message === "object" && delivery.data.message !== null
      ? { ...delivery.data, message: { ...delivery.data.message, translation: null } }
      : delivery.data;
  return JSON.stringify({
    id: delivery.id,
    event: delivery.event,
    created_at: delivery.createdAt,
    workspace_id: delivery.workspaceId,
    data,
  });
}
