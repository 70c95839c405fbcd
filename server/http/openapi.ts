// GET /api/v1/openapi.json: generated from the routers by trpc-to-openapi, then brought in
// line with what the REST door really answers: the contract's success statuses and the
// document's error bodies (the generator describes its own error shape).
import { generateOpenApiDocument, type OpenAPIObject } from "trpc-to-openapi";
import type { AppRouter } from "../../routers/index.ts";
import { procedureMetas, type ProcedureMeta } from "../trpc.ts";
import { REQUEST_EXAMPLES } from "./openapi-examples.ts";

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

const errorResponse = (description: string, schema: keyof typeof ERROR_SCHEMAS = "ErrorMessage") => ({
  description,
  content: { "application/json": { schema: { $ref: `#/components/schemas/${schema}` } } },
});

const STANDARD_ERRORS = {
  "400": errorResponse("Malformed JSON, JSON nested deeper than 64 levels, or a body that is not a JSON object"),
  "401": errorResponse("Unauthenticated. (missing, unknown or revoked bearer token)"),
  "403": errorResponse("Forbidden: a token without the ability, an untrusted Origin, or a role that may not do this"),
  "404": errorResponse("Not found, or not visible to the caller"),
  "413": errorResponse("The request body is larger than 1 MiB"),
  "415": errorResponse("A body that is neither JSON nor a URL-encoded form"),
  "422": errorResponse("The given data was invalid.", "ValidationError"),
  "429": {
    ...errorResponse("Too Many Attempts."),
    headers: { "Retry-After": { schema: { type: "integer" }, description: "Seconds to wait" } },
  },
  "503": errorResponse("The database, Redis or a sign-in provider cannot be reached; try again"),
};

const BEARER = [{ Authorization: [] }];

/** `{data: <component>}`: the plain routes answer the same records as the procedures. */
const dataOfComponent = (name: string): SchemaObject => ({
  type: "object",
  required: ["data"],
  properties: { data: { $ref: `#/components/schemas/${name}` } },
});

const BINARY = { type: "string", format: "binary", contentMediaType: "application/octet-stream" } as const;

const attachmentDownload = (kind: "channel" | "direct"): PathItem => ({
  get: {
    operationId: kind === "channel" ? "attachments-downloadChannel" : "attachments-downloadDirect",
    summary: `Download a ${kind === "channel" ? "channel" : "direct"} message attachment`,
    description:
      kind === "channel"
        ? "For members of the workspace who can see the message's channel. A staged (unclaimed) upload: for its uploader only. Anything else is 404. Needs the `read` ability."
        : "For the conversation's two participants only. Anything else is 404. Needs the `read` ability.",
    tags: ["Attachments"],
    security: BEARER,
    parameters: [{ name: "attachment_id", in: "path", required: true, schema: { type: "string" } }],
    responses: {
      "200": {
        description: "The file's bytes, with its type, length and name",
        headers: {
          "Content-Disposition": {
            description: "attachment; filename=\"…\"; filename*=UTF-8''…",
            schema: { type: "string" },
          },
          "Content-Length": { description: "The file's size in bytes", schema: { type: "integer" } },
        },
        content: { "*/*": { schema: BINARY } },
      },
      "401": STANDARD_ERRORS["401"],
      "403": errorResponse("A token without the read ability"),
      "404": STANDARD_ERRORS["404"],
    },
  },
});

const webhookPosting: PathItem = {
  post: {
    operationId: "webhookPosting-post",
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
          example: REQUEST_EXAMPLES["POST /webhooks/{webhook}/messages"],
        },
      },
    },
    responses: {
      "201": {
        description: "Posted (or, with Idempotent-Replayed: true, the first answer to this Idempotency-Key)",
        headers: {
          "Idempotent-Replayed": {
            description: "Present on a replayed answer",
            schema: { type: "string", const: "true" },
          },
        },
        content: { "application/json": { schema: dataOfComponent("Message") } },
      },
      "400": STANDARD_ERRORS["400"],
      "401": errorResponse("Missing or wrong secret; missing, malformed or wrong signature; timestamp outside ±300 s"),
      "403": errorResponse("The webhook is inactive"),
      "404": errorResponse("No such webhook"),
      "413": STANDARD_ERRORS["413"],
      "415": STANDARD_ERRORS["415"],
      "422": errorResponse(
        "content, channel_id, skip_translation, attachment_ids or idempotency_key",
        "ValidationError",
      ),
      "429": STANDARD_ERRORS["429"],
    },
  },
};

const statusBody = (status: string, checks: boolean): SchemaObject => ({
  type: "object",
  required: checks ? ["status", "checks"] : ["status"],
  properties: {
    status: { type: "string", const: status },
    ...(checks && {
      checks: {
        type: "object",
        description: "database, and redis when configured: ok or failing",
        additionalProperties: { type: "string", enum: ["ok", "failing"] },
      },
    }),
  },
});

/** Plain routes that are not procedures; listed so the document covers every path. */
const PLAIN_PATHS: Record<string, PathItem> = {
  "/api/v1/files": {
    post: {
      operationId: "files-upload",
      summary: "Stage an upload",
      description:
        "Stores the file and answers its attachment record. Its id goes into `attachment_ids` of one message by the uploader; files no message claims within 24 hours are deleted. Size limit: MAX_UPLOAD_BYTES (default 25 MiB). Needs the `write` ability.",
      tags: ["Attachments"],
      security: BEARER,
      requestBody: {
        required: true,
        content: {
          "multipart/form-data": {
            schema: { type: "object", required: ["file"], properties: { file: BINARY } },
          },
        },
      },
      responses: {
        "201": {
          description: "Staged",
          content: { "application/json": { schema: dataOfComponent("Attachment") } },
        },
        "400": errorResponse("Malformed, cut short or aborted multipart body; nothing is stored"),
        "401": STANDARD_ERRORS["401"],
        "403": errorResponse("A token without the write ability, or a cookie session from an untrusted Origin"),
        "413": errorResponse("The file is larger than MAX_UPLOAD_BYTES; nothing is stored"),
        "422": errorResponse("No file in the `file` field, or no multipart body (error key `file`)", "ValidationError"),
      },
    },
  },
  "/api/v1/message-attachments/{attachment_id}/download": attachmentDownload("channel"),
  "/api/v1/direct-message-attachments/{attachment_id}/download": attachmentDownload("direct"),
  "/webhooks/{webhook}/messages": webhookPosting,
  "/healthz": {
    get: {
      operationId: "health-live",
      summary: "Liveness",
      description: "200 while the process is up; needs nothing else to answer. No token needed.",
      tags: ["Operations"],
      security: [],
      responses: {
        "200": { description: "Up", content: { "application/json": { schema: statusBody("ok", false) } } },
      },
    },
  },
  "/readyz": {
    get: {
      operationId: "health-ready",
      summary: "Readiness",
      description: "200 when the database (and Redis, when configured) answer, else 503. No token needed.",
      tags: ["Operations"],
      security: [],
      responses: {
        "200": { description: "Ready", content: { "application/json": { schema: statusBody("ok", true) } } },
        "503": {
          description: "Not ready",
          content: { "application/json": { schema: statusBody("unavailable", true) } },
        },
      },
    },
  },
};

// Which error statuses an operation can answer, beyond what its shape implies (see statusesOf).
/** Sign-in operations: 403 for an inactive account. */
const SIGN_IN = new Set(["auth-login", "auth-webLogin", "otp-verify", "social-callback", "social-webCallback"]);
/** Throttled operations: 429 with Retry-After. */
const THROTTLED = new Set([
  "auth-login",
  "auth-webLogin",
  "auth-changePassword",
  "otp-request",
  "passwordReset-request",
  "workspaces-join",
  "channels-join",
  "invites-preview",
]);
/** Public operations that look a record up: 404 for an unknown one. */
const PUBLIC_LOOKUPS = new Set(["invites-preview", "emailVerification-verify"]);
/** A {provider} in the path is not a record: an unknown provider is 422 `errors.provider`. */
const PROVIDER_PATHS = new Set(["social-link", "social-linkCallback"]);
/** 422 `{message}` without `errors` (the contract's link and unlink refusals, and ours alike). */
const PLAIN_422: Record<string, string> = {
  "social-linkCallback": "Already linked to the caller or to another user, or a second account of the provider",
  "social-unlink": "The last way to sign in (set a password first)",
  "members-remove": "The workspace's owner cannot be removed or leave",
  "channels-delete": "#general cannot be deleted",
};
/** Operations answering a redirect instead of 200 when FRONTEND_URL is set. */
const REDIRECTS = new Set(["emailVerification-verify", "social-webCallback"]);

type Operation = {
  operationId?: string;
  parameters?: { in: string }[];
  requestBody?: { content?: Record<string, { example?: unknown }> };
  responses?: Record<string, unknown>;
  security?: unknown[];
};

function responsesOf(method: string, operation: Operation, meta: ProcedureMeta | undefined) {
  const id = operation.operationId ?? "";
  const isProtected = meta?.openapi?.protect !== false;
  const hasPathParameters = (operation.parameters ?? []).some((parameter) => parameter.in === "path");
  const success = operation.responses?.["200"] as { content?: unknown } | undefined;
  const status = String(meta?.successStatus ?? 200);
  const responses: Record<string, unknown> = {};
  if (status === "204") responses["204"] = { description: "No content" };
  else responses[status] = { ...success, description: status === "201" ? "Created" : "OK" };
  // Create-or-get: the first call creates (201), every later one answers the same record (200).
  if (id === "direct-open") responses["200"] = { ...success, description: "The conversation already existed" };
  // Posting exactly once: a repeat of the author's client_message_id in the place posts nothing.
  if (REPEATABLE_POSTS.has(id))
    responses["200"] = { ...success, description: "A repeat of your client_message_id there: the first message" };
  if (REDIRECTS.has(id)) {
    responses["302"] = {
      description: "With FRONTEND_URL set: a redirect to the front end",
      headers: { Location: { description: "The front end's URL", schema: { type: "string" } } },
    };
  }
  // The REST door reads a body for every method but GET: it can be malformed, too large or not JSON.
  if (method !== "get") Object.assign(responses, pick("400", "413", "415"));
  if (isProtected) responses["401"] = STANDARD_ERRORS["401"];
  if (isProtected || SIGN_IN.has(id)) {
    responses["403"] = SIGN_IN.has(id) ? errorResponse("Account is inactive.") : STANDARD_ERRORS["403"];
  }
  if (
    (isProtected && hasPathParameters && !PROVIDER_PATHS.has(id)) ||
    PUBLIC_LOOKUPS.has(id) ||
    id === "direct-resolve"
  ) {
    responses["404"] = STANDARD_ERRORS["404"];
  }
  // Every input, query and path values included, is validated (and checked for text the
  // database cannot hold); an operation without input ignores what it is sent.
  const hasInput = Boolean(operation.requestBody) || (operation.parameters ?? []).length > 0;
  if (hasInput)
    responses["422"] = PLAIN_422[id]
      ? {
          description: `The given data was invalid (\`{message, errors}\`), or: ${PLAIN_422[id]} (\`{message}\` only)`,
          content: {
            "application/json": {
              schema: {
                anyOf: [
                  { $ref: "#/components/schemas/ValidationError" },
                  { $ref: "#/components/schemas/ErrorMessage" },
                ],
              },
            },
          },
        }
      : STANDARD_ERRORS["422"];
  if (THROTTLED.has(id)) responses["429"] = STANDARD_ERRORS["429"];
  responses["503"] = STANDARD_ERRORS["503"];
  return responses;
}

const REPEATABLE_POSTS = new Set(["messages-post", "direct-post", "rooms-post"]);

const pick = (...statuses: (keyof typeof STANDARD_ERRORS)[]) =>
  Object.fromEntries(statuses.map((status) => [status, STANDARD_ERRORS[status]]));

const TAGS: { name: string; description: string }[] = [
  { name: "Account sign-in", description: "Register and sign in; each answers a bearer token." },
  { name: "Account", description: "The signed-in user: profile, password, sign-out." },
  { name: "Web session", description: "Cookie sessions for browser apps." },
  { name: "E-mail verification", description: "The signed verification link and its resend." },
  { name: "Social sign-in", description: "OAuth 2 / OpenID Connect sign-in and linked accounts." },
  { name: "Personal access tokens", description: "List, create and revoke tokens." },
  { name: "Devices", description: "Push devices." },
  { name: "Workspaces", description: "Workspaces the caller owns or belongs to." },
  { name: "Channels", description: "Channels of a workspace and their members." },
  { name: "Members", description: "A workspace's members and their roles." },
  { name: "Invites", description: "Invite links to a workspace." },
  { name: "Messages", description: "Channel messages and threads." },
  { name: "Direct chat", description: "One-to-one conversations." },
  { name: "Read state", description: "Read positions, unread counts and mentions (docs/unread.md)." },
  {
    name: "Notification preferences",
    description: "Push levels and muting per channel and conversation, and the user's default (docs/push.md).",
  },
  { name: "Search", description: "Message search in every language, through translations too (docs/search.md)." },
  {
    name: "Presence",
    description:
      "Who is online, away or not to be disturbed, and custom statuses; live changes through the `presence.onUsers` subscription (docs/presence.md).",
  },
  { name: "Attachments", description: "Uploads and downloads of message files." },
  { name: "Inbound webhooks", description: "Post into a channel from outside, as a bot." },
  { name: "Outbound webhooks", description: "Signed deliveries of workspace events to your URL." },
  { name: "Temporary rooms", description: "Rooms that expire." },
  { name: "Operations", description: "Liveness and readiness probes." },
];

export function buildOpenApiDocument(router: AppRouter): OpenAPIObject {
  const document = generateOpenApiDocument(router, {
    title: "Chat Service API",
    version: "1.0.0",
    // Relative: the paths carry /api/v1 themselves, and "Try it out" on /docs must call the
    // host the page was loaded from (localhost, 127.0.0.1, a proxy), not APP_URL.
    baseUrl: "/",
    description:
      "A chat service: accounts, workspaces, channels, direct chat, attachments, webhooks and temporary rooms. Every procedure is also served as typed RPC at /trpc (HTTP and WebSocket). Errors: 400, 401, 403, 404, 413, 415 {message}; 422 {message, errors}; 429 {message} with Retry-After; 503 {message}.",
    securitySchemes: {
      Authorization: {
        type: "http",
        scheme: "bearer",
        description:
          "A token from register, login, OTP verify or a social callback, or a personal access token. Browser apps may use the web session cookie instead.",
      },
    },
  });

  const metaByOperation = new Map<string, ProcedureMeta>(
    procedureMetas(router).flatMap(({ meta }) =>
      meta.openapi ? [[`${meta.openapi.method.toLowerCase()} ${meta.openapi.path}`, meta] as const] : [],
    ),
  );

  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(item as Record<string, Operation>)) {
      const meta = metaByOperation.get(`${method} ${path}`);
      operation.responses = responsesOf(method, operation, meta);
      if (meta?.openapi?.protect === false) operation.security = [];
      const json = operation.requestBody?.content?.["application/json"];
      const example = REQUEST_EXAMPLES[operation.operationId ?? ""];
      if (json && example) json.example = example;
    }
  }

  document.paths = { ...document.paths, ...PLAIN_PATHS };
  document.tags = TAGS;
  // The generator's own error shapes (error.BAD_REQUEST…) are not what the REST door sends.
  const generated = Object.entries(document.components?.schemas ?? {}).filter(([name]) => !name.startsWith("error."));
  document.components = {
    ...document.components,
    schemas: {
      ...Object.fromEntries(generated),
      ...(ERROR_SCHEMAS as unknown as Record<string, SchemaObject>),
    },
  };
  return document;
}
