// The platform around the API: health and readiness, the OpenAPI document and /docs, the
// REST door's error bodies and body parsing, and data that survives a restart.
import { Agent, get as httpGet } from "node:http";
import { beforeAll, describe, expect, it } from "vitest";
import { appRouter } from "../routers/index.ts";
import { procedureMetas } from "../server/trpc.ts";
import { restClient } from "./helpers/api.ts";
import { registerUser, uniqueEmail } from "./helpers/factories.ts";
import { startTestServer, useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

type Operation = {
  security?: unknown[];
  parameters?: unknown[];
  requestBody?: unknown;
  responses?: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>;
};
type OpenApiDocument = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, unknown> };
};

const HTTP_METHODS = ["get", "post", "put", "patch", "delete"];

/** API operations served by plain routes (server/http), not by procedures. */
const PLAIN_API_OPERATIONS = [
  "post /api/v1/files",
  "get /api/v1/message-attachments/{attachment_id}/download",
  "get /api/v1/direct-message-attachments/{attachment_id}/download",
];

function operations(document: OpenApiDocument): { path: string; method: string; operation: Operation }[] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => HTTP_METHODS.includes(method))
      .map(([method, operation]) => ({ path, method, operation })),
  );
}

const schemaRef = (operation: Operation, status: string) =>
  operation.responses?.[status]?.content?.["application/json"]?.schema?.$ref;

function registration(overrides: Record<string, string> = {}) {
  return { name: "Ann", email: uniqueEmail(), password: "12345678", password_confirmation: "12345678", ...overrides };
}

describe("health and readiness", () => {
  it("GET /healthz answers 200", async () => {
    const response = await ctx.api.get("/healthz");
    expect(response.status).toBe(200);
  });

  it("GET /readyz answers 200 with the database (and Redis, when configured) ok", async () => {
    const response = await ctx.api.get("/readyz");
    expect(response.status).toBe(200);
    expect(response.body.checks).toEqual({ database: "ok", ...(process.env.REDIS_URL && { redis: "ok" }) });
  });

  it("GET /readyz answers 503 when the configured Redis does not answer", async () => {
    // Nothing listens on port 1: the server still starts (ioredis connects in the background).
    const unready = await startTestServer({ REDIS_URL: "redis://127.0.0.1:1" });
    try {
      const response = await restClient(unready.url).get("/readyz");
      expect(response.status).toBe(503);
      expect(response.body.checks).toEqual({ database: "ok", redis: "failing" });
    } finally {
      await unready.close();
    }
  });
});

describe("keep-alive connections", () => {
  it("stay open 65 s: a request after 6 idle seconds reuses the connection (Node's default closes at 5 s)", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ status: number; keepAlive: string | undefined; reused: boolean }>((resolve, reject) => {
        const request = httpGet(`${ctx.server.url}/healthz`, { agent }, (response) => {
          response.resume();
          response.on("end", () =>
            resolve({
              status: response.statusCode!,
              keepAlive: response.headers["keep-alive"] as string | undefined,
              reused: request.reusedSocket,
            }),
          );
        });
        request.on("error", reject);
      });
    try {
      expect(await get()).toEqual({ status: 200, keepAlive: "timeout=65", reused: false });
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      expect(await get()).toEqual({ status: 200, keepAlive: "timeout=65", reused: true });
    } finally {
      agent.destroy();
    }
  }, 20_000);
});

describe("GET /api/v1/openapi.json", () => {
  let document: OpenApiDocument;
  beforeAll(async () => {
    const response = await ctx.api.get("/api/v1/openapi.json");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    document = response.body;
  });

  it("is OpenAPI 3.1.0", () => {
    expect(document.openapi).toBe("3.1.0");
  });

  it("lists every REST operation the routers implement and the plain routes, plus /healthz and /readyz", () => {
    const implemented = procedureMetas(appRouter)
      .flatMap(({ meta }) => (meta.openapi ? [`${meta.openapi.method.toLowerCase()} ${meta.openapi.path}`] : []))
      .sort();
    expect(implemented.length).toBeGreaterThan(0);
    const documented = operations(document).map(({ method, path }) => `${method} ${path}`);
    expect(documented.filter((operation) => operation.includes(" /api/")).sort()).toEqual(
      [...implemented, ...PLAIN_API_OPERATIONS].sort(),
    );
    expect(documented).toContain("get /healthz");
    expect(documented).toContain("get /readyz");
  });

  it("documents the contract's success statuses: POST /tokens and /devices 201, their DELETE 204", () => {
    for (const collection of ["/api/v1/tokens", "/api/v1/devices"]) {
      expect(Object.keys(document.paths[collection]!.post!.responses!)).toContain("201");
      expect(Object.keys(document.paths[collection]!.post!.responses!)).not.toContain("200");
      expect(Object.keys(document.paths[`${collection}/{id}`]!.delete!.responses!)).toContain("204");
      expect(Object.keys(document.paths[`${collection}/{id}`]!.delete!.responses!)).not.toContain("200");
    }
  });

  it("documents 401 {message} on protected operations and 422 {message, errors} on every API operation with input", () => {
    expect(document.components?.schemas).toHaveProperty("ErrorMessage");
    expect(document.components?.schemas).toHaveProperty("ValidationError");
    const apiOperations = operations(document).filter(({ path }) => path.startsWith("/api/"));
    const protectedOperations = apiOperations.filter(({ operation }) => operation.security?.length);
    expect(protectedOperations.length).toBeGreaterThan(0);
    for (const { path, method, operation } of protectedOperations) {
      expect(schemaRef(operation, "401"), `${method} ${path} 401`).toBe("#/components/schemas/ErrorMessage");
    }
    // Binary downloads and operations without input (GET /me, logout…) have no 422; the few that
    // also answer a plain 422 {message} list both shapes (test/openapi-document.test.ts).
    const withInput = apiOperations.filter(
      ({ path, operation }) => !path.endsWith("/download") && (operation.parameters?.length || operation.requestBody),
    );
    expect(withInput.length).toBeGreaterThan(40);
    for (const { path, method, operation } of withInput) {
      const schema = operation.responses?.["422"]?.content?.["application/json"]?.schema as
        { $ref?: string; anyOf?: { $ref?: string }[] } | undefined;
      const refs = schema?.anyOf ? schema.anyOf.map(({ $ref }) => $ref) : [schema?.$ref];
      expect(refs, `${method} ${path} 422`).toContain("#/components/schemas/ValidationError");
    }
  });

  it("answers 401 Unauthenticated. on every protected operation called without a token", async () => {
    const protectedOperations = operations(document).filter(({ operation }) => operation.security?.length);
    for (const { path, method } of protectedOperations) {
      const url = path.replace(/\{[^}]+\}/g, "1");
      const response = await ctx.api.call(method.toUpperCase(), url, method === "get" ? {} : { body: {} });
      expect({ operation: `${method} ${path}`, status: response.status, body: response.body }).toEqual({
        operation: `${method} ${path}`,
        status: 401,
        body: { message: "Unauthenticated." },
      });
    }
  });
});

describe("GET /docs", () => {
  it("serves an HTML page that loads the Swagger UI bundle, and the bundle itself", async () => {
    const page = await fetch(`${ctx.server.url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain('src="/docs/assets/swagger-ui-bundle.js"');

    const asset = await fetch(`${ctx.server.url}/docs/assets/swagger-ui-bundle.js`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
    expect((await asset.text()).length).toBeGreaterThan(0);
  });
});

describe("request bodies and error bodies", () => {
  it("answers malformed JSON with 400 and a bare {message}", async () => {
    const response = await ctx.api.post("/api/v1/auth/app/register", '{"name": "Ann",', {
      headers: { "Content-Type": "application/json" },
    });
    expect(response.status).toBe(400);
    expect(response.body).toEqual({ message: expect.any(String) });
    expect(response.body.message.length).toBeGreaterThan(0);
  });

  it("accepts application/json; charset=utf-8 like application/json", async () => {
    const body = registration();
    const response = await ctx.api.post("/api/v1/auth/app/register", body, {
      headers: { "Content-Type": "application/json; charset=utf-8" },
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      access_token: expect.any(String),
      token_type: "Bearer",
      user: { id: expect.any(Number), name: "Ann", email: body.email },
    });
  });

  it("accepts a form-urlencoded register body", async () => {
    const body = registration();
    const response = await ctx.api.post("/api/v1/auth/app/register", new URLSearchParams(body).toString(), {
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    expect(response.status).toBe(200);
    expect(response.body.user).toEqual({ id: expect.any(Number), name: "Ann", email: body.email });
    const login = await ctx.api.post("/api/v1/auth/app/login", { email: body.email, password: body.password });
    expect(login.status).toBe(200);
  });

  it("answers a text/plain body with 415 {message}", async () => {
    const response = await ctx.api.post("/api/v1/auth/app/register", JSON.stringify(registration()), {
      headers: { "Content-Type": "text/plain" },
    });
    expect(response.status).toBe(415);
    expect(response.body).toEqual({ message: expect.any(String) });
  });

  it("answers a JSON array body with 400 {message}", async () => {
    const response = await ctx.api.post("/api/v1/auth/app/register", [registration()]);
    expect(response.status).toBe(400);
    expect(response.body).toEqual({ message: expect.any(String) });
  });

  it("answers an unknown API route with 404 JSON {message}", async () => {
    for (const path of ["/api/v1/nope", "/nope"]) {
      const response = await ctx.api.get(path);
      expect(response.status, path).toBe(404);
      expect(response.headers.get("content-type"), path).toMatch(/^application\/json/);
      expect(response.body, path).toEqual({ message: expect.any(String) });
    }
  });

  it("accepts a POST without body and without Content-Type (logout)", async () => {
    const user = await registerUser(ctx.api);
    const response = await fetch(`${ctx.server.url}/api/v1/auth/app/logout`, {
      method: "POST",
      headers: { Accept: "application/json", Authorization: `Bearer ${user.token}` },
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ message: "Logged out." });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(401);
  });
});

describe("restart", () => {
  it("keeps the data: a user registered before a restart signs in after it", async () => {
    const user = await registerUser(ctx.api);
    const restarted = await ctx.server.restart();
    ctx.server = restarted;
    const response = await restClient(restarted.url).post("/api/v1/auth/app/login", {
      email: user.email,
      password: user.password,
    });
    expect(response.status).toBe(200);
    expect(response.body.user).toEqual({ id: user.id, name: user.name, email: user.email });
  });
});
