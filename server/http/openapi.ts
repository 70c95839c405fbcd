// GET /api/v1/openapi.json: generated from the routers by trpc-to-openapi, then brought in
// line with what the REST door really answers: the contract's success statuses and the
// document's error bodies (the generator describes its own error shape).
import { generateOpenApiDocument, type OpenAPIObject } from "trpc-to-openapi";
import type { AppRouter } from "../../routers/index.ts";
import { procedureMetas, type ProcedureMeta } from "../trpc.ts";

type SchemaObject = NonNullable<NonNullable<OpenAPIObject["components"]>["schemas"]>[string];

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

/** Plain routes that are not procedures; listed so the document covers every path. */
const PLAIN_PATHS = {
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
