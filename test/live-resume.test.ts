// Resuming live subscriptions exactly (server/events/relay.ts, live-subscription.ts): an event
// whose transaction commits after a later one is still delivered to a client that resumes
// from the later one; a resume longer than the replay limit, or from a position the store no
// longer serves, is refused with a resync error rather than cut; and when the Redis subscriber
// loses its connection, subscribers catch up from the store.
import { randomBytes } from "node:crypto";
import { eq, lt } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { TRPCClientError } from "@chat-service/client";
import { streamEvents } from "../db/schema/index.ts";
import type { Deps } from "../server/deps.ts";
import type { EventEntry } from "../server/events/catalog.ts";
import type { RedisEventBus } from "../server/events/bus.ts";
import { recordEvents, REPLAY_LIMIT, streams, writeWithEvents } from "../server/events/streams.ts";
import type { MessageRecord } from "../server/records/message.ts";
import { arrived, world, type Feed } from "./helpers/live.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);
const deps = (): Deps => ctx.server.app.deps;

/** A message.created event for `content` in the channel, written straight to the store (no message row). */
function messageEntry(workspaceId: string, channelId: string, content: string): EventEntry {
  const now = new Date().toISOString();
  const message: MessageRecord = {
    id: `msg_${randomBytes(8).toString("hex")}`,
    workspace_id: workspaceId,
    channel_id: channelId,
    conversation_id: null,
    room_id: null,
    author: null,
    content,
    type: "text",
    parent_message_id: null,
    reply_count: 0,
    attachments: [],
    skip_translation: false,
    translation: null,
    client_message_id: null,
    mentioned_user_ids: [],
    mentions_channel: false,
    reactions: [],
    edited_at: null,
    deleted_at: null,
    created_at: now,
    updated_at: now,
  };
  return {
    stream: streams.channel(channelId),
    type: "message.created",
    scope: { workspace_id: workspaceId, channel_id: channelId },
    data: { message },
  };
}

/** A channel feed, attached (its first event seen) by posting until one arrives. */
async function attachedFeed(token: string, workspaceId: string, channelId: string, poster: () => Promise<unknown>) {
  const feed = live.onChannel(live.chat(token), { workspace_id: workspaceId, channel_id: channelId });
  await until(() => (feed.isStarted() ? true : undefined), "the subscription to start");
  await poster();
  await until(() => (feed.messages().length > 0 ? true : undefined), "the first message");
  return feed;
}

function resyncError(feed: Feed) {
  return until(() => feed.errors[0], "the subscription's error").then((error) => {
    expect(error).toBeInstanceOf(TRPCClientError);
    return error as TRPCClientError<any>;
  });
}

describe.runIf(process.env.DATABASE_URL)("events whose transactions commit out of order (PostgreSQL)", () => {
  it("delivers the event that committed last to a client resuming from the one that committed first", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await attachedFeed(member.token, workspace.id, general.id, () =>
      live.post(owner, workspace.id, general.id, "before"),
    );

    // Transaction A writes its event first (the lower id) and holds; B writes and commits.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let markWritten!: () => void;
    const written = new Promise<void>((resolve) => (markWritten = resolve));
    const first = deps().db.transaction(async (tx) => {
      await recordEvents(tx, new Date(), [messageEntry(workspace.id, general.id, "committed last")]);
      markWritten();
      await held;
    });
    await written;
    await writeWithEvents(deps(), async (_tx, emit) => emit(messageEntry(workspace.id, general.id, "committed first")));
    const seen = await arrived(feed, "committed first");
    feed.unsubscribe();

    // A commits now; the client resumes from the last event it saw, which is B's.
    release();
    await first;
    deps().relay.wake();
    const resumed = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: seen.id,
    });
    await arrived(resumed, "committed last");
    expect(resumed.messages().map(({ content }) => content)).toEqual(["committed last"]);

    // It really was out of order: A's row was inserted first, yet is positioned after B's.
    const rows = await deps()
      .db.select({ id: streamEvents.id, position: streamEvents.position, payload: streamEvents.payload })
      .from(streamEvents)
      .where(eq(streamEvents.stream, streams.channel(general.id)));
    const rowOf = (content: string) =>
      rows.find((row) => JSON.stringify(row.payload).includes(`"content":"${content}"`))!;
    expect(rowOf("committed last").id).toBeLessThan(rowOf("committed first").id);
    expect(rowOf("committed last").position!).toBeGreaterThan(rowOf("committed first").position!);
  });
});

describe("resuming from a position the store cannot serve exactly", () => {
  it(`replays exactly ${REPLAY_LIMIT} missed events, and refuses ${REPLAY_LIMIT + 1} with PRECONDITION_FAILED`, async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await attachedFeed(member.token, workspace.id, general.id, () =>
      live.post(owner, workspace.id, general.id, "start"),
    );
    const start = feed.messages()[0]!.id;
    feed.unsubscribe();

    const burst = Array.from({ length: REPLAY_LIMIT }, (_, index) =>
      messageEntry(workspace.id, general.id, `m${index}`),
    );
    await writeWithEvents(deps(), async (_tx, emit) => emit(...burst));
    await deps().relay.flush();

    const exact = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: start,
    });
    await arrived(exact, `m${REPLAY_LIMIT - 1}`);
    expect(exact.messages().map(({ content }) => content)).toEqual(burst.map((_, index) => `m${index}`));
    expect(exact.errors).toEqual([]);
    exact.unsubscribe();

    await writeWithEvents(deps(), async (_tx, emit) => emit(messageEntry(workspace.id, general.id, "one too many")));
    await deps().relay.flush();
    const tooMany = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: start,
    });
    const error = await resyncError(tooMany);
    expect(error.data).toMatchObject({ code: "PRECONDITION_FAILED", httpStatus: 412 });
    expect(error.message).toContain(`More than ${REPLAY_LIMIT} events were missed`);
    // Nothing was delivered: the client reloads instead of showing a cut history.
    expect(tooMany.received).toEqual([]);
  }, 60_000);

  it("refuses a position after the newest event, and one whose successors were pruned (PRECONDITION_FAILED)", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await attachedFeed(member.token, workspace.id, general.id, () =>
      live.post(owner, workspace.id, general.id, "kept"),
    );
    const kept = feed.messages()[0]!;
    feed.unsubscribe();

    const future = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: String(Number(kept.id) + 1_000_000),
    });
    expect((await resyncError(future)).data?.code).toBe("PRECONDITION_FAILED");

    // Retention pruned everything up to and including the event the client saw, and one after.
    await live.post(owner, workspace.id, general.id, "pruned too");
    await live.post(owner, workspace.id, general.id, "still kept");
    await deps().relay.flush();
    const pruneThrough = Number(kept.id) + 1;
    await deps()
      .db.delete(streamEvents)
      .where(lt(streamEvents.position, pruneThrough + 1));
    const stale = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: kept.id,
    });
    const error = await resyncError(stale);
    expect(error.data?.code).toBe("PRECONDITION_FAILED");
    expect(error.message).toContain("no longer kept");
  });

  it("refuses a lastEventId that is not a position (422 UNPROCESSABLE_CONTENT, key lastEventId)", async () => {
    const { member, workspace, general } = await live.team();
    const feed = live.onChannel(live.chat(member.token), {
      workspace_id: workspace.id,
      channel_id: general.id,
      lastEventId: "not-a-position",
    });
    const error = await until(() => feed.errors[0], "the refusal");
    expect((error as TRPCClientError<any>).data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      errors: { lastEventId: [expect.any(String)] },
    });
  });
});

describe.runIf(process.env.REDIS_URL)("the Redis subscriber losing its connection", () => {
  it("catches subscribers up from the store with what was published while it was away, once each", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await attachedFeed(member.token, workspace.id, general.id, () =>
      live.post(owner, workspace.id, general.id, "before the drop"),
    );

    // The bus's subscriber connection drops and stays away for half a second.
    const subscriber = (deps().events as unknown as { subscriber: RedisEventBus["subscriber"] }).subscriber;
    const retry = subscriber.options.retryStrategy;
    subscriber.options.retryStrategy = () => 500;
    const closed = new Promise((resolve) => subscriber.once("close", resolve));
    subscriber.disconnect(true);
    await closed;
    try {
      await writeWithEvents(deps(), async (_tx, emit) =>
        emit(
          messageEntry(workspace.id, general.id, "while away 1"),
          messageEntry(workspace.id, general.id, "while away 2"),
        ),
      );
      await deps().relay.flush();
      // Published to Redis while nobody here listened.
      expect(subscriber.status).not.toBe("ready");
    } finally {
      subscriber.options.retryStrategy = retry;
    }

    await arrived(feed, "while away 2", "the catch-up after the reconnect");
    await live.post(owner, workspace.id, general.id, "after the drop");
    await arrived(feed, "after the drop");
    expect(feed.messages().map(({ content }) => content)).toEqual([
      "before the drop",
      "while away 1",
      "while away 2",
      "after the drop",
    ]);
    expect(feed.errors).toEqual([]);
  });
});
