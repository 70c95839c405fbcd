// GET /docs: a browsable reference (Swagger UI, served from the swagger-ui-dist package so
// it works without reaching any CDN) over /api/v1/openapi.json.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";
import type { ServerResponse } from "node:http";
import { createRequire } from "node:module";

// Only the package's folder is needed: importing swagger-ui-dist itself would load its 1.5 MB
// browser bundle into the server.
const ASSET_DIR = path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));

const ASSETS = new Map([
  ["swagger-ui.css", "text/css"],
  ["swagger-ui-bundle.js", "application/javascript"],
  ["favicon-32x32.png", "image/png"],
]);

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Chat Service API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" href="/docs/assets/favicon-32x32.png">
</head>
<body>
  <div id="reference"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/init.js"></script>
</body>
</html>`;

// Kept in a file of its own so the page needs no inline script (strict CSP friendly).
const INIT = `window.ui = SwaggerUIBundle({ url: "/api/v1/openapi.json", dom_id: "#reference", deepLinking: true });`;

export async function serveDocs(pathname: string, res: ServerResponse): Promise<boolean> {
  if (pathname === "/docs" || pathname === "/docs/") {
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" }).end(PAGE);
    return true;
  }
  if (pathname === "/docs/assets/init.js") {
    res.writeHead(200, { "Content-Type": "application/javascript" }).end(INIT);
    return true;
  }
  const name = pathname.startsWith("/docs/assets/") ? pathname.slice("/docs/assets/".length) : undefined;
  const type = name ? ASSETS.get(name) : undefined;
  if (!name || !type) return false;
  const file = path.join(ASSET_DIR, name);
  const { size } = await stat(file);
  res.writeHead(200, { "Content-Type": type, "Content-Length": size, "Cache-Control": "public, max-age=86400" });
  createReadStream(file).pipe(res);
  return true;
}
