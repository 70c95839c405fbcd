// The consumers of the event log (server/consumers/): a consumer's statements per message fall
// as its batch grows (one statement per batch, whatever its size), and a consumer with nothing
// to do costs no statement at all.
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf, type Database } from "../db/client.ts";
import { statementScope } from "../db/statement-count.ts";
import { readLoggedEvents, type LoggedEvent } from "../server/consumers/kit.ts";
import { outboundConsumer } from "../server/consumers/outbound-webhooks.ts";
import { pushConsumer } from "../server/consumers/push.ts";
import { attachments } from "../db/schema/index.ts";
import { eq } from "drizzle-orm";
import { createWorkspaceWithGeneral, registerUser, stageTextFile } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";
import { statementsOf } from "./helpers/statements.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();

/** Positions of the made-up events, far past the server's own and new for every batch (they name jobs). */
let nextPosition = 1_000_000_000;

function createdEvents(
  count: number,
  place: { workspaceId: string; channelId: string },
  authorId: number,
): LoggedEvent[] {
  const first = nextPosition;
  nextPosition += count;
  return Array.from({ length: count }, (_, index) => ({
    position: first + index,
    createdAt: new Date(),
    payload: {
      type: "message.created",
      scope: { workspace_id: place.workspaceId, channel_id: place.channelId },
      data: {
        message: {
          id: `msg_BATCHTEST${Math.random().toString(36).slice(2, 10).toUpperCase()}${index}`,
          workspace_id: place.workspaceId,
          channel_id: place.channelId,
          conversation_id: null,
          room_id: null,
          type: "text",
          author: { type: "user", id: authorId, name: "Author", avatar_url: null },
        },
      },
    },
  }));
}

describe("the push consumer", () => {
  it("runs one statement per batch: its statements per message fall as the batch grows", async () => {
    const [owner, author] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const place = await createWorkspaceWithGeneral(ctx.api, owner);
    // The channel's member with a device is woken by messages of someone else.
    const device = await ctx.api.post(
      "/api/v1/devices",
      { platform: "ios", provider: "expo", push_token: `ExponentPushToken[batch-${owner.id}]` },
      { token: owner.token },
    );
    expect(device.status).toBe(201);

    const { deps } = ctx.server.app;
    const consumer = pushConsumer({ db: deps.db as Database, clock: deps.clock });
    await consumer.refresh?.();
    const move = { cte: sql`moved as (select 1)`, inTransaction: async () => true };
    const counter = statementsOf(ctx.server);
    const perMessage: number[] = [];
    for (const size of [1, 10, 100]) {
      const scope = `push-batch-${size}-${Math.random()}`;
      const mark = counter.total();
      const result = await statementScope(scope, () => consumer.handle(createdEvents(size, place, author.id), move));
      expect(result).toEqual({ wrote: "jobs" });
      perMessage.push(counter.inScope(scope, mark).count / size);
    }
    expect(perMessage[0]).toBe(1);
    expect(perMessage[1]).toBeLessThan(perMessage[0]!);
    expect(perMessage[2]).toBeLessThan(perMessage[1]!);
  });

  it("costs no statement for a batch while nobody has a device", async () => {
    const { deps } = ctx.server.app;
    const consumer = pushConsumer({ db: deps.db as Database, clock: deps.clock });
    // As the consumer sees it after a refresh that found no device.
    await deps.db
      .transaction(async (tx) => {
        const inner = pushConsumer({ db: tx as unknown as Database, clock: deps.clock });
        await tx.execute(sql`delete from push_devices`);
        await inner.refresh?.();
        const counter = statementsOf(ctx.server);
        const scope = `push-nobody-${Math.random()}`;
        const mark = counter.total();
        const result = await statementScope(scope, () =>
          inner.handle(createdEvents(5, { workspaceId: "wsp_x", channelId: "chn_x" }, 1), {
            cte: sql`moved as (select 1)`,
            inTransaction: async () => true,
          }),
        );
        expect(result).toBe("nothing");
        expect(counter.inScope(scope, mark).count).toBe(0);
        tx.rollback();
      })
      .catch((error: unknown) => {
        if (!(error instanceof Error) || !error.message.includes("Rollback")) throw error;
      });
    expect(consumer.name).toBe("push");
  });
});

describe("the consumers' cursors", () => {
  it("are kept for the consumers this server runs only, so none it does not run holds back pruning", async () => {
    // This server does not translate (TRANSLATION_PROVIDER none): the translation cursor the
    // migration created is dropped; the others run.
    await ctx.server.app.deps.relay.flush();
    const rows = rowsOf<{ name: string }>(
      await ctx.server.app.deps.db.execute(sql`select name from consumer_cursors order by name`),
    );
    expect(rows.map((row) => row.name)).toEqual(["file-purge", "outbound", "push", "read-positions", "search"]);
  });
});

describe("a coalescing consumer (search, read positions)", () => {
  it("takes the batches the relay handed it from memory: while it keeps up, its turns read nothing from the log", async () => {
    const [owner] = await Promise.all([registerUser(ctx.api)]);
    const place = await createWorkspaceWithGeneral(ctx.api, owner);
    const { relay } = ctx.server.app.deps;
    const post = (content: string) =>
      ctx.api.post(
        `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages`,
        { content },
        { token: owner.token },
      );
    // Warm-up: the consumers have taken a turn since this server started.
    expect((await post("warm-up")).status).toBe(201);
    await relay.flush();

    const word = `coalesced${randomBytes(4).toString("hex")}`;
    const counter = statementsOf(ctx.server);
    const mark = counter.total();
    const posted: string[] = [];
    for (let round = 0; round < 4; round++) {
      const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => post(`${word} ${round}.${i}`)));
      for (const answer of answers) {
        expect(answer.status).toBe(201);
        posted.push(answer.body.data.id);
      }
    }
    await relay.flush();
    const window = counter.since(mark);
    expect(window.complete).toBe(true);
    const logReads = window.statements.filter((statement) => /position > .* and position <= /s.test(statement.text));
    expect(logReads.map((statement) => statement.text)).toEqual([]);

    // And the work was done: the search consumer indexed every message, and both cursors are
    // past the last message's event.
    const hits = await ctx.api.get(`/api/v1/search/messages?q=${word}&limit=100`, { token: owner.token });
    expect(hits.status).toBe(200);
    expect((hits.body.data as { id: string }[]).map((hit) => hit.id).sort()).toEqual([...posted].sort());
    const { db } = ctx.server.app.deps;
    const [last] = rowsOf<{ position: string }>(
      await db.execute(sql`select max(position)::text as position from stream_events
        where payload->>'type' = 'message.created' and payload->'data'->'message'->>'id' = any(${`{${posted.join(",")}}`}::text[])`),
    );
    const cursors = rowsOf<{ name: string; position: string }>(
      await db.execute(sql`select name, position::text as position from consumer_cursors
        where name in ('search', 'read-positions') order by name`),
    );
    expect(cursors.map((cursor) => cursor.name)).toEqual(["read-positions", "search"]);
    for (const cursor of cursors) expect(Number(cursor.position)).toBeGreaterThanOrEqual(Number(last!.position));
  });
});

describe("the file purge", () => {
  it("empties storage of a deleted message's files once its event is positioned; a delete without files costs it nothing", async () => {
    const owner = await registerUser(ctx.api);
    const place = await createWorkspaceWithGeneral(ctx.api, owner);
    const { relay, db, storage } = ctx.server.app.deps;
    const messagesPath = `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages`;

    // Without files: the delete's event passes the file purge by, no statement reads the queue.
    const plain = await ctx.api.post(messagesPath, { content: "no files" }, { token: owner.token });
    expect(plain.status).toBe(201);
    await relay.flush();
    const counter = statementsOf(ctx.server);
    const mark = counter.total();
    expect((await ctx.api.delete(`${messagesPath}/${plain.body.data.id}`, { token: owner.token })).status).toBe(204);
    await relay.flush();
    const window = counter.since(mark);
    expect(window.complete).toBe(true);
    expect(window.statements.filter((statement) => /file_deletions/.test(statement.text))).toEqual([]);

    // With a file: the event says so, and the bytes leave storage without the maintenance job.
    const fileId = (await stageTextFile(ctx.server.url, owner, "purge me", "purge.txt")).id;
    const [row] = await db.select().from(attachments).where(eq(attachments.id, fileId));
    const withFile = await ctx.api.post(
      messagesPath,
      { content: "", attachment_ids: [fileId] },
      { token: owner.token },
    );
    expect(withFile.status).toBe(201);
    expect((await ctx.api.delete(`${messagesPath}/${withFile.body.data.id}`, { token: owner.token })).status).toBe(204);
    const [event] = rowsOf<{ deletes_files: boolean }>(
      await db.execute(sql`select (payload->>'deletes_files')::boolean as deletes_files from stream_events
        where payload->>'type' = 'message.deleted' and payload->'data'->>'id' = ${withFile.body.data.id}`),
    );
    expect(event?.deletes_files).toBe(true);
    await until(
      () =>
        storage.get(row!.storageKey).then(
          () => undefined,
          () => true,
        ),
      "the deleted message's file to leave storage",
    );
  });
});

describe("the outbound consumer", () => {
  it("writes a batch's deliveries and their jobs in one statement with its cursor; a batch no webhook asked for costs none", async () => {
    const owner = await registerUser(ctx.api);
    const place = await createWorkspaceWithGeneral(ctx.api, owner);
    const other = await createWorkspaceWithGeneral(ctx.api, owner);
    const hook = await ctx.api.post(
      `/api/v1/workspaces/${place.workspaceId}/outbound-webhooks`,
      { url: "http://127.0.0.1:9/never-called", events: ["message.created"] },
      { token: owner.token },
    );
    expect(hook.status).toBe(201);
    const { deps } = ctx.server.app;
    // In a transaction rolled back at the end: no delivery of these made-up events is ever sent.
    await deps.db
      .transaction(async (tx) => {
        const consumer = outboundConsumer({ db: tx as unknown as Database, clock: deps.clock });
        await consumer.refresh?.();
        const move = { cte: sql`moved as (select 1)`, inTransaction: async () => true };
        const counter = statementsOf(ctx.server);
        const perMessage: number[] = [];
        for (const size of [1, 10, 100, 250]) {
          const scope = `outbound-batch-${size}-${Math.random()}`;
          const mark = counter.total();
          const events = createdEvents(size, place, owner.id);
          const result = await statementScope(scope, () => consumer.handle(events, move));
          expect(result).toEqual({ wrote: "jobs" });
          perMessage.push(counter.inScope(scope, mark).count / size);
          const positions = `{${events.map((event) => event.position).join(",")}}`;
          const [written] = rowsOf<{ deliveries: number; first_attempts: number; jobs: number }>(
            await tx.execute(sql`select
              (select count(*) from outbound_deliveries where webhook_id = ${hook.body.data.id}
                and event_position = any(${positions}::bigint[]))::integer as deliveries,
              firsts.first_attempts, firsts.jobs
              from (select count(*)::integer as first_attempts, count(distinct j.id)::integer as jobs
                from job_outbox j cross join jsonb_array_elements_text(j.payload->'deliveryIds') d(id)
                where j.name = 'outbound.first' and d.id in (select id from outbound_deliveries
                  where webhook_id = ${hook.body.data.id} and event_position = any(${positions}::bigint[]))) firsts`),
          );
          // Every delivery's first attempt, in one job per 100 deliveries.
          expect(written!.deliveries).toBe(size);
          expect(written!.first_attempts).toBe(size);
          expect(written!.jobs).toBe(Math.ceil(size / 100));
        }
        expect(perMessage).toEqual([1, 1 / 10, 1 / 100, 1 / 250]);

        // Events of a workspace without a webhook: nothing, and not a statement.
        const scope = `outbound-none-${Math.random()}`;
        const mark = counter.total();
        const result = await statementScope(scope, () => consumer.handle(createdEvents(5, other, owner.id), move));
        expect(result).toBe("nothing");
        expect(counter.inScope(scope, mark).count).toBe(0);
        tx.rollback();
      })
      .catch((error: unknown) => {
        if (!(error instanceof Error) || !error.message.includes("Rollback")) throw error;
      });
  });
});

describe("a consumer catching up", () => {
  it("reads the log in the order of its positions, across a power of ten (9 before 10)", async () => {
    const owner = await registerUser(ctx.api);
    const place = await createWorkspaceWithGeneral(ctx.api, owner);
    const { db, relay } = ctx.server.app.deps;
    // At least twelve positioned events, so the read below spans 9 → 10 (or a later power of ten).
    for (let i = 0; i < 12; i++) {
      const answer = await ctx.api.post(
        `/api/v1/workspaces/${place.workspaceId}/channels/${place.channelId}/messages`,
        { content: `catch-up ${i}` },
        { token: owner.token },
      );
      expect(answer.status).toBe(201);
    }
    await relay.flush();
    const [newest] = rowsOf<{ position: string }>(
      await db.execute(sql`select max(position)::text as position from stream_events`),
    );
    const upTo = Number(newest!.position);
    expect(upTo).toBeGreaterThanOrEqual(12);
    const events = await readLoggedEvents(db, 0, upTo, 500);
    const positions = events.map((event) => event.position);
    expect(positions.length).toBeGreaterThanOrEqual(12);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    // A batch ends at its newest event: the kit moves the cursor there.
    expect(positions.at(-1)).toBe(Math.max(...positions));
  });
});
