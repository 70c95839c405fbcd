#!/usr/bin/env bash
# The compiled build as the Dockerfile assembles it, checked without Docker: `npm run build`,
# then dist/ beside production dependencies only (`npm ci --omit=dev`) in a clean folder, then
# `node dist/server/main.js` must serve /healthz and the OpenAPI document and stop on SIGTERM,
# and (with REDIS_URL) `node dist/workers/main.js` must start and stop the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/chat-build-XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "-- npm run build"
npm run build --silent

echo "-- production dependencies in a clean folder (as the image's deps stage)"
mkdir -p "$work/app/client" "$work/data"
cp package.json package-lock.json "$work/app/"
cp client/package.json "$work/app/client/"
cp -R patches "$work/app/patches"
(cd "$work/app" && npm ci --omit=dev --prefer-offline --no-audit --no-fund --loglevel=error)
cp -R dist "$work/app/dist"
# The dependency patches (patches/) were applied by npm ci's postinstall.
grep -q "porsager/postgres#1189" "$work/app/node_modules/postgres/src/connection.js" || {
  echo "patches/ were not applied to the production dependencies" >&2
  exit 1
}
# (typescript itself stays: tRPC names it as a peer dependency.)
if [ -e "$work/app/node_modules/vitest" ] || [ -e "$work/app/node_modules/drizzle-kit" ]; then
  echo "development dependencies were installed" >&2
  exit 1
fi

port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')

# Waits for a process's log to contain a line, or fails when it exits or 60 s pass.
wait_for_log() {
  local pid=$1 log=$2 text=$3
  for _ in $(seq 1 600); do
    grep -q "$text" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || { echo "exited before \"$text\":" >&2; cat "$log" >&2; return 1; }
    sleep 0.1
  done
  echo "no \"$text\" within 60 s:" >&2
  cat "$log" >&2
  return 1
}

# Sends SIGTERM and expects exit status 0 within 20 s.
stop_cleanly() {
  local pid=$1 name=$2
  kill -TERM "$pid"
  for _ in $(seq 1 200); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" && return 0
      echo "$name exited non-zero after SIGTERM" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "$name still running 20 s after SIGTERM" >&2
  return 1
}

echo "-- node dist/server/main.js (embedded database)"
(cd "$work/app" && exec env -i PATH="$PATH" PORT="$port" HOST=127.0.0.1 DATA_DIR="$work/data" LOG_LEVEL=info \
  node dist/server/main.js >"$work/server.log" 2>&1) &
server=$!
pids+=("$server")
wait_for_log "$server" "$work/server.log" "chat service listening"
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null
curl -fsS "http://127.0.0.1:$port/api/v1/openapi.json" | node -e '
  let text = ""; process.stdin.on("data", (c) => (text += c)).on("end", () => {
    const doc = JSON.parse(text);
    if (!doc.openapi || Object.keys(doc.paths ?? {}).length === 0) throw new Error("no OpenAPI paths");
  });'
stop_cleanly "$server" "the server"
echo "   /healthz, /api/v1/openapi.json and SIGTERM: ok"

if [ -n "${REDIS_URL:-}" ]; then
  echo "-- node dist/workers/main.js (REDIS_URL set)"
  (cd "$work/app" && exec env -i PATH="$PATH" DATA_DIR="$work/data" LOG_LEVEL=info REDIS_URL="$REDIS_URL" \
    REDIS_PREFIX="check-build-$$" node dist/workers/main.js >"$work/worker.log" 2>&1) &
  worker=$!
  pids+=("$worker")
  wait_for_log "$worker" "$work/worker.log" "workers started"
  stop_cleanly "$worker" "the worker"
  echo "   start and SIGTERM: ok"
  redis-cli -u "$REDIS_URL" --scan --pattern "check-build-$$:*" | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null || true
fi
echo "compiled build: ok"
