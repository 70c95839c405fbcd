// GET /api/v1/openapi.json: generated from the routers by trpc-to-openapi, then brought in
// line with what the REST door really answers: the contract's success statuses and the
// document's error bodies (the generator describes its own error shape).
import { generateOpenApiDocument, type OpenAPIObject } from "trpc-to-openapi";
import { z } from "zod";
import type { AppRouter } from "../../routers/index.ts";
import { dataOf } from "../records/common.ts";
import { attachmentRecord, messageRecord } from "../records/message.ts";
import { procedureMetas, type ProcedureMeta } from "../trpc.ts";

type SchemaObject = NonNullable<NonNullable<OpenAPIObject["components"]>["schemas"]>[string];
type PathItem = NonNullable<OpenAPIObject["paths"]>[string];

const ERROR_SCHEMAS = {
  ErrorMessage: {
    type: "object",
    required: ["message"],
    properties: { message: { type: "string" } },
  },
  ValidationError: {
    type: "object",
    required: ["message", "errors"],
    properties: {
      message: { type: "string", const: "The given data was invalid." },
      errors: { type: "object", additionalProperties: { type: "array", items: { type: "string" } } },
    },
  },
} as const;

const errorResponse = (description: string, schema: keyof typeof ERROR_SCHEMAS) => ({
  description,
  content: { "application/json": { schema: { $ref: `#/components/schemas/${schema}` } } },
});

const STANDARD_ERRORS = {
  "400": errorResponse("Malformed JSON body", "ErrorMessage"),
  "401": errorResponse("Unauthenticated. (missing or invalid bearer token)", "ErrorMessage"),
  "403": errorResponse("Forbidden (inactive account, missing token ability, untrusted Origin)", "ErrorMessage"),
  "404": errorResponse("Not found, or not visible to the caller", "ErrorMessage"),
  "422": errorResponse("The given data was invalid.", "ValidationError"),
  "429": {
    ...errorResponse("Too Many Attempts.", "ErrorMessage"),
    headers: { "Retry-After": { schema: { type: "integer" }, description: "Seconds to wait" } },
  },
};

/** The attachment record as the plain routes answer it (one zod schema with the procedures). */
const { $schema: _dialect, ...attachmentResponse } = z.toJSONSchema(dataOf(attachmentRecord));

const attachmentDownload = (kind: string): PathItem => ({
  get: {
    summary: `Download a ${kind} attachment`,
    description:
      kind === "channel message"
        ? "For members of the workspace who can see the message's channel. A staged (unclaimed) upload: for its uploader only. Anything else is 404."
        : "For the conversation's two participants only. Anything else is 404.",
    tags: ["Attachments"],
    security: [{ Authorization: [] }],
    parameters: [{ name: "attachment_id", in: "path", required: true, schema: { type: "string" } }],
    responses: {
      "200": {
        description: "The file's bytes, with its type, length and name",
        headers: {
          "Content-Disposition": {
            description: "attachment; filename=\"…\"; filename*=UTF-8''…",
            schema: { type: "string" },
          },
          "Content-Length": { schema: { type: "integer" } },
        },
        content: { "*/*": { schema: { type: "string", contentMediaType: "application/octet-stream" } } },
      },
      "401": STANDARD_ERRORS["401"],
      "403": errorResponse("A token without the read ability", "ErrorMessage"),
      "404": STANDARD_ERRORS["404"],
    },
  },
});

const { $schema: _messageDialect, ...messageResponse } = z.toJSONSchema(dataOf(messageRecord));

const webhookPosting: PathItem = {
  post: {
    summary: "Post into a channel as an inbound webhook's bot",
    description:
      "No bearer token: the webhook's secret in X-Service-Webhook-Secret (or the body field `secret`), or, when the webhook has signature_required, X-Service-Signature: t=<unix>,v1=<lowercase hex HMAC-SHA256 of \"<t>.<raw body>\" keyed with the signing secret>, within 300 s. Idempotency-Key (1..255) replays the first success for 24 hours with Idempotent-Replayed: true. Every request that names a webhook counts against the workspace's WEBHOOK_QUOTA_PER_HOUR and is written to its request log (docs/webhooks.md).",
    tags: ["Inbound webhooks"],
    security: [],
    parameters: [
      { name: "webhook", in: "path", required: true, schema: { type: "string" } },
      { name: "X-Service-Webhook-Secret", in: "header", required: false, schema: { type: "string" } },
      { name: "X-Service-Signature", in: "header", required: false, schema: { type: "string" } },
      { name: "Idempotency-Key", in: "header", required: false, schema: { type: "string", maxLength: 255 } },
    ],
    requestBody: {
      required: true,
      content: {
        "application/json": {
          schema: {
            type: "object",
            required: ["content"],
            properties: {
              content: { type: "string", minLength: 1, maxLength: 40_000 },
              channel_id: { type: "string", description: "default: the webhook's default_channel_id" },
              skip_translation: { type: "boolean" },
              secret: { type: "string", description: "the static secret, when not sent as a header" },
            },
          },
        },
      },
    },
    responses: {
      "201": {
        description: "Posted (or, with Idempotent-Replayed: true, the first answer to this Idempotency-Key)",
        headers: { "Idempotent-Replayed": { schema: { type: "string", const: "true" } } },
        content: { "application/json": { schema: messageResponse as SchemaObject } },
      },
      "400": STANDARD_ERRORS["400"],
      "401": errorResponse(
        "Missing or wrong secret; missing, malformed or wrong signature; timestamp outside ±300 s",
        "ErrorMessage",
      ),
      "403": errorResponse("The webhook is inactive", "ErrorMessage"),
      "404": errorResponse("No such webhook", "ErrorMessage"),
      "413": errorResponse("The body is larger than 1 MiB", "ErrorMessage"),
      "422": errorResponse(
        "content, channel_id, skip_translation, attachment_ids or idempotency_key",
        "ValidationError",
      ),
      "429": STANDARD_ERRORS["429"],
    },
  },
};

/** Plain routes that are not procedures; listed so the document covers every path. */
const PLAIN_PATHS: Record<string, PathItem> = {
  "/api/v1/files": {
    post: {
      summary: "Stage an upload",
      description:
        "Stores the file and answers its attachment record. Its id goes into `attachment_ids` of one message by the uploader; files no message claims within 24 hours are deleted. Size limit: MAX_UPLOAD_BYTES (default 25 MiB).",
      tags: ["Attachments"],
      security: [{ Authorization: [] }],
      requestBody: {
        required: true,
        content: {
          "multipart/form-data": {
            schema: {
              type: "object",
              required: ["file"],
              properties: { file: { type: "string", contentMediaType: "application/octet-stream" } },
            },
          },
        },
      },
      responses: {
        "201": {
          description: "Staged",
          content: { "application/json": { schema: attachmentResponse as SchemaObject } },
        },
        "400": errorResponse("Malformed multipart body", "ErrorMessage"),
        "401": STANDARD_ERRORS["401"],
        "403": STANDARD_ERRORS["403"],
        "413": errorResponse("The file is larger than MAX_UPLOAD_BYTES; nothing is stored", "ErrorMessage"),
        "422": errorResponse("No file in the `file` field (error key `file`)", "ValidationError"),
      },
    },
  },
  "/api/v1/message-attachments/{attachment_id}/download": attachmentDownload("channel message"),
  "/api/v1/direct-message-attachments/{attachment_id}/download": attachmentDownload("direct message"),
  "/webhooks/{webhook}/messages": webhookPosting,
  "/healthz": {
    get: {
      summary: "Liveness: 200 while the process is up",
      tags: ["Operations"],
      responses: { "200": { description: "Up" } },
    },
  },
  "/readyz": {
    get: {
      summary: "Readiness: 200 when the database (and Redis, when configured) answer",
      tags: ["Operations"],
      responses: { "200": { description: "Ready" }, "503": { description: "Not ready" } },
    },
  },
};

export function buildOpenApiDocument(router: AppRouter, baseUrl: string): OpenAPIObject {
  const document = generateOpenApiDocument(router, {
    title: "Chat Service API",
    version: "1.0.0",
    baseUrl,
    description:
      "Every procedure is also served as typed RPC at /trpc (HTTP and WebSocket). Errors: 401 {message}, 403 {message}, 404 {message}, 422 {message, errors}, 429 {message} with Retry-After.",
    docsUrl: `${baseUrl}/docs`,
  });

  const metaByOperation = new Map<string, ProcedureMeta>(
    procedureMetas(router).flatMap(({ meta }) =>
      meta.openapi ? [[`${meta.openapi.method.toLowerCase()} ${meta.openapi.path}`, meta] as const] : [],
    ),
  );

  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(
      item as Record<string, { responses?: Record<string, unknown>; security?: unknown[] }>,
    )) {
      const responses = operation.responses;
      if (!responses) continue;
      const meta = metaByOperation.get(`${method} ${path}`);
      const success = responses["200"] as { description?: string; content?: unknown } | undefined;
      const status = String(meta?.successStatus ?? 200);
      const rebuilt: Record<string, unknown> = {};
      if (success) rebuilt[status] = status === "204" ? { description: "No content" } : success;
      const hasBody = method !== "get" && method !== "delete";
      const isProtected = meta?.openapi?.protect !== false;
      if (hasBody) rebuilt["400"] = STANDARD_ERRORS["400"];
      if (isProtected) rebuilt["401"] = STANDARD_ERRORS["401"];
      rebuilt["403"] = STANDARD_ERRORS["403"];
      rebuilt["404"] = STANDARD_ERRORS["404"];
      rebuilt["422"] = STANDARD_ERRORS["422"];
      rebuilt["429"] = STANDARD_ERRORS["429"];
      operation.responses = rebuilt;
    }
  }

  document.paths = { ...document.paths, ...PLAIN_PATHS };
  document.components = {
    ...document.components,
    schemas: { ...document.components?.schemas, ...(ERROR_SCHEMAS as unknown as Record<string, SchemaObject>) },
  };
  return document;
}
