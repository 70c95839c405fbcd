// A client generated from the OpenAPI document (openapi-typescript + openapi-fetch), as a REST
// user outside TypeScript-RPC would make one, runs a flow against the real server. The calls
// are type-checked against test/generated/openapi.d.ts (npx tsc --noEmit -p .), which the
// first test regenerates from the routers: a stale file fails here.
import { readFileSync } from "node:fs";
import createClient from "openapi-fetch";
import { describe, expect, it } from "vitest";
import { GENERATED_TYPES, openApiTypes } from "../scripts/generate-openapi-types.ts";
import type { paths } from "./generated/openapi.d.ts";
import { uniqueEmail } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

const PASSWORD = "correct horse battery";

function client(token?: string) {
  return createClient<paths>({
    baseUrl: ctx.server.url,
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  });
}

async function register(name: string) {
  const email = uniqueEmail(name.toLowerCase());
  const { data, response } = await client().POST("/api/v1/auth/app/register", {
    body: { name, email, password: PASSWORD, password_confirmation: PASSWORD },
  });
  expect(response.status).toBe(200);
  return { email, token: data!.access_token, id: data!.user.id };
}

describe("the generated OpenAPI client", () => {
  it("is generated from the current document (npm run generate:openapi-types)", async () => {
    expect(readFileSync(GENERATED_TYPES, "utf8")).toBe(await openApiTypes());
  });

  it("registers, signs in, creates a workspace and a channel, posts and lists messages", async () => {
    const ann = await register("Ann");
    const login = await client().POST("/api/v1/auth/app/login", {
      body: { email: ann.email, password: PASSWORD, device_name: "openapi-fetch" },
    });
    expect(login.response.status).toBe(200);
    expect(login.data?.token_type).toBe("Bearer");
    const api = client(login.data!.access_token);

    const me = await api.GET("/api/v1/me");
    expect(me.data?.email).toBe(ann.email);

    const workspace = await api.POST("/api/v1/workspaces", { body: { name: "Generated Co" } });
    expect(workspace.response.status).toBe(201);
    const workspace_id = workspace.data!.data.id;

    const channel = await api.POST("/api/v1/workspaces/{workspace_id}/channels", {
      params: { path: { workspace_id } },
      body: { name: "Typed" },
    });
    expect(channel.response.status).toBe(201);
    const channel_id = channel.data!.data.id;

    const path = { workspace_id, channel_id };
    const posted = await api.POST("/api/v1/workspaces/{workspace_id}/channels/{channel_id}/messages", {
      params: { path },
      body: { content: "typed hello" },
    });
    expect(posted.response.status).toBe(201);
    expect(posted.data?.data.author).toMatchObject({ type: "user", id: ann.id });

    const history = await api.GET("/api/v1/workspaces/{workspace_id}/channels/{channel_id}/messages", {
      params: { path, query: { limit: 10 } },
    });
    expect(history.response.status).toBe(200);
    expect(history.data?.data.map((message) => message.content)).toEqual(["typed hello"]);
  });

  it("opens a direct conversation: 201 the first time, 200 with the same conversation after", async () => {
    const ann = await register("Ann");
    const bob = await register("Bob");
    const api = client(ann.token);
    const first = await api.POST("/api/v1/direct-conversations", { body: { participant_user_id: bob.id } });
    const again = await api.POST("/api/v1/direct-conversations", { body: { participant_user_id: bob.id } });
    expect([first.response.status, again.response.status]).toEqual([201, 200]);
    expect(again.data?.data.id).toBe(first.data?.data.id);
    expect(again.data?.data.participant.id).toBe(bob.id);
  });

  it("reads a 422 as the documented {message, errors}", async () => {
    const ann = await register("Ann");
    const { error, response } = await client(ann.token).POST("/api/v1/workspaces", { body: { name: "" } });
    expect(response.status).toBe(422);
    // The error is typed as any of the documented error bodies; the 422 one has `errors`.
    const invalid = error && "errors" in error ? error : undefined;
    expect(invalid?.message).toBe("The given data was invalid.");
    expect(Object.keys(invalid?.errors ?? {})).toEqual(["name"]);
    expect(invalid?.errors.name?.[0]).toMatch(/name/);
  });
});
