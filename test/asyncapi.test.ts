// GET /api/v1/asyncapi.json: a valid AsyncAPI 3.0 document (checked by the official parser) that
// names every event type of the catalog and every subscription procedure of the router, both
// derived here from the code, so an event or a subscription added without being documented fails.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { Parser } from "@asyncapi/parser";
import { describe, expect, it } from "vitest";
import { appRouter } from "../routers/index.ts";
import { eventData } from "../server/events/catalog.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

/** Spectral's severities: 0 error, 1 warning, 2 information, 3 hint. */
const WARNING = 1;

type Doc = {
  asyncapi: string;
  channels: Record<string, { address: string; messages: Record<string, any> }>;
  components: { messages: Record<string, any>; schemas: Record<string, any> };
};

async function fetchDocument(): Promise<Doc> {
  const response = await fetch(`${ctx.server.url}/api/v1/asyncapi.json`);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("application/json");
  return (await response.json()) as Doc;
}

async function problems(document: unknown) {
  const { diagnostics } = await new Parser().parse(JSON.stringify(document));
  return diagnostics
    .filter((diagnostic) => diagnostic.severity <= WARNING)
    .map((diagnostic) => `${diagnostic.code} at ${diagnostic.path.join("/")}: ${diagnostic.message}`);
}

const subscriptionPaths = () =>
  Object.entries(appRouter._def.procedures as unknown as Record<string, { _def: { type: string } }>)
    .filter(([, procedure]) => procedure._def.type === "subscription")
    .map(([procedurePath]) => procedurePath)
    .sort();

describe("the AsyncAPI document", () => {
  it("is valid AsyncAPI 3.0 by the official parser, with no errors or warnings", async () => {
    const document = await fetchDocument();
    expect(document.asyncapi).toBe("3.0.0");
    expect(await problems(document)).toEqual([]);
  }, 30_000);

  it("is refused by the same check when a reference is broken (the check can fail)", async () => {
    const document = await fetchDocument();
    const [first] = Object.values(document.channels);
    first!.messages.broken = { $ref: "#/components/messages/no-such-message" };
    expect((await problems(document)).length).toBeGreaterThan(0);
  }, 30_000);

  it("has a message for every event type of the catalog, its payload typed by that event", async () => {
    const document = await fetchDocument();
    for (const type of Object.keys(eventData)) {
      for (const door of ["ws", "sse"]) {
        const message = document.components.messages[`${door}.${type}`];
        expect(message, `${door}.${type}`).toBeDefined();
        expect(message.summary, `${door}.${type} summary`).toMatch(/\w/);
      }
      const schemaRef: string = document.components.messages[`sse.${type}`].payload.$ref;
      const schema = document.components.schemas[schemaRef.replace("#/components/schemas/", "")];
      expect(schema.properties.type).toEqual({ type: "string", const: type });
      expect(schema.required).toEqual(expect.arrayContaining(["id", "type", "created_at", "data"]));
    }
  });

  it("has a channel on each door for every subscription procedure, and every event is in one", async () => {
    const document = await fetchDocument();
    // The routers' own text: every `.subscription(` is a procedure the router serves.
    const routerDir = path.join(import.meta.dirname, "../routers");
    let written = 0;
    for (const file of await readdir(routerDir))
      written += (await readFile(path.join(routerDir, file), "utf8")).split(".subscription(").length - 1;
    const paths = subscriptionPaths();
    expect(paths).toHaveLength(written);
    expect(paths).toContain("events.onUser");

    const delivered = new Set<string>();
    for (const procedurePath of paths) {
      const ws = document.channels[`ws.${procedurePath}`];
      const sse = document.channels[`sse.${procedurePath}`];
      expect(ws?.address, procedurePath).toBe("/trpc");
      expect(sse?.address, procedurePath).toBe(`/trpc/${procedurePath}`);
      expect(ws!.messages.subscribe.payload.properties.params.properties.path).toEqual({ const: procedurePath });
      for (const key of Object.keys(sse!.messages)) if (key in eventData) delivered.add(key);
    }
    expect([...delivered].sort()).toEqual(Object.keys(eventData).sort());
    const documented = Object.keys(document.channels)
      .filter((key) => key.startsWith("sse."))
      .map((key) => key.slice("sse.".length))
      .sort();
    expect(documented).toEqual(paths);
  });

  it("gives each subscription's input schema, resumable by lastEventId", async () => {
    const document = await fetchDocument();
    const input = document.components.schemas.MessagesOnChannelInput;
    expect(input.required).toEqual(["workspace_id", "channel_id"]);
    expect(input.properties.lastEventId.anyOf).toContainEqual({ type: "string", pattern: "^\\d{1,18}$" });
  });
});
