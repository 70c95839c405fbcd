// The relay that takes the publisher's role over republishes what its predecessor positioned
// and may have died before publishing, and only then positions anything itself. Subscribers
// drop an event at or below the position they hold, so a newer event published first (a post
// that woke the new publisher the moment it took over) would hide the older ones for good.
// Likewise what failed to go out while the bus was away goes out in order, once each, when it is back.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { openDatabase, rowsOf, type DatabaseHandle } from "../db/client.ts";
import { systemClock } from "../server/clock.ts";
import { createLogger } from "../server/logger.ts";
import { InProcessEventBus, type BusMessage, type Listener } from "../server/events/bus.ts";
import { EventRelay } from "../server/events/relay.ts";
import { createDatabase } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const STREAM = "channel:takeover";
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function freshDatabase(): Promise<DatabaseHandle> {
  const adminUrl = process.env.DATABASE_URL;
  if (adminUrl) {
    const database = await createDatabase(adminUrl);
    cleanups.push(() => database.drop());
    const handle = await openDatabase({ databaseUrl: database.url, dataDir: "" });
    cleanups.push(() => handle.close());
    return handle;
  }
  const dataDir = mkdtempSync(path.join(tmpdir(), "relay-takeover-"));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  const handle = await openDatabase({ databaseUrl: undefined, dataDir });
  cleanups.push(() => handle.close());
  return handle;
}

/** An in-process bus that records what is published on STREAM, and wakes the relay as it subscribes. */
class RecordingBus extends InProcessEventBus {
  readonly published: number[] = [];

  override async publishAll(messages: readonly BusMessage[]): Promise<PromiseSettledResult<void>[]> {
    for (const { topic, message } of messages)
      if (topic === STREAM) this.published.push(Number((message as { event: { id: string } }).event.id));
    return super.publishAll(messages);
  }

  override async subscribe(topic: string, listener: Listener): Promise<void> {
    await super.subscribe(topic, listener);
    // A post on another process wakes the new publisher right as it starts listening.
    if (topic === "relay") listener({});
  }
}

/** A started relay on `handle` publishing to `bus`, with consumers that do nothing but start (`startConsumers`). */
function startRelay(
  handle: DatabaseHandle,
  bus: InProcessEventBus,
  startConsumers: () => Promise<void> = async () => {},
): EventRelay {
  const relay = new EventRelay({
    database: handle,
    events: bus,
    clock: systemClock,
    logger: createLogger("silent"),
    consumers: { start: startConsumers, positioned: () => {}, flush: async () => {}, stop: async () => {} },
  });
  cleanups.push(() => relay.close());
  relay.start();
  return relay;
}

it("publishes the predecessor's positioned events before any it positions, when woken as it takes over", async () => {
  const handle = await freshDatabase();
  const payload = (n: number) => JSON.stringify({ type: "test.event", scope: {}, data: { n } });
  // Three events a publisher positioned and died before publishing, then one nobody positioned.
  for (const n of [1, 2, 3]) {
    await handle.db.execute(
      sql`insert into stream_events (stream, payload, position, published_at)
          values (${STREAM}, ${payload(n)}::jsonb, nextval('stream_positions'), now())`,
    );
  }
  await handle.db.execute(sql`insert into stream_events (stream, payload) values (${STREAM}, ${payload(4)}::jsonb)`);

  const bus = new RecordingBus();
  // Starting the consumers takes a moment (the kit reads its cursors), as it does in the server.
  startRelay(handle, bus, () => new Promise((resolve) => setTimeout(resolve, 50)));

  await until(() => (bus.published.length >= 4 ? true : undefined), "four events published");
  expect(bus.published).toEqual([...bus.published].sort((a, b) => a - b));
});

/** The recording bus, refusing every publish while `failing` (Redis away). */
class FailingBus extends RecordingBus {
  failing = true;

  override async publishAll(messages: readonly BusMessage[]): Promise<PromiseSettledResult<void>[]> {
    if (this.failing) return messages.map(() => ({ status: "rejected", reason: new Error("the bus is away") }));
    return super.publishAll(messages);
  }
}

it("publishes what failed to go out in position order once the bus is back, each event once, across 9 → 10 and 99 → 100", async () => {
  const handle = await freshDatabase();
  // 600 events: the first batch (500) is positioned and fails to publish; nothing newer is
  // positioned until it has gone out.
  await handle.db.execute(
    sql`insert into stream_events (stream, payload)
        select ${STREAM}, jsonb_build_object('type', 'test.event', 'scope', '{}'::jsonb, 'data', jsonb_build_object('n', g))
        from generate_series(1, 600) g`,
  );
  const bus = new FailingBus();
  const relay = startRelay(handle, bus);
  const positioned = async () =>
    rowsOf<{ n: number }>(
      await handle.db.execute(sql`select count(*)::integer as n from stream_events where position is not null`),
    )[0]?.n ?? 0;
  await until(async () => ((await positioned()) >= 500 ? true : undefined), "the first batch positioned");

  bus.failing = false;
  relay.wake();
  await until(() => (bus.published.length >= 600 ? true : undefined), "every event published");
  await new Promise((resolve) => setTimeout(resolve, 200));
  // Positions start at 1 in a fresh database: each published once, in order.
  expect(bus.published).toEqual(Array.from({ length: 600 }, (_, index) => index + 1));
});
