// Services return what happened; the doors speak HTTP and tRPC (docs: house style, "Services that
// speak HTTP"). So no file under server/services imports the HTTP layer (server/http/*), tRPC
// (@trpc/server, any subpath), the tRPC door modules (server/trpc*.ts) or the request context of
// server/context.ts with its response helpers. Type-only imports count too: the context type
// carries the response overrides, and a caller's `Auth` lives in server/auth.ts below both.
// Imports are read with TypeScript's own pre-processor, so comments and strings do not confuse it.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..");
const SERVICES = join(ROOT, "server/services");

/** Why an import specifier (as written in `file`) is out of bounds for a service, or undefined. */
function forbiddenImport(file: string, specifier: string): string | undefined {
  if (specifier === "@trpc/server" || specifier.startsWith("@trpc/server/")) return "tRPC belongs to the doors";
  if (!specifier.startsWith(".")) return undefined;
  const target = relative(ROOT, resolve(dirname(file), specifier))
    .split("\\")
    .join("/");
  if (target.startsWith("server/http/")) return "the HTTP layer belongs to the doors";
  if (target === "server/context.ts") return "the request context (response status and headers) belongs to the doors";
  if (/^server\/trpc[^/]*\.ts$/.test(target)) return "the tRPC door modules belong to the doors";
  return undefined;
}

function tsFilesUnder(directory: string): string[] {
  return readdirSync(directory, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .map((name) => join(directory, name))
    .sort();
}

/** Every import of a file: static, type-only, re-exports and dynamic `import()`. */
function importsOf(source: string): string[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((imported) => imported.fileName);
}

function violations(file: string, source: string): string[] {
  return importsOf(source).flatMap((specifier) => {
    const why = forbiddenImport(file, specifier);
    return why ? [`${relative(ROOT, file)} imports "${specifier}": ${why}`] : [];
  });
}

describe("service boundaries", () => {
  it("no file under server/services imports server/http, @trpc/server, server/trpc*.ts or server/context.ts", () => {
    const files = tsFilesUnder(SERVICES);
    expect(files.length).toBeGreaterThan(20);
    const found = files.flatMap((file) => violations(file, readFileSync(file, "utf8")));
    expect(found, found.join("\n")).toEqual([]);
  });

  it("sees every kind of forbidden import, and nothing in comments", () => {
    const file = join(SERVICES, "webhooks/post.ts");
    const source = [
      `import { parseBody } from "../../http/body.ts";`,
      `import type { TRPCError } from "@trpc/server";`,
      `import { TRPC_ERROR_CODES_BY_KEY } from "@trpc/server/rpc";`,
      `import { appendResponseHeader } from "../../context.ts";`,
      `export { toTRPCError } from "../../trpc-errors.ts";`,
      `const later = () => import("../../http/respond.ts");`,
      `// import { sendJson } from "../../http/respond.ts";`,
      `import { AppError } from "../../errors.ts";`,
      `import { z } from "zod";`,
    ].join("\n");
    expect(violations(file, source)).toEqual([
      `server/services/webhooks/post.ts imports "../../http/body.ts": the HTTP layer belongs to the doors`,
      `server/services/webhooks/post.ts imports "@trpc/server": tRPC belongs to the doors`,
      `server/services/webhooks/post.ts imports "@trpc/server/rpc": tRPC belongs to the doors`,
      `server/services/webhooks/post.ts imports "../../context.ts": the request context (response status and headers) belongs to the doors`,
      `server/services/webhooks/post.ts imports "../../trpc-errors.ts": the tRPC door modules belong to the doors`,
      `server/services/webhooks/post.ts imports "../../http/respond.ts": the HTTP layer belongs to the doors`,
    ]);
  });
});

// Events are written only through server/events/streams.ts (writeWithEvents for a transaction,
// eventCte + commitWithEvents for one statement), which wake the relay from what the commit
// wrote: no service, router or worker names the log's table or wakes the relay itself.
const EVENT_WRITERS = ["server/services", "routers", "workers"];

function eventLogViolations(file: string, source: string): string[] {
  const found: string[] = [];
  const code = source.replace(/\/\/.*$/gm, "");
  if (/\bstreamEvents\b/.test(code)) found.push(`${relative(ROOT, file)} names the event log's table (streamEvents)`);
  if (/\brelay\??\.wake\(/.test(code)) found.push(`${relative(ROOT, file)} wakes the relay itself`);
  return found;
}

describe("the event log's writers", () => {
  it("no service, router or worker writes stream_events or wakes the relay on its own", () => {
    const files = EVENT_WRITERS.flatMap((directory) => tsFilesUnder(join(ROOT, directory)));
    expect(files.length).toBeGreaterThan(60);
    const found = files.flatMap((file) => eventLogViolations(file, readFileSync(file, "utf8")));
    expect(found, found.join("\n")).toEqual([]);
  });

  it("sees a table named and a relay woken, and nothing in comments", () => {
    const file = join(ROOT, "server/services/messaging/reactions.ts");
    expect(eventLogViolations(file, "sql`insert into ${streamEvents} (stream)`;\ndeps.relay.wake();")).toEqual([
      "server/services/messaging/reactions.ts names the event log's table (streamEvents)",
      "server/services/messaging/reactions.ts wakes the relay itself",
    ]);
    expect(eventLogViolations(file, "// deps.relay?.wake() after streamEvents\nconst x = 1;")).toEqual([]);
  });
});
