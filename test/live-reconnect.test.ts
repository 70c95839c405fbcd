// The real @trpc/client (wsLink inside createChatClient) reconnects by itself when the server
// closes its socket (1013 "too slow", 1001 "going away") or restarts, resubscribes with the
// last event position it saw, and so receives every message exactly once, in order.
import { describe, expect, it } from "vitest";
import { CLOSE_CODES } from "../server/http/trpc-ws-protocol.ts";
import { arrived, world, type Feed } from "./helpers/live.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

function expectExactlyOnceInOrder(feed: Feed, contents: string[]) {
  expect(feed.messages().map(({ content }) => content)).toEqual(contents);
  const positions = feed.received.filter(({ event }) => event.id !== "").map(({ id }) => Number(id));
  expect(positions).toEqual([...positions].sort((a, b) => a - b));
  expect(new Set(positions).size).toBe(positions.length);
  expect(feed.errors).toEqual([]);
}

describe("the typed client after the server drops its connection", () => {
  for (const [label, code] of [
    ["1013 (too slow)", CLOSE_CODES.tryAgainLater],
    ["1001 (going away)", CLOSE_CODES.goingAway],
  ] as const) {
    it(`reconnects after a ${label} close and resumes with nothing lost or repeated`, async () => {
      const { owner, member, workspace, general } = await live.team();
      const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id);
      await live.post(owner, workspace.id, general.id, "before");
      await arrived(feed, "before");

      const connections = [...ctx.server.app.webSockets.clients];
      for (const socket of connections) socket.close(code, "test");
      // Posted while the client is away or reconnecting: replayed or live, once either way.
      await live.post(owner, workspace.id, general.id, "during 1");
      await live.post(owner, workspace.id, general.id, "during 2");
      await until(
        () =>
          [...ctx.server.app.webSockets.clients].some((socket) => !connections.includes(socket)) ? true : undefined,
        "the client to reconnect",
      );
      await live.post(owner, workspace.id, general.id, "after");
      await arrived(feed, "after");
      expectExactlyOnceInOrder(feed, ["before", "during 1", "during 2", "after"]);
    });
  }

  it("reconnects after the server restarts and resumes from its last position", async () => {
    const { owner, member, workspace, general } = await live.team();
    const feed = await live.attachedChannelFeed(member, owner, workspace.id, general.id);
    await live.post(owner, workspace.id, general.id, "before the restart");
    await arrived(feed, "before the restart");

    ctx.server = await ctx.server.restart();
    await live.post(owner, workspace.id, general.id, "after the restart 1");
    await live.post(owner, workspace.id, general.id, "after the restart 2");
    await arrived(feed, "after the restart 2", "the messages after the restart");
    expectExactlyOnceInOrder(feed, ["before the restart", "after the restart 1", "after the restart 2"]);
  }, 30_000);
});
