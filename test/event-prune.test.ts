// Issue 27, "Budget": events older than the slowest enabled consumer's cursor are not pruned
// (server/events/relay.ts, `prune`; docs/realtime.md). The relay deletes an event only when it is
// older than the retention window (EVENT_RETENTION_MS), at or below every consumer's cursor
// (consumer_cursors holds the cursors of the consumers this server runs: test/consumers.test.ts),
// and not the newest. Here one consumer's cursor is moved back behind events made older than the
// retention window, and the relay's prune is run: what that consumer has not read stays, however
// old; what it has read and is past the window goes; what it has read but is recent stays.
//
// The relay prunes every 5 minutes of wall time (a setInterval, not the test clock), so the test
// calls its `prune` directly, as that timer does.
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf } from "../db/client.ts";
import { EVENT_RETENTION_MS } from "../server/events/streams.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

/** The relay as its timer drives it: `prune` is private, run here by hand. */
function relay() {
  return ctx.server.app.deps.relay as unknown as { flush(): Promise<void>; prune(): Promise<void> };
}

async function query<Row>(statement: ReturnType<typeof sql>): Promise<Row[]> {
  return rowsOf<Row>(await ctx.server.app.deps.db.execute(statement));
}

/** `count` events on the user's own stream (user.updated, one per rename), positioned; their positions in order. */
async function renames(user: RegisteredUser, count: number, label: string): Promise<number[]> {
  for (let index = 0; index < count; index++) {
    const response = await ctx.api.patch("/api/v1/me", { name: `${label} ${index}` }, { token: user.token });
    expect(response.status).toBe(200);
  }
  await relay().flush();
  const rows = await query<{ position: string }>(sql`
    select position::text as position from stream_events
    where stream = ${`user:${user.id}`} and payload->>'type' = 'user.updated'
      and payload->'data'->'user'->>'name' like ${`${label} %`}
    order by stream_events.position`);
  expect(rows).toHaveLength(count);
  return rows.map((row) => Number(row.position));
}

async function cursors(): Promise<{ name: string; position: number }[]> {
  const rows = await query<{ name: string; position: string }>(
    sql`select name, position::text as position from consumer_cursors order by name`,
  );
  return rows.map((row) => ({ name: row.name, position: Number(row.position) }));
}

async function remaining(positions: number[]): Promise<number[]> {
  const rows = await query<{ position: string }>(sql`
    select position::text as position from stream_events
    where position = any(${`{${positions.join(",")}}`}::bigint[]) order by stream_events.position`);
  return rows.map((row) => Number(row.position));
}

/** Every event at or below `position` made `ago` ms old, and the consumers' cursors moved as given. */
async function arrange(options: { oldThrough: number; cursors: Record<string, number> }) {
  const ago = EVENT_RETENTION_MS + 60 * 60_000;
  await query(sql`update stream_events set created_at = now() - make_interval(secs => ${ago / 1000})
    where position <= ${options.oldThrough}`);
  for (const [name, position] of Object.entries(options.cursors)) {
    await query(sql`update consumer_cursors set position = ${position} where name = ${name}`);
  }
}

describe("pruning the event log", () => {
  it("keeps every event after the slowest enabled consumer's cursor, however old; prunes those at or below it past the retention window", async () => {
    expect(typeof relay().prune).toBe("function");
    const user = await registerUser(ctx.api, { name: "Pat Prune" });
    const positions = await renames(user, 10, "round");
    const consumers = await cursors();
    // The consumers this server runs (test/consumers.test.ts): more than one, so "the slowest" means something.
    expect(consumers.length).toBeGreaterThan(1);
    const newest = positions.at(-1)!;
    const slowest = consumers.find((consumer) => consumer.name === "read-positions") ?? consumers[0]!;
    const cursor = positions[5]!;

    // All ten events, and everything before them, are past the retention window except the
    // second one (read by every consumer, but recent). Every consumer has read everything but the
    // slowest, whose cursor stands at the sixth event.
    await arrange({
      oldThrough: newest,
      cursors: {
        ...Object.fromEntries(consumers.map((consumer) => [consumer.name, newest])),
        [slowest.name]: cursor,
      },
    });
    await query(
      sql`update stream_events set created_at = now() - interval '1 minute' where position = ${positions[1]!}`,
    );
    const [before] = await query<{ count: number }>(
      sql`select count(*)::integer as count from stream_events where position <= ${cursor} and position <> ${positions[1]!}`,
    );
    expect(before!.count).toBeGreaterThanOrEqual(5);

    await relay().prune();

    // After the slowest cursor: kept, though an hour past the window.
    expect(await remaining(positions.slice(6))).toEqual(positions.slice(6));
    // At or below it and past the window: gone (the sixth event, the cursor's own, included) …
    expect(await remaining([positions[0]!, ...positions.slice(2, 6)])).toEqual([]);
    const [left] = await query<{ count: number }>(
      sql`select count(*)::integer as count from stream_events where position <= ${cursor}`,
    );
    // … and so is everything older: only the recent second event is left at or below the cursor.
    expect(left!.count).toBe(1);
    expect(await remaining([positions[1]!])).toEqual([positions[1]!]);

    // The cursor was what held them: once every consumer has read everything, the old ones go
    // too, all but the newest event of the log (after a rename, its `user.changed`).
    const [last] = await query<{ position: string }>(sql`select max(position)::text as position from stream_events`);
    const logNewest = Number(last!.position);
    expect(logNewest).toBeGreaterThan(newest);
    await arrange({
      oldThrough: logNewest,
      cursors: Object.fromEntries(consumers.map((consumer) => [consumer.name, logNewest])),
    });
    await relay().prune();
    expect(await remaining([...positions.slice(6), logNewest])).toEqual([logNewest]);
  });

  it("whichever enabled consumer is the slowest holds back pruning", async () => {
    const user = await registerUser(ctx.api, { name: "Sam Slow" });
    const consumers = await cursors();
    for (const slowest of consumers) {
      const positions = await renames(user, 3, slowest.name);
      const newest = positions.at(-1)!;
      // Every event is old; every consumer has read all but the slowest, which has read none of these.
      await arrange({
        oldThrough: newest,
        cursors: {
          ...Object.fromEntries(consumers.map((consumer) => [consumer.name, newest])),
          [slowest.name]: positions[0]! - 1,
        },
      });
      await relay().prune();
      expect(await remaining(positions), `${slowest.name} is the slowest`).toEqual(positions);
      const [older] = await query<{ count: number }>(
        sql`select count(*)::integer as count from stream_events where position < ${positions[0]!}`,
      );
      expect(older!.count, `what ${slowest.name} has read is pruned`).toBe(0);
    }
  });
});
