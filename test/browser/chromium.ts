// Debian's Chromium (apt-get install chromium) driven by playwright-core: no browser download.
// The flags keep it off the network (this machine's network is closed: background services
// would fail to reach Google at every start) and away from GPU and sandbox needs (CI runs as root).
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  // Playwright adds --headless and a fresh temporary --user-data-dir on its own.
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    timeout: 30_000,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...extraArgs,
    ],
  });
}

/**
 * What went wrong on the page, as a user with the devtools open would see it, and any request
 * to another origin than `origin` (the page must work without reaching anyone else).
 */
export function watchProblems(page: Page, origin: string): string[] {
  const problems: string[] = [];
  page.on("request", (request) => {
    const url = new URL(request.url());
    if (url.protocol.startsWith("http") && url.origin !== origin) problems.push(`other origin: ${request.url()}`);
  });
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console error: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`uncaught: ${error.message}`));
  page.on("requestfailed", (request) =>
    problems.push(`request failed: ${request.method()} ${request.url()} (${request.failure()?.errorText})`),
  );
  page.on("response", (response) => {
    if (response.status() >= 400) problems.push(`HTTP ${response.status()}: ${response.url()}`);
  });
  return problems;
}

/** Runs `steps`; on failure, saves a screenshot and names its path in the error. */
export async function withScreenshotOnFailure(page: Page, label: string, steps: () => Promise<void>): Promise<void> {
  try {
    await steps();
  } catch (error) {
    const dir = await mkdtemp(path.join(tmpdir(), "browser-test-"));
    const file = path.join(dir, `${label.replace(/[^a-z0-9]+/gi, "-")}.png`);
    const saved = await page.screenshot({ path: file, fullPage: true }).then(
      () => `screenshot: ${file}`,
      (screenshotError: Error) => `no screenshot (${screenshotError.message})`,
    );
    if (error instanceof Error) {
      error.message += `\n${saved}`;
      throw error;
    }
    throw new Error(`${String(error)}\n${saved}`);
  }
}
