# syntax=docker/dockerfile:1
# The chat service as compiled JavaScript run by plain `node` (no tsx): one stage compiles,
# one installs production dependencies only, and the final image holds just those and dist/,
# running as the unprivileged `node` user. scripts/check-build.sh checks the same steps
# without Docker.

FROM node:20-slim AS build
WORKDIR /app
# client/ is an npm workspace: npm ci needs its package.json to match the lockfile.
COPY package.json package-lock.json ./
COPY client/package.json client/
# patches/: fixes to dependencies applied by `patch-package` after install (patches/README.md).
COPY patches patches
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY server server
COPY routers routers
COPY db db
COPY workers workers
RUN npm run build

FROM node:20-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY client/package.json client/
COPY patches patches
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:20-slim
ENV NODE_ENV=production \
    PORT=3000 \
    HOST=0.0.0.0 \
    DATA_DIR=/data
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY --from=build /app/dist dist
# "type": "module" makes node read dist/ as ES modules.
COPY package.json ./
# DATA_DIR: uploaded files (STORAGE_DRIVER=local), PGlite without DATABASE_URL, a generated
# APP_KEY without APP_KEY. Owned by the user the server runs as.
RUN mkdir -p /data && chown node:node /data
VOLUME /data
USER node
EXPOSE 3000
# The image has no curl: node asks /healthz itself.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node is PID 1 and gets SIGTERM from `docker stop` itself: it drains, then exits 0.
CMD ["node", "dist/server/main.js"]
