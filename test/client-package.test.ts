// The typed client as another project gets it: `npm pack -w client`, installed into fresh
// projects outside the repository, the README's examples type-checked there (Node 20 with `ws`;
// a browser bundle without it) and the Node one run against the server. Needs client/dist
// (`npm test` builds it first) and npm able to install ws, typescript and @types/* (from the
// npm cache, or the registry).
import { execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { inferRouterInputs, inferRouterOutputs } from "@trpc/server";
import type { ErrorShape, RouterInputs, RouterOutputs } from "@chat-service/client";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import type { AppRouter as ServerRouter } from "../routers/index.ts";
import { restClient } from "./helpers/api.ts";
import { registerUser } from "./helpers/factories.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const run = promisify(execFile);
const repo = path.resolve(import.meta.dirname, "..");
const clientDist = path.join(repo, "client/dist");
// npm's own variables (from `npm test`) would point the child npm at this repository's workspace.
const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("npm_")));
const installedVersion = async (name: string) =>
  JSON.parse(await readFile(path.join(repo, "node_modules", name, "package.json"), "utf8")).version as string;

/** The README's ```ts blocks, by the file name their first line gives (`// app.ts: ...`). */
async function readmeExamples(): Promise<Record<string, string>> {
  const readme = await readFile(path.join(repo, "client/README.md"), "utf8");
  const blocks = [...readme.matchAll(/```ts\n(\/\/ ([\w.-]+\.ts):[^]*?)```/g)];
  return Object.fromEntries(blocks.map((block) => [block[2]!, block[1]!]));
}

/** A new project in `dir` with the packed client and `packages` installed, and `files` written. */
async function freshProject(dir: string, tarball: string, packages: string[], files: Record<string, unknown>) {
  await mkdir(dir);
  await writeFile(
    path.join(dir, "package.json"),
    JSON.stringify({ name: path.basename(dir), private: true, type: "module" }),
  );
  for (const [name, content] of Object.entries(files)) {
    await writeFile(path.join(dir, name), typeof content === "string" ? content : JSON.stringify(content, null, 2));
  }
  await run("npm", ["install", tarball, ...packages, "--no-audit", "--no-fund", "--prefer-offline"], { cwd: dir, env });
}

/** `tsc -p .` in a project: its output (errors included) and whether it passed. */
async function typeCheck(dir: string): Promise<{ ok: boolean; output: string }> {
  const tsc = path.join(dir, "node_modules/typescript/bin/tsc");
  return run(process.execPath, [tsc, "-p", "."], { cwd: dir, env }).then(
    ({ stdout }) => ({ ok: true, output: stdout }),
    (error: { stdout?: string }) => ({ ok: false, output: error.stdout ?? String(error) }),
  );
}

let server: TestServer;
let work: string;
let nodeApp: string;
let webApp: string;

beforeAll(async () => {
  await expect(readFile(path.join(clientDist, "index.d.ts"), "utf8"), "run npm run build:client").resolves.toBeTruthy();
  server = await startTestServer();
  work = await mkdtemp(path.join(tmpdir(), "chat-client-package-"));
  const { stdout } = await run("npm", ["pack", "--workspace", "client", "--pack-destination", work, "--json"], {
    cwd: repo,
    env,
  });
  const tarball = path.join(work, (JSON.parse(stdout) as { filename: string }[])[0]!.filename);
  const examples = await readmeExamples();
  const strict = {
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: false,
  };
  nodeApp = path.join(work, "node-app");
  webApp = path.join(work, "web-app");
  const [ws, wsTypes, typescript, nodeTypes] = await Promise.all(
    ["ws", "@types/ws", "typescript", "@types/node"].map(installedVersion),
  );
  await Promise.all([
    freshProject(
      nodeApp,
      tarball,
      [`ws@${ws}`, `@types/ws@${wsTypes}`, `typescript@${typescript}`, `@types/node@${nodeTypes}`],
      {
        "app.ts": examples["app.ts"],
        "tsconfig.json": {
          compilerOptions: { module: "nodenext", target: "es2022", types: ["node"], outDir: "dist", ...strict },
          files: ["app.ts"],
        },
      },
    ),
    // No ws, no Node types: what a web app's bundler build sees. tRPC's own declarations use
    // Disposable, hence esnext.disposable (or skipLibCheck, as Vite's templates set).
    freshProject(webApp, tarball, [`typescript@${typescript}`], {
      "browser.ts": examples["browser.ts"],
      "tsconfig.json": {
        compilerOptions: {
          module: "esnext",
          moduleResolution: "bundler",
          target: "es2022",
          lib: ["es2023", "esnext.disposable", "dom", "dom.iterable"],
          types: [],
          noEmit: true,
          ...strict,
        },
        files: ["browser.ts"],
      },
    }),
  ]);
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("the built package", () => {
  it("declares only client code and API types: its .d.ts import tRPC and nothing of the server", async () => {
    const files = (await readdir(clientDist, { recursive: true })).filter((file) => file.endsWith(".d.ts"));
    expect(files.sort()).toEqual(["generated/api.d.ts", "index.d.ts"]);
    const imported = new Set<string>();
    for (const file of files) {
      const text = await readFile(path.join(clientDist, file), "utf8");
      for (const match of text.matchAll(/(?:from|import\()\s*"([^"]+)"/g)) imported.add(match[1]!);
      expect(text).not.toMatch(/drizzle|postgres|ioredis|bullmq|pglite|RequestContext|Deps\b/);
    }
    expect([...imported].sort()).toEqual(["./generated/api.js", "@trpc/client", "@trpc/server"]);
  });

  it("has every procedure's input and output, and the error shape, of the server's router", () => {
    // Checked by `npm run typecheck`: per router, the published types and the server's accept
    // the same values. An entry false (or missing) names the router whose types differ.
    type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
    type Parity<Published, Server> = {
      [K in keyof Server]: K extends keyof Published ? Same<Published[K], Server[K]> : false;
    };
    type AllTrue<T> = { [K in keyof T]: true };
    type Inputs = Parity<RouterInputs, inferRouterInputs<ServerRouter>>;
    type Outputs = Parity<RouterOutputs, inferRouterOutputs<ServerRouter>>;
    expectTypeOf<Inputs>().toEqualTypeOf<AllTrue<Inputs>>();
    expectTypeOf<Outputs>().toEqualTypeOf<AllTrue<Outputs>>();
    expectTypeOf<keyof RouterOutputs>().toEqualTypeOf<keyof inferRouterOutputs<ServerRouter>>();
    expectTypeOf<Same<ErrorShape, ServerRouter["_def"]["_config"]["$types"]["errorShape"]>>().toEqualTypeOf<true>();
  });
});

describe("a fresh project with the packed client", () => {
  it("type-checks the README's Node example with ws (nodenext, strict)", async () => {
    const result = await typeCheck(nodeApp);
    expect(result.output).toBe("");
    expect(result.ok).toBe(true);
  }, 120_000);

  it("type-checks the README's browser example (bundler resolution, DOM, no ws or Node types)", async () => {
    const result = await typeCheck(webApp);
    expect(result.output).toBe("");
    expect(result.ok).toBe(true);
  }, 120_000);

  it("runs the README's Node example: signs in, reads me, gets a 422 and a live event, exits on Ctrl-C", async () => {
    await expect(
      readFile(path.join(nodeApp, "dist/app.js"), "utf8"),
      "compiled by the type-check",
    ).resolves.toBeTruthy();
    const api = restClient(server.url);
    const user = await registerUser(api, { name: "Package User" });
    const child = spawn(process.execPath, ["dist/app.js"], {
      cwd: nodeApp,
      env: { ...env, CHAT_URL: server.url, CHAT_EMAIL: user.email, CHAT_PASSWORD: user.password },
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      await until(
        () => (output.includes("rejected") ? true : undefined),
        "the example to sign in and be refused",
        30_000,
      );
      expect(output).toContain(`signed in as Package User <${user.email}>`);
      expect(output).toMatch(/rejected: 422 \{ name: \[ '.+' \] \}/);
      // The subscription may still be starting: rename until the event comes through.
      let rename = 0;
      await until(
        async () => {
          if (output.includes("user.updated: Renamed")) return true;
          await api.patch("/api/v1/me", { name: `Renamed ${++rename}` }, { token: user.token });
          await new Promise((resolve) => setTimeout(resolve, 200));
          return undefined;
        },
        "the user.updated event",
        20_000,
      );
      child.kill("SIGINT");
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
    expect(output).not.toContain("subscription failed");
  }, 60_000);
});
