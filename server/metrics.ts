// Prometheus metrics (prom-client), one Registry per app: the tests run several apps in one
// process, and the default global registry would mix (or refuse) their series. Counters and
// histograms are updated where things happen; gauges are read from their source on each scrape.
import type { IncomingMessage, ServerResponse } from "node:http";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { sql } from "drizzle-orm";
import { rowsOf, type Database } from "../db/client.ts";
import type { JobHandlers, QueueDepth } from "./jobs/definition.ts";

/** Seconds; from a cache hit to a slow upload. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds; jobs range from a push send to a maintenance sweep. */
const JOB_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300];

/** What the gauges read on scrape; each is set once its owner exists (the WebSocket server, the queue, the database). */
export type MetricSources = {
  webSocketConnections?: () => number;
  liveSubscriptions?: () => number;
  queueDepth?: () => Promise<QueueDepth[]>;
  databaseConnections?: () => Promise<{ state: string; count: number }[]>;
};

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const sources: MetricSources = {};

  const httpDuration = new Histogram({
    name: "http_request_duration_seconds",
    help: "HTTP requests by method, route template and status, until the response ended.",
    labelNames: ["method", "route", "status"] as const,
    buckets: HTTP_BUCKETS,
    registers,
  });
  const eventsDelivered = new Counter({
    name: "chat_live_events_delivered_total",
    help: "Live events written to WebSocket subscribers (one per event per subscription).",
    registers,
  });
  const jobDuration = new Histogram({
    name: "chat_job_duration_seconds",
    help: "Job runs (each attempt) by queue, job name and outcome.",
    labelNames: ["queue", "job", "outcome"] as const,
    buckets: JOB_BUCKETS,
    registers,
  });
  const jobFailures = new Counter({
    name: "chat_job_failures_total",
    help: "Job attempts that failed, by queue and job name (a retried job counts each failed attempt).",
    labelNames: ["queue", "job"] as const,
    registers,
  });
  new Gauge({
    name: "chat_websocket_connections",
    help: "Open WebSocket connections to this process.",
    registers,
    collect() {
      this.set(sources.webSocketConnections?.() ?? 0);
    },
  });
  new Gauge({
    name: "chat_live_subscriptions",
    help: "Live subscriptions open on this process's WebSocket connections.",
    registers,
    collect() {
      this.set(sources.liveSubscriptions?.() ?? 0);
    },
  });
  new Gauge({
    name: "chat_job_queue_depth",
    help: "Jobs per queue and state (waiting, delayed, active; with Redis also failed), read on scrape.",
    labelNames: ["queue", "state"] as const,
    registers,
    async collect() {
      this.reset();
      // A queue that cannot be read (Redis away) leaves no series rather than failing the scrape.
      const depths = await sources.queueDepth?.().catch(() => []);
      for (const { queue, state, count } of depths ?? []) this.set({ queue, state }, count);
    },
  });
  new Gauge({
    name: "chat_db_connections",
    help: "PostgreSQL connections to this database by state (pg_stat_activity, all server processes).",
    labelNames: ["state"] as const,
    registers,
    async collect() {
      this.reset();
      const rows = await sources.databaseConnections?.().catch(() => []);
      for (const { state, count } of rows ?? []) this.set({ state }, count);
    },
  });

  return {
    registry,
    sources,
    /** Times a request from now until its response ends; `route` is its template. */
    observeRequest(req: IncomingMessage, res: ServerResponse, route: string): void {
      const stop = httpDuration.startTimer();
      res.once("close", () => stop({ method: req.method ?? "GET", route, status: String(res.statusCode) }));
    },
    eventDelivered(): void {
      eventsDelivered.inc();
    },
    /** The same handlers, timed, their failures counted: wherever they run (BullMQ or in-process). */
    instrumentJobs(handlers: JobHandlers): JobHandlers {
      return new Map(
        [...handlers].map(([name, entry]) => [
          name,
          {
            definition: entry.definition,
            handle: async (payload, info) => {
              const labels = { queue: entry.definition.queue, job: name };
              const stop = jobDuration.startTimer(labels);
              try {
                await entry.handle(payload, info);
                stop({ outcome: "completed" });
              } catch (error) {
                stop({ outcome: "failed" });
                jobFailures.inc(labels);
                throw error;
              }
            },
          },
        ]),
      );
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * PostgreSQL connections to this database by state, as the server sees them: postgres.js has no
 * pool statistics, so this is the database's own count (every process sharing the database).
 */
export async function postgresConnections(db: Database): Promise<{ state: string; count: number }[]> {
  const result = await db.execute(
    sql`select coalesce(state, 'unknown') as state, count(*)::int as count from pg_stat_activity
        where datname = current_database() and backend_type = 'client backend' group by 1`,
  );
  return rowsOf<{ state: string; count: number }>(result);
}
