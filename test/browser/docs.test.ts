// /docs in a real browser (Debian's Chromium): the page a REST user opens first. From both
// names of the machine, localhost and 127.0.0.1, it must load cleanly, list every operation of
// the OpenAPI document and let "Try it out" call the API with a bearer token. Under any other
// host name (as deployed) it must load without calling anyone else.
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { registerUser, type RegisteredUser } from "../helpers/factories.ts";
import { useTestServer } from "../helpers/server.ts";
import { launchChromium, watchProblems, withScreenshotOnFailure } from "./chromium.ts";

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

type OpenApi = { paths: Record<string, Record<string, { tags?: string[] }>> };

/** "GET /api/v1/me" for every operation, and how many blocks Swagger UI draws (one per tag). */
function operationsOf(doc: OpenApi): { names: string[]; blocks: number } {
  const names: string[] = [];
  let blocks = 0;
  for (const [route, item] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!METHODS.includes(method)) continue;
      names.push(`${method.toUpperCase()} ${route}`);
      blocks += Math.max(1, operation.tags?.length ?? 0);
    }
  }
  return { names: names.sort(), blocks };
}

// "::" listens on both loopbacks: Chromium resolves localhost to ::1 first (127.0.0.1 only
// after ::1 refuses), while 127.0.0.1 is IPv4. The helper's url stays http://127.0.0.1:<port>.
const ctx = useTestServer({ HOST: "::" });
const DEPLOYED_NAME = "docs.test";
let browser: Browser;
let user: RegisteredUser;
let expected: { names: string[]; blocks: number };

beforeAll(async () => {
  // docs.test stands for a deployed server's name (Swagger UI treats loopback names specially).
  browser = await launchChromium([`--host-resolver-rules=MAP ${DEPLOYED_NAME} 127.0.0.1`]);
  user = await registerUser(ctx.api);
  const doc = await ctx.api.get<OpenApi>("/api/v1/openapi.json");
  expect(doc.status).toBe(200);
  expected = operationsOf(doc.body);
  expect(expected.names).toContain("GET /api/v1/me");
});

afterAll(() => browser?.close());

describe("/docs in Chromium", () => {
  test(`at http://${DEPLOYED_NAME}:<port>: loads without a request to another origin`, async () => {
    const origin = `http://${DEPLOYED_NAME}:${new URL(ctx.server.url).port}`;
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    const problems = watchProblems(page, origin);
    try {
      await withScreenshotOnFailure(page, "docs-deployed", async () => {
        await page.goto(`${origin}/docs`);
        await page.locator(".opblock").first().waitFor();
        await page.waitForLoadState("networkidle");
        expect(problems).toEqual([]);
      });
    } finally {
      await context.close();
    }
  });

  test.each(["localhost", "127.0.0.1"])(
    "at http://%s:<port>: lists every operation; Try it out on GET /api/v1/me with a token answers 200",
    async (hostname) => {
      const origin = `http://${hostname}:${new URL(ctx.server.url).port}`;
      const context = await browser.newContext();
      const page = await context.newPage();
      page.setDefaultTimeout(20_000);
      const problems = watchProblems(page, origin);
      try {
        await withScreenshotOnFailure(page, `docs-${hostname}`, async () => {
          await page.goto(`${origin}/docs`);
          const blocks = page.locator(".opblock");
          await blocks.first().waitFor();
          expect(await blocks.count()).toBe(expected.blocks);
          const listed = await blocks.evaluateAll((nodes) =>
            nodes.map((node) => {
              const method = node.querySelector(".opblock-summary-method")?.textContent?.trim();
              const route = node.querySelector(".opblock-summary-path")?.getAttribute("data-path");
              return `${method} ${route}`;
            }),
          );
          expect([...new Set(listed)].sort()).toEqual(expected.names);

          // Authorize with the bearer token, as the dialog asks for it.
          await page.getByRole("button", { name: "Authorize" }).first().click();
          const dialog = page.locator(".modal-ux");
          await dialog.locator("input[aria-label='auth-bearer-value']").fill(user.token);
          // The dialog's Authorize button is labelled "Apply credentials"; once applied it offers Logout.
          await dialog.getByRole("button", { name: "Apply credentials" }).click();
          await dialog.getByRole("button", { name: "Remove authorization" }).waitFor();
          await dialog.getByRole("button", { name: "Close" }).click();

          const me = page.locator(".opblock-get").filter({
            has: page.locator(".opblock-summary-path[data-path='/api/v1/me']"),
          });
          await me.locator(".opblock-summary-control").click();
          await me.getByRole("button", { name: "Try it out" }).click();
          await me.getByRole("button", { name: "Execute" }).click();

          // The answer appears once the request is done; it went to the page's own origin.
          const response = me.locator(".live-responses-table .response").first();
          await response.waitFor();
          expect(await me.locator(".request-url pre").textContent()).toBe(`${origin}/api/v1/me`);
          expect(await response.locator(".response-col_status").textContent()).toContain("200");
          expect(await response.locator(".response-col_description").textContent()).toContain(user.email);
          expect(problems).toEqual([]);
        });
      } finally {
        await context.close();
      }
    },
  );
});
