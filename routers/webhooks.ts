// Inbound webhook management and the request log (owners and admins). Posting through a
// webhook is a plain route (server/http/webhook-route.ts): it signs raw bytes.
import { z } from "zod";
import { idPattern } from "../server/ids.ts";
import { dataOf, listOf, listResponse } from "../server/records/common.ts";
import { webhookRecord, webhookRequestRecord } from "../server/records/webhook.ts";
import {
  createWebhook,
  deleteWebhook,
  listWebhookRequests,
  listWebhooks,
  updateWebhook,
} from "../server/services/webhooks/manage.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { booleanInput, httpUrlInput, nameInput } from "./inputs.ts";

const tags = ["Inbound webhooks"];
const inWorkspace = z.object({ workspace_id: z.string() });
const webhookPath = inWorkspace.extend({ id: z.string() });

const webhookFields = {
  default_channel_id: z.string().max(255).nullable().optional(),
  bot_name: z.string().trim().max(120).nullable().optional(),
  bot_avatar_url: httpUrlInput.nullable().optional(),
  signature_required: booleanInput.optional(),
};

export const webhooksRouter = router({
  list: authedProcedure
    .meta({
      openapi: {
        summary: "List inbound webhooks",
        description: "Owners and admins of the workspace.",
        method: "GET",
        path: "/api/v1/workspaces/{workspace_id}/webhooks",
        tags,
      },
    })
    .input(inWorkspace)
    .output(listOf(webhookRecord))
    .query(async ({ ctx, input }) => listResponse(await listWebhooks(ctx.deps, ctx.auth.user.id, input.workspace_id))),

  create: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Create an inbound webhook",
        method: "POST",
        path: "/api/v1/workspaces/{workspace_id}/webhooks",
        tags,
        description: "The record carries the posting URL and both secrets (docs/webhooks.md).",
      },
    })
    .input(inWorkspace.extend({ name: nameInput(120), ...webhookFields }))
    .output(dataOf(webhookRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await createWebhook(ctx.deps, ctx.auth.user.id, input.workspace_id, input),
    })),

  update: authedProcedure
    .meta({
      openapi: {
        summary: "Update an inbound webhook",
        method: "PUT",
        path: "/api/v1/workspaces/{workspace_id}/webhooks/{id}",
        tags,
        description:
          "regenerate_secret / regenerate_signing_secret replace a secret; the old one stops working at once.",
      },
    })
    .input(
      webhookPath.extend({
        name: nameInput(120).optional(),
        ...webhookFields,
        is_active: booleanInput.optional(),
        regenerate_secret: booleanInput.optional(),
        regenerate_signing_secret: booleanInput.optional(),
      }),
    )
    .output(dataOf(webhookRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await updateWebhook(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id, input),
    })),

  delete: authedProcedure
    .meta({
      successStatus: 204,
      openapi: {
        summary: "Delete an inbound webhook",
        description: "Owners and admins; its posting URL answers 404 from then on.",
        method: "DELETE",
        path: "/api/v1/workspaces/{workspace_id}/webhooks/{id}",
        tags,
      },
    })
    .input(webhookPath)
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      await deleteWebhook(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id);
    }),

  requests: authedProcedure
    .meta({
      openapi: {
        summary: "List an inbound webhook's request log",
        method: "GET",
        path: "/api/v1/workspaces/{workspace_id}/webhooks/{id}/requests",
        tags,
        description:
          "Every request to the posting URL, accepted or rejected, newest first; kept 30 days. `limit` 1..100 (default 50), `before` an entry id.",
      },
    })
    .input(
      webhookPath.extend({
        limit: z.number().int().min(1).max(100).optional(),
        before: z
          .string()
          .regex(idPattern("webhookRequest"), "The :attribute field must be a request log entry id.")
          .optional(),
      }),
    )
    .output(
      z.object({
        data: z.array(webhookRequestRecord),
        meta: z.object({ next_cursor: z.string().nullable().describe("pass as `before` for the next (older) page") }),
      }),
    )
    .query(({ ctx, input }) => listWebhookRequests(ctx.deps, ctx.auth.user.id, input.workspace_id, input.id, input)),
});
