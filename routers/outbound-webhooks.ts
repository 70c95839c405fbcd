// Outbound webhook management, the delivery log and the test send (owners and admins;
// docs/outbound-webhooks.md). Deliveries themselves are made by the outbound-webhooks queue.
import { z } from "zod";
import { idPattern } from "../server/ids.ts";
import { dataOf, listOf, listResponse } from "../server/records/common.ts";
import { deliveryRecord, outboundWebhookRecord } from "../server/records/outbound-webhook.ts";
import { OUTBOUND_EVENTS, type OutboundEvent } from "../server/services/outbound-webhooks/events.ts";
import {
  createOutboundWebhook,
  deleteOutboundWebhook,
  listDeliveries,
  listOutboundWebhooks,
  sendTestDelivery,
  updateOutboundWebhook,
} from "../server/services/outbound-webhooks/manage.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { booleanInput, httpUrlInput } from "./inputs.ts";

const tags = ["Outbound webhooks"];
const inWorkspace = z.object({ workspace_id: z.string() });
const webhookPath = inWorkspace.extend({ id: z.string() });
const base = "/api/v1/workspaces/{workspace_id}/outbound-webhooks";

const KNOWN_EVENTS: ReadonlySet<string> = new Set(OUTBOUND_EVENTS);
/** Checked as a whole, so a wrong name is an error on `events` (not `events.2`). */
const eventsInput = z
  .array(z.string().max(64))
  .min(1)
  .max(32)
  .refine((events) => events.every((event) => KNOWN_EVENTS.has(event)), "The selected :attribute are invalid.")
  .transform((events) => events as OutboundEvent[])
  .describe(`event types, any of: ${OUTBOUND_EVENTS.join(", ")}`);

export const outboundWebhooksRouter = router({
  list: authedProcedure
    .meta({
      openapi: {
        summary: "List outbound webhooks",
        description: "Owners and admins of the workspace.",
        method: "GET",
        path: base,
        tags,
      },
    })
    .input(inWorkspace)
    .output(listOf(outboundWebhookRecord))
    .query(async ({ ctx, input }) =>
      listResponse(await listOutboundWebhooks(ctx.deps, ctx.auth.user.id, input.workspace_id)),
    ),

  create: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Create an outbound webhook",
        method: "POST",
        path: base,
        tags,
        description:
          "The url must be http(s) and reach a public address (422 `url`). The record carries the signing secret.",
      },
    })
    .input(inWorkspace.extend({ url: httpUrlInput, events: eventsInput, is_active: booleanInput.optional() }))
    .output(dataOf(outboundWebhookRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await createOutboundWebhook(ctx.deps, ctx.auth.user.id, input.workspace_id, input),
    })),

  update: authedProcedure
    .meta({
      openapi: {
        summary: "Update an outbound webhook",
        method: "PUT",
        path: `${base}/{id}`,
        tags,
        description:
          "is_active switches deliveries on or off (and clears the reason the service switched it off); regenerate_secret replaces the secret at once.",
      },
    })
    .input(
      webhookPath.extend({
        url: httpUrlInput.optional(),
        events: eventsInput.optional(),
        is_active: booleanInput.optional(),
        regenerate_secret: booleanInput.optional(),
      }),
    )
    .output(dataOf(outboundWebhookRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await updateOutboundWebhook(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id, input),
    })),

  delete: authedProcedure
    .meta({
      successStatus: 204,
      openapi: {
        summary: "Delete an outbound webhook",
        description: "Owners and admins; its deliveries and their log go with it.",
        method: "DELETE",
        path: `${base}/{id}`,
        tags,
      },
    })
    .input(webhookPath)
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      await deleteOutboundWebhook(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id);
    }),

  deliveries: authedProcedure
    .meta({
      openapi: {
        summary: "List an outbound webhook's deliveries",
        method: "GET",
        path: `${base}/{id}/deliveries`,
        tags,
        description:
          "Every delivery with its attempts, newest first; kept 30 days. `limit` 1..100 (default 50), `before` a delivery id.",
      },
    })
    .input(
      webhookPath.extend({
        limit: z.number().int().min(1).max(100).optional(),
        before: z.string().regex(idPattern("delivery"), "The :attribute field must be a delivery id.").optional(),
      }),
    )
    .output(
      z.object({
        data: z.array(deliveryRecord),
        meta: z.object({ next_cursor: z.string().nullable().describe("pass as `before` for the next (older) page") }),
      }),
    )
    .query(({ ctx, input }) => listDeliveries(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id, input)),

  test: authedProcedure
    .meta({
      openapi: {
        summary: "Send a test delivery",
        method: "POST",
        path: "/api/v1/workspaces/{workspace_id}/outbound-webhooks/{webhook_id}/test",
        tags,
        description:
          "Sends a `webhook.test` delivery now, once, and answers with its result (200 whatever the receiver said).",
      },
    })
    .input(inWorkspace.extend({ webhook_id: z.string() }))
    .output(dataOf(deliveryRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await sendTestDelivery(ctx.deps, ctx.auth.user.id, input.workspace_id, input.webhook_id),
    })),
});
