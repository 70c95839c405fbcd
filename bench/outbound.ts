// Outbound webhooks (issue 15): deliveries per second from one worker process to a local
// receiver, with BENCH_OUTBOUND_MESSAGES (1000) deliveries queued before it starts. Target:
// at least 500 deliveries/s on this machine.
//
// One server with WORKERS=off (PostgreSQL and Redis required: a worker process of its own), a
// workspace with one outbound webhook for message.created pointing at a receiver in this
// process (node:http, answering 200 at once, checking each signature). The owner posts the
// messages over REST (16 in flight); the dispatcher turns each into a delivery whose job waits
// in the queue; then `npm run worker` starts and drains them. Measured: from the first delivery
// received to the last, deliveries/s, duplicates, and the worker's CPU. Without PostgreSQL and
// Redis the server's own in-process queue delivers while the posts come in (measured the same
// way, but not against the target).
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import postgres from "postgres";
import { signWebhookBody } from "../server/services/webhooks/signature.ts";
import { setupTeam } from "./fanout.ts";
import {
  api,
  envNumber,
  mapLimit,
  postJson,
  processCpuSeconds,
  round,
  sleep,
  startBenchServer,
  type BenchServer,
} from "./lib.ts";

const MESSAGES = Math.min(100_000, Math.floor(envNumber("BENCH_OUTBOUND_MESSAGES", 1000)));
const TARGET_PER_S = 500;

export type OutboundResult = {
  mode: "worker process, deliveries queued first" | "in-server queue, while posting";
  messages: number;
  deliveries_received: number;
  unique_deliveries: number;
  duplicates: number;
  bad_signatures: number;
  drain_seconds: number;
  deliveries_per_s: number;
  worker_cpu_pct: number | null;
  targets: { deliveries_per_s_at_least_500: boolean | null };
};

type Receiver = {
  url: string;
  received: () => number;
  unique: () => number;
  badSignatures: () => number;
  firstAt: () => number | undefined;
  lastAt: () => number | undefined;
  stop(): Promise<void>;
};

/** The receiver: 200 at once; remembers each delivery id once and checks every signature. */
export async function startReceiver(secret: () => string): Promise<Receiver> {
  let received = 0;
  let bad = 0;
  let firstAt: number | undefined;
  let lastAt: number | undefined;
  const ids = new Set<string>();
  const server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
      const body = Buffer.concat(chunks);
      const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(request.headers["x-service-signature"] ?? ""));
      if (!match || signWebhookBody(secret(), Number(match[1]), body) !== match[2]) bad++;
      received++;
      const id = String(request.headers["x-service-delivery"]);
      if (!ids.has(id)) {
        ids.add(id);
        firstAt ??= performance.now();
        lastAt = performance.now();
      }
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/bench-hook`,
    received: () => received,
    unique: () => ids.size,
    badSignatures: () => bad,
    firstAt: () => firstAt,
    lastAt: () => lastAt,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export async function runOutbound(log: (line: string) => void): Promise<OutboundResult> {
  const workerProcess = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
  let secret = "";
  const receiver = await startReceiver(() => secret);
  let server: BenchServer | undefined;
  const database = workerProcess ? postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} }) : undefined;
  try {
    server = await startBenchServer("outbound", {
      env: { OUTBOUND_ALLOW_PRIVATE: "true" },
      workerProcess: workerProcess ? "deferred" : false,
    });
    const team = await setupTeam(server.url, 0, 0);
    const hook = await api<{ data: { id: string; secret: string } }>(
      server.url,
      "POST",
      `/api/v1/workspaces/${team.workspaceId}/outbound-webhooks`,
      team.owner.token,
      { url: receiver.url, events: ["message.created"] },
    );
    secret = hook.data.secret;

    log(`outbound: posting ${MESSAGES} messages${workerProcess ? " (no worker yet: the deliveries queue up)" : ""}`);
    const restUrl = new URL(`${server.url}/api/v1/workspaces/${team.workspaceId}/channels/${team.channelId}/messages`);
    await mapLimit(Array.from({ length: MESSAGES }), 16, async (_, index) => {
      const answer = await postJson(restUrl, team.owner.token, JSON.stringify({ content: `outbound bench ${index}` }));
      if (answer.status !== 201) throw new Error(`post: HTTP ${answer.status}`);
    });

    let workerPid: number | undefined;
    if (workerProcess && database && server.startWorker) {
      // Every delivery written (the dispatcher) and handed to the queue (the outbox) before the worker starts.
      for (;;) {
        const [row] = await database<{ deliveries: number; waiting: number }[]>`
          select (select count(*)::int from outbound_deliveries where webhook_id = ${hook.data.id}) as deliveries,
                 (select count(*)::int from job_outbox where name in ('outbound.first', 'outbound.deliver')
                   and handed_at is null) as waiting`;
        if (row!.deliveries >= MESSAGES && row!.waiting === 0) break;
        await sleep(100);
      }
      log(`outbound: ${MESSAGES} deliveries queued; starting the worker process`);
      workerPid = await server.startWorker();
    }
    // The worker's CPU from its first delivery to its last (its start-up left out), sampled as they come.
    const deadline = performance.now() + 120_000;
    let cpuAtFirst: number | undefined;
    let wallAtFirst = 0;
    while (receiver.unique() < MESSAGES && performance.now() < deadline) {
      if (workerPid && cpuAtFirst === undefined && receiver.unique() > 0) {
        cpuAtFirst = processCpuSeconds(workerPid);
        wallAtFirst = performance.now();
      }
      await sleep(5);
    }
    const workerCpuPct =
      workerPid && cpuAtFirst !== undefined
        ? Math.round(((processCpuSeconds(workerPid) - cpuAtFirst) / ((performance.now() - wallAtFirst) / 1000)) * 100)
        : null;
    await sleep(500); // late duplicates
    const drainSeconds = ((receiver.lastAt() ?? 0) - (receiver.firstAt() ?? 0)) / 1000;
    const perSecond = drainSeconds > 0 ? (receiver.unique() - 1) / drainSeconds : 0;
    return {
      mode: workerProcess ? "worker process, deliveries queued first" : "in-server queue, while posting",
      messages: MESSAGES,
      deliveries_received: receiver.received(),
      unique_deliveries: receiver.unique(),
      duplicates: receiver.received() - receiver.unique(),
      bad_signatures: receiver.badSignatures(),
      drain_seconds: round(drainSeconds, 2),
      deliveries_per_s: Math.round(perSecond),
      worker_cpu_pct: workerCpuPct,
      targets: {
        deliveries_per_s_at_least_500: workerProcess
          ? receiver.unique() === MESSAGES && perSecond >= TARGET_PER_S
          : null,
      },
    };
  } finally {
    await server?.stop();
    await receiver.stop();
    await database?.end();
  }
}
