// GET /api/v1/openapi.json as a REST user reads it: every operation summarised and described,
// named component schemas, a relative server URL, request examples that pass their schemas and
// that the server accepts, `security: []` on public operations, a binary upload field, and
// error statuses and bodies that are what the server really answers (checked with ajv against
// the documented response schema of real requests).
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { beforeAll, describe, expect, it } from "vitest";
import { uniqueEmail } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

type Schema = Record<string, unknown>;
type Operation = {
  operationId?: string;
  summary?: string;
  description?: string;
  security?: Record<string, string[]>[];
  requestBody?: { content: Record<string, { schema: Schema; example?: Record<string, unknown> }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
};
type Document = {
  servers: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; securitySchemes: Record<string, Schema> };
};

let document: Document;
let ajv: Ajv2020;

const operations = () =>
  Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, operation]) => ({ path, method, operation })),
  );
const operation = (method: string, path: string) => document.paths[path]![method]!;

/** A schema of the document, its `#/components/...` references resolved against the document. */
function validator(schema: Schema): ValidateFunction {
  return ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi#/components/')));
}

/** The status is documented for the operation, and the body matches its documented schema. */
function expectDocumented(method: string, path: string, status: number, body: unknown) {
  const response = operation(method, path).responses[String(status)];
  expect(response, `${method} ${path} documents ${status}`).toBeDefined();
  const schema = response!.content?.["application/json"]?.schema;
  if (!schema) return;
  const validate = validator(schema);
  expect(validate(body), `${method} ${path} ${status}: ${JSON.stringify(validate.errors)}`).toBe(true);
}

async function send(method: string, path: string, init: { token?: string; body?: string; type?: string } = {}) {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (init.token) headers.Authorization = `Bearer ${init.token}`;
  if (init.body !== undefined) headers["Content-Type"] = init.type ?? "application/json";
  const response = await fetch(ctx.server.url + path, { method, headers, body: init.body });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

beforeAll(async () => {
  document = (await ctx.api.get<Document>("/api/v1/openapi.json")).body;
  ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat("uri", (value: string) => URL.canParse(value));
  ajv.addFormat("binary", () => true);
  ajv.addSchema({ components: document.components }, "openapi");
});

describe("the OpenAPI document", () => {
  it("names a relative server, so /docs calls whatever host it was loaded from", () => {
    expect(document.servers).toEqual([{ url: "/" }]);
  });

  it("gives every operation a summary and a description", () => {
    for (const { path, method, operation } of operations()) {
      expect(operation.summary?.trim(), `${method} ${path} summary`).toBeTruthy();
      expect(operation.description?.trim(), `${method} ${path} description`).toBeTruthy();
    }
  });

  it("has named component schemas, referenced by $ref, and none of the generator's error.* shapes", () => {
    const names = Object.keys(document.components.schemas);
    for (const name of [
      "User",
      "Workspace",
      "Channel",
      "Member",
      "Invite",
      "Message",
      "Attachment",
      "DirectConversation",
      "Room",
      "InboundWebhook",
      "OutboundWebhook",
      "Delivery",
      "AccessToken",
      "PushDevice",
      "ErrorMessage",
      "ValidationError",
    ]) {
      expect(names).toContain(name);
    }
    expect(names.filter((name) => name.startsWith("error."))).toEqual([]);
    const posted = operation("post", "/api/v1/workspaces/{workspace_id}/channels/{channel_id}/messages");
    expect(posted.responses["201"]!.content!["application/json"]!.schema).toMatchObject({
      properties: { data: { $ref: "#/components/schemas/Message" } },
    });
    expect(operation("get", "/api/v1/me").responses["200"]!.content!["application/json"]!.schema).toEqual({
      $ref: "#/components/schemas/User",
    });
  });

  it("marks public operations `security: []` and every other one bearer", () => {
    expect(document.components.securitySchemes.Authorization).toMatchObject({ type: "http", scheme: "bearer" });
    const isPublic = (path: string) =>
      /^\/api\/v1\/auth\/(app\/(register|login|otp|forgot-password|reset-password|social\/\{provider\}\/(redirect|callback))|web\/login|web\/social|email\/verify)/.test(
        path,
      ) ||
      path === "/api/v1/invites/{token}" ||
      path.startsWith("/webhooks/") ||
      path === "/healthz" ||
      path === "/readyz";
    for (const { path, method, operation } of operations()) {
      expect({ operation: `${method} ${path}`, security: operation.security }).toEqual({
        operation: `${method} ${path}`,
        security: isPublic(path) ? [] : [{ Authorization: [] }],
      });
    }
  });

  it("types the upload field as a binary file", () => {
    const form = operation("post", "/api/v1/files").requestBody!.content["multipart/form-data"]!.schema;
    expect(form).toMatchObject({ properties: { file: { type: "string", format: "binary" } } });
  });

  it("has an example for every JSON request body, valid against the body's own schema", () => {
    for (const { path, method, operation } of operations()) {
      const json = operation.requestBody?.content["application/json"];
      if (!json) continue;
      expect(json.example, `${method} ${path} example`).toBeDefined();
      const validate = validator(json.schema);
      expect(validate(json.example), `${method} ${path}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });
});

describe("the documented examples, sent to the server", () => {
  const example = (method: string, path: string) =>
    operation(method, path).requestBody!.content["application/json"]!.example!;

  async function sendExample(method: string, path: string, token?: string, params: Record<string, string> = {}) {
    const url = path.replace(/\{(\w+)\}/g, (_match, name: string) => params[name]!);
    const response = await send(method.toUpperCase(), url, { token, body: JSON.stringify(example(method, path)) });
    expectDocumented(method, path, response.status, response.body);
    return response;
  }

  it("are accepted: register, login, then a workspace, channel, message, invite, token, room, device, webhook", async () => {
    expect((await sendExample("post", "/api/v1/auth/app/register")).status).toBe(200);
    const login = await sendExample("post", "/api/v1/auth/app/login");
    expect(login.status).toBe(200);
    const token = login.body.access_token as string;

    expect((await sendExample("patch", "/api/v1/me", token)).status).toBe(200);
    const workspace = await sendExample("post", "/api/v1/workspaces", token);
    expect(workspace.status).toBe(201);
    const workspace_id = workspace.body.data.id as string;
    const channel = await sendExample("post", "/api/v1/workspaces/{workspace_id}/channels", token, { workspace_id });
    expect(channel.status).toBe(201);
    const channel_id = channel.body.data.id as string;
    const path = "/api/v1/workspaces/{workspace_id}/channels/{channel_id}/messages";
    expect((await sendExample("post", path, token, { workspace_id, channel_id })).status).toBe(201);
    const inWorkspace = { workspace_id };
    expect((await sendExample("post", "/api/v1/workspaces/{workspace_id}/invites", token, inWorkspace)).status).toBe(
      201,
    );
    expect((await sendExample("post", "/api/v1/workspaces/{workspace_id}/webhooks", token, inWorkspace)).status).toBe(
      201,
    );
    expect((await sendExample("post", "/api/v1/tokens", token)).status).toBe(201);
    expect((await sendExample("post", "/api/v1/external/rooms", token)).status).toBe(201);
    expect((await sendExample("post", "/api/v1/devices", token)).status).toBe(201);
  });
});

describe("error answers are documented as they are sent", () => {
  let token: string;
  beforeAll(async () => {
    const password = "correct horse battery";
    const registered = await send("POST", "/api/v1/auth/app/register", {
      body: JSON.stringify({ name: "Eve", email: uniqueEmail("eve"), password, password_confirmation: password }),
    });
    token = registered.body.access_token;
  });

  it("400 for malformed JSON, 413 for a body over 1 MiB, 415 for a body that is not JSON", async () => {
    const malformed = await send("POST", "/api/v1/workspaces", { token, body: "{" });
    expect(malformed.status).toBe(400);
    expectDocumented("post", "/api/v1/workspaces", 400, malformed.body);

    const huge = JSON.stringify({ name: "x".repeat(1024 * 1024) });
    const tooLarge = await send("POST", "/api/v1/workspaces", { token, body: huge });
    expect(tooLarge.status).toBe(413);
    expectDocumented("post", "/api/v1/workspaces", 413, tooLarge.body);

    const xml = await send("POST", "/api/v1/workspaces", { token, body: "<name/>", type: "application/xml" });
    expect(xml.status).toBe(415);
    expectDocumented("post", "/api/v1/workspaces", 415, xml.body);
  });

  it("401 without a token, 404 for a record the caller cannot see, 422 on a query value (with input only)", async () => {
    const anonymous = await send("GET", "/api/v1/me");
    expect(anonymous.status).toBe(401);
    expectDocumented("get", "/api/v1/me", 401, anonymous.body);

    const missing = await send("GET", "/api/v1/workspaces/nope", { token });
    expect(missing.status).toBe(404);
    expectDocumented("get", "/api/v1/workspaces/{id}", 404, missing.body);

    // Query values are checked for text the database cannot hold, like body fields.
    const nul = await send("GET", "/api/v1/workspaces/{id}/channels?x=%00".replace("{id}", "nope"), { token });
    expect(nul.status).toBe(422);
    expectDocumented("get", "/api/v1/workspaces/{workspace_id}/channels", 422, nul.body);
    // An operation without input ignores what it is sent, and documents no 422.
    expect((await send("GET", "/api/v1/me?name=%00", { token })).status).toBe(200);
    expect(operation("get", "/api/v1/me").responses["422"]).toBeUndefined();
  });

  it("422 {message} without errors where the server sends it (deleting #general)", async () => {
    const workspace = await send("POST", "/api/v1/workspaces", { token, body: JSON.stringify({ name: "Plain" }) });
    const workspaceId = workspace.body.data.id as string;
    const channels = await send("GET", `/api/v1/workspaces/${workspaceId}/channels`, { token });
    const general = (channels.body.data as { id: string; slug: string }[]).find(({ slug }) => slug === "general")!;
    const refused = await send("DELETE", `/api/v1/workspaces/${workspaceId}/channels/${general.id}`, { token });
    expect(refused).toEqual({ status: 422, body: { message: expect.any(String) } });
    expectDocumented("delete", "/api/v1/workspaces/{workspace_id}/channels/{id}", 422, refused.body);
  });

  it("429 with Retry-After once sign-in is throttled", async () => {
    const body = JSON.stringify({ email: uniqueEmail("throttled"), password: "wrong password" });
    let last = await send("POST", "/api/v1/auth/app/login", { body });
    for (let attempt = 0; attempt < 6 && last.status !== 429; attempt++) {
      last = await send("POST", "/api/v1/auth/app/login", { body });
    }
    expect(last.status).toBe(429);
    expectDocumented("post", "/api/v1/auth/app/login", 429, last.body);
  });
});
