// The npm registry reachable from our machines lacks some platform builds of optional native
// accelerators (e.g. @msgpackr-extract/* for macOS and Windows), so `npm install` leaves them
// out of package-lock.json and `npm ci` then rejects the lock as out of sync. This adds a
// lock entry, with its os/cpu, for every optional dependency the lock names but lacks; npm
// skips entries for other platforms without downloading them.
// Run after changing dependencies: `npm install && node scripts/complete-lockfile.mjs`.
import { readFileSync, writeFileSync } from "node:fs";

const PLATFORMS = {
  "darwin-arm64": { os: ["darwin"], cpu: ["arm64"] },
  "darwin-x64": { os: ["darwin"], cpu: ["x64"] },
  "linux-arm": { os: ["linux"], cpu: ["arm"] },
  "linux-arm64": { os: ["linux"], cpu: ["arm64"] },
  "linux-x64": { os: ["linux"], cpu: ["x64"] },
  "win32-x64": { os: ["win32"], cpu: ["x64"] },
  "win32-arm64": { os: ["win32"], cpu: ["arm64"] },
};

const lock = JSON.parse(readFileSync("package-lock.json", "utf8"));
const added = [];
for (const [location, entry] of Object.entries(lock.packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const target = `node_modules/${name}`;
    if (lock.packages[target] || lock.packages[`${location}/${target}`]) continue;
    const platform = Object.entries(PLATFORMS).find(([suffix]) => name.endsWith(`-${suffix}`));
    if (!platform) throw new Error(`${name} is missing from the lock and is not a platform build`);
    lock.packages[target] = { version, ...platform[1], optional: true };
    added.push(`${name}@${version}`);
  }
}
lock.packages = Object.fromEntries(
  Object.entries(lock.packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b))),
);
writeFileSync("package-lock.json", JSON.stringify(lock, null, 2) + "\n");
console.log(added.length ? `added lock entries: ${added.join(", ")}` : "lock file complete");
