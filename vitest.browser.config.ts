import { defineConfig } from "vitest/config";

// The browser tests (test/browser/): they need Debian's Chromium at /usr/bin/chromium
// (apt-get install chromium), so they are kept out of `npm test`. Run them with
// `npm run test:browser`.
export default defineConfig({
  test: {
    include: ["test/browser/**/*.test.ts"],
    pool: "forks",
    // One browser at a time: each launches its own Chromium.
    fileParallelism: false,
    testTimeout: 90_000,
    hookTimeout: 90_000,
    reporters: ["default"],
  },
});
