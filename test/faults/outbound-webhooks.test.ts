// Issue 15: outbound webhook deliveries survive a kill -9 of the worker process mid-burst. A
// server with WORKERS=off takes posts over REST; `npm run worker` (BullMQ, a private Redis)
// delivers them to a local receiver that answers slowly, and is killed with SIGKILL while
// deliveries are in flight, then started again. Expected: every message's delivery arrives (a
// delivery interrupted after sending may arrive twice: at least once, and receivers dedupe by
// the delivery id), one delivery per message and webhook (the dispatcher doubles nothing), and
// every delivery logged as succeeded with exactly one recorded attempt.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startReceiver, verify, type Receiver } from "../helpers/receiver.ts";
import {
  buildRoom,
  call,
  createDatabase,
  deploymentEnv,
  register,
  runTag,
  sleep,
  startPrivateRedis,
  startServer,
  startWorker,
  stopAll,
  type Proc,
  type ServerProc,
  type ServiceEnv,
  type TestDatabase,
} from "./support.ts";

const MESSAGES = 300;
const RECEIVER_DELAY_MS = 15;

let db: TestDatabase;
let env: ServiceEnv;
let server: ServerProc;
let worker: Proc;
let receiver: Receiver;

beforeAll(async () => {
  db = await createDatabase();
  const redis = await startPrivateRedis();
  receiver = await startReceiver({ delayMs: RECEIVER_DELAY_MS });
  env = { ...deploymentEnv({ databaseUrl: db.url, redisUrl: redis.url }), OUTBOUND_ALLOW_PRIVATE: "true" };
  server = await startServer("owh-server", { ...env, WORKERS: "off" });
  worker = await startWorker("owh-worker-1", env);
}, 90_000);

afterAll(async () => {
  await receiver?.stop();
  await stopAll();
}, 60_000);

describe("kill -9 of the worker mid-burst of deliveries", () => {
  it("loses no delivery and doubles none beyond at-least-once", async () => {
    const tag = runTag("owh");
    const owner = await register(server.url, `${tag}-owner`);
    const room = await buildRoom(server.url, owner, [], 0);
    const created = await call(server.url, "POST", `/api/v1/workspaces/${room.workspaceId}/outbound-webhooks`, {
      body: { url: `${receiver.url}/burst`, events: ["message.created"] },
      token: owner.token,
    });
    expect(created.status).toBe(201);
    const secret = created.body.data.secret as string;

    // The burst: 8 posters, every post acknowledged.
    const posted: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < MESSAGES) {
          const index = next++;
          const reply = await call(
            server.url,
            "POST",
            `/api/v1/workspaces/${room.workspaceId}/channels/${room.channelIds[0]}/messages`,
            { body: { content: `${tag} ${index}` }, token: owner.token },
          );
          expect(reply.status, JSON.stringify(reply.body)).toBe(201);
          posted.push(reply.body.data.id as string);
        }
      }),
    );

    // Killed while deliveries are going out, started again a second later.
    await receiver.waitFor(60, "/burst", 30_000);
    worker.kill("SIGKILL");
    await worker.exited;
    const atKill = receiver.requests.length;
    await sleep(1_000);
    worker = await startWorker("owh-worker-2", env);

    // BullMQ gives a dead worker's jobs back after its lock expires (30 s) and the new worker's
    // stalled-job check (every 30 s) sees them: up to a minute, plus the new worker's start,
    // which took long enough under CI's load that 90 s once ran out.
    await receiver.waitFor(MESSAGES, "/burst", 150_000);
    const deliveredIds = new Set<string>();
    await expect
      .poll(
        () => {
          for (const request of receiver.requests) deliveredIds.add(request.json.data.message.id);
          return posted.filter((id) => !deliveredIds.has(id)).length;
        },
        { timeout: 90_000, interval: 500 },
      )
      .toBe(0);
    expect(receiver.requests.every((request) => verify(request, secret))).toBe(true);

    const rows = await db.sql<{ status: string; attempts: number; logged: number }[]>`
      select d.status, d.attempts, (select count(*)::int from outbound_delivery_attempts a where a.delivery_id = d.id) as logged
      from outbound_deliveries d`;
    expect(rows).toHaveLength(MESSAGES);
    // Deliveries sent but not recorded when the worker died are recorded when their jobs run
    // again: BullMQ gives a dead worker's jobs back once their lock expires and its stalled-job
    // check (every 30 s) sees them, up to a minute later.
    await expect
      .poll(
        async () =>
          (
            await db.sql<{ pending: number }[]>`
              select count(*)::int as pending from outbound_deliveries where status <> 'succeeded'`
          )[0]!.pending,
        { timeout: 120_000, interval: 500 },
      )
      .toBe(0);
    const logged = await db.sql<{ attempts: number; logged: number }[]>`
      select d.attempts, (select count(*)::int from outbound_delivery_attempts a where a.delivery_id = d.id) as logged
      from outbound_deliveries d`;
    expect(logged.every((row) => row.attempts === 1 && row.logged === 1)).toBe(true);

    const deliveryIds = receiver.requests.map((request) => request.json.id as string);
    const duplicates = deliveryIds.length - new Set(deliveryIds).size;
    console.log(
      `[faults] outbound webhooks: ${MESSAGES} messages, ${receiver.requests.length} requests received ` +
        `(${atKill} before the kill), ${duplicates} repeated after the kill (at least once)`,
    );
    // At most the deliveries in flight when the worker died (its concurrency) arrive twice.
    expect(duplicates).toBeLessThanOrEqual(50);
  });
});
