// Writes the OpenAPI document the server serves at /api/v1/openapi.json to a file (or stdout),
// built from the routers without starting a server: for the Redocly lint and client generation.
// Usage: tsx scripts/write-openapi.ts [file]
import { writeFileSync } from "node:fs";
import { appRouter } from "../routers/index.ts";
import { buildOpenApiDocument } from "../server/http/openapi.ts";

const json = `${JSON.stringify(buildOpenApiDocument(appRouter), null, 2)}\n`;
const file = process.argv[2];
if (file) writeFileSync(file, json);
else process.stdout.write(json);
