// The REST door (server/http/rest.ts) runs trpc-to-openapi's node adapter logic on the package's
// own pieces instead of createOpenApiNodeHttpHandler (which built a WHATWG Request per call).
// This fences that fork: the same requests go to our door and to the library's handler, set up
// as our door was before (same router, context, statuses and Laravel-shaped errors), and both
// must answer alike: status, content type and body.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { TRPCError } from "@trpc/server";
import { createOpenApiNodeHttpHandler } from "trpc-to-openapi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appRouter, type AppRouter } from "../routers/index.ts";
import { createHttpContext, type RequestContext } from "../server/context.ts";
import type { Deps } from "../server/deps.ts";
import { readBody } from "../server/http/body.ts";
import { createRestHandler } from "../server/http/rest.ts";
import { restError } from "../server/http/rest-errors.ts";
import { procedureMetas } from "../server/trpc.ts";
import { restClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

type Door = (req: IncomingMessage & { body?: unknown }, res: ServerResponse) => Promise<void>;

/** The library's own handler, configured as our REST door was before the fork. */
function libraryDoor(deps: Deps, router: AppRouter): Door {
  const statuses = new Map(
    procedureMetas(router).flatMap(({ path, meta }) =>
      meta.successStatus ? [[path, meta.successStatus] as const] : [],
    ),
  );
  const failures = new WeakMap<IncomingMessage, TRPCError>();
  const handler = createOpenApiNodeHttpHandler({
    router,
    createContext: ({ req }: { req: IncomingMessage }) => createHttpContext(deps, req),
    responseMeta: ({ ctx: context, paths, errors }) => {
      const requestContext = context as RequestContext | undefined;
      const headers = { ...requestContext?.response.headers };
      const firstError = errors[0];
      if (firstError) {
        const mapped = restError(firstError);
        return { status: mapped.status, headers: { ...headers, ...mapped.headers } };
      }
      return { status: requestContext?.response.status ?? statuses.get(paths?.[0] ?? "") ?? 200, headers };
    },
    onError: ({ error, req }) => void failures.set(req, error),
  });
  return async (req, res) => {
    const end = res.end.bind(res) as (chunk?: unknown) => ServerResponse;
    res.end = ((chunk?: unknown) => {
      const failure = failures.get(req);
      if (failure) return end(JSON.stringify(restError(failure).body));
      if (res.statusCode === 204) {
        res.removeHeader("Content-Type");
        return end();
      }
      return end(chunk);
    }) as ServerResponse["end"];
    await handler(req, res);
  };
}

/** A server in front of a door, reading bodies as server/http/host.ts does for /api/v1. */
async function serve(door: Door): Promise<{ url: string; server: Server }> {
  const server = createServer((req: IncomingMessage & { body?: unknown }, res) => {
    void (async () => {
      if (req.method !== "GET" && req.method !== "HEAD") {
        req.body = (await readBody(req)).value;
        req.headers["content-type"] = "application/json";
      }
      await door(req, res);
    })().catch(() => {
      res.statusCode = 599;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

let ours: { url: string; server: Server };
let library: { url: string; server: Server };
let user: RegisteredUser;
let place: { workspaceId: string; channelId: string };

beforeAll(async () => {
  const { deps } = ctx.server.app;
  ours = await serve(createRestHandler(deps, appRouter));
  library = await serve(libraryDoor(deps, appRouter));
  user = await registerUser(ctx.api);
  place = await createWorkspaceWithGeneral(ctx.api, user);
});

afterAll(async () => {
  await Promise.all([ours, library].map(({ server }) => new Promise((resolve) => server.close(resolve))));
});

describe("the REST door against trpc-to-openapi's own handler", () => {
  const cases: { name: string; method: string; path: () => string; body?: unknown; anonymous?: boolean }[] = [
    { name: "a read", method: "GET", path: () => "/api/v1/me" },
    { name: "a read without a token (401)", method: "GET", path: () => "/api/v1/me", anonymous: true },
    { name: "an unknown path (404)", method: "GET", path: () => "/api/v1/nothing-here" },
    { name: "a list", method: "GET", path: () => "/api/v1/workspaces" },
    { name: "path parameters", method: "GET", path: () => `/api/v1/workspaces/${place.workspaceId}/channels` },
    {
      name: "query strings coerced (limit)",
      method: "GET",
      path: () => `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages?limit=5`,
    },
    {
      name: "a query string that does not coerce (422)",
      method: "GET",
      path: () => `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages?limit=abc`,
    },
    {
      name: "a workspace that is not the caller's (404)",
      method: "GET",
      path: () => "/api/v1/workspaces/wsp_nope/channels",
    },
    {
      name: "a body that fails validation (422)",
      method: "POST",
      path: () => `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages`,
      body: { content: "" },
    },
    {
      name: "a body with a wrong type (422)",
      method: "POST",
      path: () => `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages`,
      body: { content: 42, attachment_ids: "x" },
    },
    { name: "a POST without a body where one is needed (422)", method: "POST", path: () => "/api/v1/workspaces" },
    { name: "a method the path does not have (404)", method: "PUT", path: () => "/api/v1/me/nothing" },
    { name: "a HEAD on no procedure", method: "HEAD", path: () => "/api/v1/warm-up" },
  ];

  for (const testCase of cases) {
    it(`answers ${testCase.name} as the library does`, async () => {
      const call = (base: string) =>
        restClient(base).call(testCase.method, testCase.path(), {
          body: testCase.body,
          token: testCase.anonymous ? undefined : user.token,
        });
      const [mine, theirs] = [await call(ours.url), await call(library.url)];
      expect(mine.status).toBe(theirs.status);
      expect(mine.headers.get("content-type")).toBe(theirs.headers.get("content-type"));
      expect(mine.body).toEqual(theirs.body);
    });
  }

  it("answers a write (201) and a 204 as the library does", async () => {
    const created = await Promise.all(
      [ours, library].map((door) =>
        restClient(door.url).post(
          `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages`,
          { content: "the same words" },
          { token: user.token },
        ),
      ),
    );
    expect(created.map((response) => response.status)).toEqual([201, 201]);
    const shape = (body: { data: Record<string, unknown> }) => ({
      ...body.data,
      id: "…",
      created_at: "…",
      updated_at: "…",
    });
    expect(shape(created[0]!.body)).toEqual(shape(created[1]!.body));

    const tokens = await Promise.all(
      [1, 2].map(() => ctx.api.post("/api/v1/tokens", { name: "door", abilities: ["read"] }, { token: user.token })),
    );
    const revoked = await Promise.all(
      [ours, library].map((door, index) =>
        restClient(door.url).delete(`/api/v1/tokens/${tokens[index]!.body.data.id}`, { token: user.token }),
      ),
    );
    expect(revoked.map((response) => [response.status, response.body, response.headers.get("content-type")])).toEqual([
      [204, undefined, null],
      [204, undefined, null],
    ]);
  });
});
