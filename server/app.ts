// Builds the service from a Config: database, Redis, queues, event bus, the HTTP host and the
// WebSocket server. Used by `npm start`, by `npm run worker` (workers only) and by the tests.
import { randomUUID } from "node:crypto";
import { createServer, STATUS_CODES, type Server } from "node:http";
import { hostname } from "node:os";
import type { Duplex } from "node:stream";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import { openDatabase, type DatabaseHandle } from "../db/client.ts";
import { statementScope } from "../db/statement-count.ts";
import { appRouter } from "../routers/index.ts";
import { buildJobHandlers, scheduleRecurringJobs } from "../workers/index.ts";
import { systemClock, type Clock } from "./clock.ts";
import { ConfigError, type Config } from "./config.ts";
import { clientIp, createWsContext, peerOf, signInLiveConnection } from "./context.ts";
import { cannotListen, cannotOpenDatabase } from "./process.ts";
import type { Deps } from "./deps.ts";
import { InProcessEventBus, RedisEventBus } from "./events/bus.ts";
import { EventRelay } from "./events/relay.ts";
import { createConsumers } from "./consumers/index.ts";
import { answerExpectContinue } from "./http/body.ts";
import { isUploadRequest } from "./http/file-routes.ts";
import { createRequestListener } from "./http/host.ts";
import { createQueueDashboard } from "./http/queue-dashboard.ts";
import { inSocketScope, logWebSocketConnections, socketRequestId } from "./http/request-log.ts";
import { routeTemplates } from "./http/route-templates.ts";
import { createMetrics, postgresConnections, type Metrics } from "./metrics.ts";
import { MAX_PAYLOAD_BYTES, serveTrpcOverWebSocket } from "./http/trpc-websocket.ts";
import { unauthenticated } from "./errors.ts";
import { CLOSE_CODES } from "./http/trpc-ws-protocol.ts";
import { startBullMqWorkers, BullMqJobQueue } from "./jobs/bullmq.ts";
import type { JobHandlers, JobQueue } from "./jobs/definition.ts";
import { JobOutbox, outboxProgress, settleOutboxJobs } from "./jobs/outbox.ts";
import { InProcessJobQueue } from "./jobs/in-process.ts";
import { Keyring } from "./keyring.ts";
import { reportSealedValues } from "./services/keys/sealed-values.ts";
import { createLogger, requestScope, type Logger } from "./logger.ts";
import { createMailTransport } from "./mail/transport.ts";
import { createRedis, REDIS_COMMAND_TIMEOUT_MS } from "./redis.ts";
import { within } from "./timeout.ts";
import { CredentialWatch } from "./services/accounts/credential-watch.ts";
import { Presence } from "./services/presence/presence.ts";
import { createSingleUseStore } from "./services/single-use-store.ts";
import { SocialProviders } from "./services/social/providers.ts";
import { createPushProviders } from "./services/push/providers/index.ts";
import { createTranslationProvider } from "./services/translation/providers/index.ts";
import { createThrottle } from "./services/throttle.ts";
import { createFileStorage } from "./storage/index.ts";

const READINESS_TIMEOUT_MS = 2_000;
const KEEP_ALIVE_IDLE_MS = 65_000;

/**
 * A request Node's HTTP parser refuses before any route sees it (a malformed request line or
 * header, headers over the size limit, a body that ends before its Content-Length): the same
 * answer Node gives (400, or 431), but with the API's JSON `{message}` body instead of none.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  const response = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (error.code === "ECONNRESET" || !socket.writable || response?.headersSent) {
    socket.destroy();
    return;
  }
  const status = error.code === "HPE_HEADER_OVERFLOW" ? 431 : 400;
  const body = JSON.stringify({ message: status === 431 ? "Request Header Fields Too Large." : "Bad Request." });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

export type AppOptions = { clock?: Clock; logger?: Logger };

type Core = {
  deps: Deps;
  database: DatabaseHandle;
  handlers: JobHandlers;
  metrics: Metrics;
  /** Said once where workers run: which push providers are not configured, and why. */
  warnSkippedPushProviders(): void;
  close(): Promise<void>;
};

/** Everything but the HTTP host: what a worker process needs too. */
async function buildCore(config: Config, options: AppOptions): Promise<Core> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const storage = createFileStorage(config);
  const clock = options.clock ?? systemClock;
  // Before anything opens: a push credential that cannot be read stops the start.
  const push = createPushProviders(config.push, { clock, logger });
  const translation = createTranslationProvider(config.translation);
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }).catch(
    (error: unknown) => {
      throw cannotOpenDatabase(config, error);
    },
  );
  // Requests never wait on Redis for long: a command (throttle counters, single-use values, the
  // readiness check) gives up after REDIS_COMMAND_TIMEOUT_MS, and the caller falls back or answers 503.
  const redis = config.redisUrl
    ? createRedis(config.redisUrl, logger, "commands", {
        commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
        maxRetriesPerRequest: 1,
      })
    : undefined;
  let handlers: JobHandlers = new Map();
  const jobs: JobQueue = config.redisUrl
    ? new BullMqJobQueue(config.redisUrl, config.redisPrefix, logger)
    : new InProcessJobQueue(() => handlers, logger, outboxProgress(database.db));
  const events = config.redisUrl
    ? new RedisEventBus(config.redisUrl, config.redisPrefix, logger)
    : new InProcessEventBus();
  const jobOutbox = new JobOutbox({
    db: database.db,
    listen: (channel, onNotify) => database.listen(channel, onNotify),
    jobs,
    definitions: () => handlers,
    clock,
    logger,
  });
  const consumers = createConsumers({ db: database.db, clock, logger, config, storage });
  const relay = new EventRelay({ database, events, clock, logger, consumers });
  const credentials = new CredentialWatch({ db: database.db, events, clock, logger });
  const presence = new Presence({
    db: database.db,
    clock,
    logger,
    events,
    redis,
    config,
    processId: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
  });
  const deps: Deps = {
    config,
    keys: new Keyring(config.appKey, config.previousAppKeys),
    db: database.db,
    clock,
    logger,
    jobs,
    jobOutbox,
    events,
    relay,
    credentials,
    presence,
    throttle: createThrottle({ redis, prefix: config.redisPrefix, webhookQuotaPerHour: config.webhookQuotaPerHour }),
    singleUse: createSingleUseStore({ redis, prefix: config.redisPrefix, db: database.db, clock }),
    social: new SocialProviders(config.socialProviders, logger),
    storage,
    redis,
  };
  const mail = createMailTransport(config, logger);
  const metrics = createMetrics();
  handlers = metrics.instrumentJobs(
    settleOutboxJobs(buildJobHandlers(deps, { mail, push: push.providers, translation }), database.db),
  );
  metrics.sources.queueDepth = () => jobs.depth?.() ?? Promise.resolve([]);
  if (database.driver === "postgres") metrics.sources.databaseConnections = () => postgresConnections(database.db);
  relay.start();
  jobOutbox.start();
  // Not awaited: start-up must not wait for Redis.
  credentials.start().catch((error: unknown) => logger.warn({ err: error }, "could not watch credentials"));
  presence.start().catch((error: unknown) => logger.warn({ err: error }, "could not start presence"));
  return {
    deps,
    database,
    handlers,
    metrics,
    warnSkippedPushProviders() {
      for (const { name, reason } of push.skipped) logger.warn({ provider: name }, `push: ${name} is off (${reason})`);
    },
    async close() {
      // The relay first: it publishes what is committed while the bus and database are still
      // open, and its consumers write their work (and jobs), which the outbox hands over next.
      await relay.close();
      credentials.close();
      // Its connections are closed by now: it says so to the others and writes last seen.
      await presence.close();
      // The outbox before the queue: it hands over what is committed while the queue is open.
      await jobOutbox.close();
      await jobs.close();
      mail.close();
      await Promise.all([...push.providers.values()].map((provider) => provider.close().catch(() => {})));
      await translation?.close().catch(() => {});
      await events.close();
      await redis?.quit().catch(() => {});
      await database.close();
      storage.close();
    },
  };
}

/** Where workers run: the recurring schedules (not awaited), and which push providers are off. */
function startWorkerDuties(core: Core): void {
  const { deps } = core;
  scheduleRecurringJobs(deps).catch((error: unknown) =>
    deps.logger.warn({ err: error }, "could not schedule the recurring jobs"),
  );
  core.warnSkippedPushProviders();
}

export type App = {
  deps: Deps;
  /** The database handle: its `statements` count what each request sent (the tests' budgets). */
  database: DatabaseHandle;
  server: Server;
  url: string;
  /** The live WebSocket connections (closed with 1001 at shutdown). */
  webSockets: WebSocketServer;
  close(): Promise<void>;
};

export async function startApp(config: Config, options: AppOptions = {}): Promise<App> {
  const core = await buildCore(config, options);
  const { deps } = core;
  const stopWorkers =
    config.redisUrl && config.runWorkers
      ? startBullMqWorkers({
          redisUrl: config.redisUrl,
          prefix: config.redisPrefix,
          handlers: core.handlers,
          logger: deps.logger,
        })
      : undefined;

  // Without Redis the schedule is a timer in this process; with Redis, a job scheduler that
  // any process running workers upserts. Not awaited: start-up must not wait for Redis.
  if (!config.redisUrl || config.runWorkers) startWorkerDuties(core);

  // Each check answers within READINESS_TIMEOUT_MS, so /readyz says what is down rather than hanging.
  const check = (probe: () => Promise<unknown>) =>
    within(probe(), READINESS_TIMEOUT_MS, "a readiness check").then(
      () => "ok" as const,
      () => "failing" as const,
    );
  const readiness = async () => {
    const checks: Record<string, "ok" | "failing"> = {};
    checks.database = await check(() => core.database.ping());
    if (deps.redis) checks.redis = await check(() => deps.redis!.ping());
    return { ok: Object.values(checks).every((state) => state === "ok"), checks };
  };

  const { metrics } = core;
  const routes = routeTemplates(appRouter);
  const jobs = deps.jobs;
  const queueDashboard =
    jobs instanceof BullMqJobQueue && config.queueDashboardPassword !== undefined
      ? createQueueDashboard(() => jobs.allQueues(), config.queueDashboardPassword)
      : undefined;
  const server = createServer(createRequestListener(deps, appRouter, readiness, { metrics, routes, queueDashboard }));
  // Idle keep-alive connections stay open 65 s (Node's default is 5 s). A client or proxy that
  // reuses an idle connection just as the server drops it gets ECONNRESET; keeping it longer
  // than their own idle limit (60 s for most load balancers, 4 s for Node's fetch) leaves the
  // closing to them. close() still ends idle connections at once.
  server.keepAliveTimeout = KEEP_ALIVE_IDLE_MS;
  server.on("clientError", answerClientError);
  // `Expect: 100-continue`: a body over every JSON limit is refused (413) before the client sends
  // it; anything else is told to go on at once, as Node does without this listener.
  server.on("checkContinue", (req, res) => {
    answerExpectContinue(req, res, isUploadRequest(req));
    server.emit("request", req, res);
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD_BYTES });
  const wsHandler = serveTrpcOverWebSocket({
    wss,
    router: appRouter,
    // What a connection keeps of its upgrade request: its request id, address, language and origin.
    peerOf: (req) => ({ ...peerOf(req, config), reqId: socketRequestId(req) }),
    createContext: (peer, connectionParams) => createWsContext(deps, peer, connectionParams),
    // A connection signed in with a credential that is then revoked ends its subscriptions with
    // UNAUTHORIZED and closes: one watch per connection, its subscriptions' credential being the
    // connection's. While open, it is its user's live connection (presence).
    signIn: async (_peer, connectionParams, connection) => {
      const signIn = await signInLiveConnection(deps, connectionParams?.token);
      if (!signIn) return;
      const { credential } = signIn;
      const stopWatching = deps.credentials.track(credential, () =>
        connection.revoke(unauthenticated(), CLOSE_CODES.revoked, "credential revoked"),
      );
      const disconnect = deps.presence.connect(credential.userId);
      return () => {
        stopWatching();
        disconnect();
        signIn.release();
      };
    },
    keepAlive: { pingMs: 30_000, pongWaitMs: 5_000 },
    onError: (error, path) => {
      if (error.code === "INTERNAL_SERVER_ERROR") deps.logger.error({ err: error.cause ?? error, path }, "rpc failed");
      else deps.logger.debug({ err: error, path }, "websocket request refused");
    },
    onEventDelivered: () => metrics.eventDelivered(),
    // A frame's statements are counted under the connection's request id (its log scope's).
    inRequestScope: (peer, work) =>
      inSocketScope(peer.reqId, () => statementScope(requestScope.getStore()?.reqId ?? "websocket", work)),
  });
  metrics.sources.webSocketConnections = () => wss.clients.size;
  metrics.sources.liveSubscriptions = () => wsHandler.subscriptionCount();
  logWebSocketConnections(wss, deps.logger, routes, (req) => clientIp(req, config));
  server.on("upgrade", (req, socket, head) => {
    // Only /trpc upgrades; anything else, a target that is not a URL path ("//") included, is dropped.
    if (
      !URL.canParse(req.url ?? "/", "http://localhost") ||
      new URL(req.url!, "http://localhost").pathname !== "/trpc"
    ) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
  });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(config.port, config.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (error) {
    // The port is taken (or HOST is wrong): release what was opened, then say so in one line.
    await stopWorkers?.();
    await core.close();
    throw cannotListen(config, error);
  }
  const address = server.address() as AddressInfo;
  const url = `http://${config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host}:${address.port}`;
  deps.logger.info({ url, database: core.database.driver, redis: Boolean(config.redisUrl) }, "chat service listening");
  // Said once at start: stored secrets that no configured key opens, and those still sealed
  // under an earlier APP_KEY (server/services/keys/sealed-values.ts). Not awaited.
  const sealedReport = reportSealedValues(deps).catch((error: unknown) =>
    deps.logger.warn({ err: error }, "keys: could not check the stored secrets"),
  );

  let closing: Promise<void> | undefined;
  return {
    deps,
    database: core.database,
    server,
    url,
    webSockets: wss,
    close: () =>
      (closing ??= (async () => {
        // Stop accepting, let in-flight requests finish, then close live connections.
        const httpClosed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        wsHandler.broadcastReconnectNotification();
        for (const client of wss.clients) client.close(CLOSE_CODES.goingAway, "server shutting down");
        const forceAfter = setTimeout(() => server.closeAllConnections(), 10_000);
        await httpClosed;
        clearTimeout(forceAfter);
        await new Promise<void>((resolve) => wss.close(() => resolve()));
        await stopWorkers?.();
        await sealedReport;
        await core.close();
      })()),
  };
}

/** `npm run worker`: BullMQ workers only, no HTTP. Needs REDIS_URL. */
export async function startWorkers(config: Config, options: AppOptions = {}): Promise<{ close(): Promise<void> }> {
  if (!config.redisUrl) {
    throw new ConfigError(
      "Invalid configuration: REDIS_URL must be set for `npm run worker` (without Redis, jobs run inside `npm start`)",
    );
  }
  const core = await buildCore(config, options);
  const stop = startBullMqWorkers({
    redisUrl: config.redisUrl,
    prefix: config.redisPrefix,
    handlers: core.handlers,
    logger: core.deps.logger,
  });
  startWorkerDuties(core);
  core.deps.logger.info("workers started");
  return {
    async close() {
      await stop();
      await core.close();
    },
  };
}
