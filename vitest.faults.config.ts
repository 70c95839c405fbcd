import { defineConfig } from "vitest/config";

// The fault and reliability tests (test/faults/): slow, so kept out of `npm test`.
// Run them with `npm run test:faults`.
export default defineConfig({
  test: {
    include: ["test/faults/**/*.test.ts"],
    pool: "forks",
    // One at a time: each file loads the machine on its own (many requests, real processes).
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 120_000,
    reporters: ["default"],
  },
});
