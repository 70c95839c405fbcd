import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The slow fault tests run on their own: `npm run test:faults` (vitest.faults.config.ts);
    // the browser tests need Chromium: `npm run test:browser` (vitest.browser.config.ts).
    exclude: [...configDefaults.exclude, "test/faults/**", "test/browser/**"],
    // Each file starts its own server on a random port against its own fresh database.
    pool: "forks",
    fileParallelism: true,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ["default"],
  },
});
