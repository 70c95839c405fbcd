// Builds the package: writes src/generated/api.ts from the server's routers (api-types.ts),
// then compiles src/ to dist/ (ESM + .d.ts). Skipped when nothing it is made from changed:
// `npm test`, `npm run typecheck` and `npm run bench` all build first, and generating the
// types means type-checking the whole server.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import * as prettier from "prettier";
import ts from "typescript";
import { generateApiTypes } from "./api-types.ts";

const client = path.resolve(import.meta.dirname, "..");
const repo = path.resolve(client, "..");
const dist = path.join(client, "dist");
// Kept beside the generated source, out of the packed files.
const stampFile = path.join(client, "src/generated/.inputs");

/** Everything the output depends on: the server's sources, the client's, and the locked versions. */
function inputsHash(): string {
  const hash = createHash("sha256");
  const files = ["routers", "server", "db", "client/src", "client/scripts"].flatMap((dir) =>
    readdirSync(path.join(repo, dir), { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".ts") && !file.startsWith("generated"))
      .map((file) => path.join(dir, file)),
  );
  files.push("package-lock.json", "client/package.json", "client/tsconfig.json");
  for (const file of files.sort())
    hash
      .update(file)
      .update("\0")
      .update(readFileSync(path.join(repo, file)))
      .update("\0");
  return hash.digest("hex");
}

const inputs = inputsHash();
const force = process.argv.includes("--force");
const built = existsSync(path.join(dist, "index.js")) && existsSync(path.join(dist, "index.d.ts"));
if (!force && built && existsSync(stampFile) && readFileSync(stampFile, "utf8") === inputs) {
  console.log("@chat-service/client: dist/ is up to date");
  process.exit(0);
}

const started = Date.now();
const generated = path.join(client, "src/generated/api.ts");
mkdirSync(path.dirname(generated), { recursive: true });
writeFileSync(generated, await prettier.format(generateApiTypes(), { parser: "typescript", printWidth: 120 }));

rmSync(dist, { recursive: true, force: true });
const config = ts.getParsedCommandLineOfConfigFile(
  path.join(client, "tsconfig.json"),
  {},
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
    },
  },
)!;
const program = ts.createProgram(config.fileNames, config.options);
const diagnostics = [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics];
if (diagnostics.length) {
  const host = { getCanonicalFileName: (f: string) => f, getCurrentDirectory: () => repo, getNewLine: () => "\n" };
  console.error(ts.formatDiagnosticsWithColorAndContext(diagnostics, host));
  process.exit(1);
}
writeFileSync(stampFile, inputs);
console.log(`@chat-service/client: built dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s`);
