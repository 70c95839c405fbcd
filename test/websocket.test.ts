// The WebSocket door at /trpc (server/http/trpc-websocket.ts) spoken with a bare `ws` socket,
// frame by frame, as @trpc/client's wsLink speaks it: connection params, queries, errors,
// subscriptions (started, tracked data frames, stop, duplicate ids), the closing of a
// subscriber too slow to read, and its resumption from lastEventId with nothing lost.
import { afterEach, describe, expect, it } from "vitest";
import { MAX_BUFFERED_BYTES, SLOW_GRACE_MS } from "../server/http/trpc-websocket.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { RawSocket } from "./helpers/raw-socket.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();

const sockets: RawSocket[] = [];
afterEach(() => {
  for (const raw of sockets.splice(0)) raw.terminate();
});

async function openSocket(options: { connectionParams?: boolean } = {}): Promise<RawSocket> {
  const raw = await RawSocket.open(ctx.server.url, options);
  sockets.push(raw);
  return raw;
}

async function signedInSocket(user: RegisteredUser): Promise<RawSocket> {
  const raw = await RawSocket.signedIn(ctx.server.url, user.token);
  sockets.push(raw);
  return raw;
}

async function channelWithMember() {
  const owner = await registerUser(ctx.api);
  return { owner, ...(await createWorkspaceWithGeneral(ctx.api, owner)) };
}

function post(user: RegisteredUser, workspaceId: string, channelId: string, content: string) {
  return ctx.api.post(
    `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
    { content },
    {
      token: user.token,
    },
  );
}

describe("the tRPC WebSocket protocol", () => {
  it("answers a query once the connection params have signed the socket in", async () => {
    const user = await registerUser(ctx.api);
    const raw = await signedInSocket(user);
    raw.request(1, "query", "me.get");
    const answer = await raw.next((frame) => frame.id === 1);
    expect(answer.result.type).toBe("data");
    expect(answer.result.data).toMatchObject({ id: user.id, email: user.email });
  });

  it("answers with the error shape: UNAUTHORIZED without a token, NOT_FOUND for an unknown procedure", async () => {
    const raw = await openSocket({ connectionParams: false });
    raw.request(1, "query", "me.get");
    raw.request(2, "query", "no.such.procedure", { jsonrpc: "2.0" });
    const unauthorized = await raw.next((frame) => frame.id === 1);
    expect(unauthorized.error).toMatchObject({ code: -32001, data: { code: "UNAUTHORIZED", httpStatus: 401 } });
    const missing = await raw.next((frame) => frame.id === 2);
    expect(missing.jsonrpc).toBe("2.0");
    expect(missing.error).toMatchObject({ data: { code: "NOT_FOUND", httpStatus: 404 } });
  });

  it("refuses a malformed frame with PARSE_ERROR and keeps the connection", async () => {
    const user = await registerUser(ctx.api);
    const raw = await signedInSocket(user);
    raw.sendText("{not json");
    const refused = await raw.next((frame) => frame.id === null);
    expect(refused.error).toMatchObject({ data: { code: "PARSE_ERROR" } });
    raw.request(7, "query", "me.get");
    expect((await raw.next((frame) => frame.id === 7)).result.data.id).toBe(user.id);
  });

  it("refuses connection params that are not strings, then closes the socket", async () => {
    const raw = await openSocket();
    raw.sendText(JSON.stringify({ method: "connectionParams", data: { token: 42 } }));
    const refused = await raw.next((frame) => frame.id === null);
    expect(refused.error).toMatchObject({ data: { code: "PARSE_ERROR" } });
    await raw.closed();
  });

  it("subscribes (started, then tracked data frames), refuses a duplicate id, and stops on request", async () => {
    const { owner, workspaceId, channelId } = await channelWithMember();
    const raw = await signedInSocket(owner);
    const subscribe = () =>
      raw.request(3, "subscription", "messages.onChannel", {
        input: { workspace_id: workspaceId, channel_id: channelId },
      });
    subscribe();
    await raw.next((frame) => frame.id === 3 && frame.result?.type === "started");

    subscribe();
    const duplicate = await raw.next((frame) => frame.id === 3 && "error" in frame);
    expect(duplicate.error).toMatchObject({ message: "Duplicate id 3", data: { code: "BAD_REQUEST" } });

    const posted = await post(owner, workspaceId, channelId, "over the socket");
    expect(posted.status).toBe(201);
    await until(() => raw.dataFrames(3).length === 1 || undefined, "raw.dataFrames(3).length === 1", 5_000);
    const [frame] = raw.dataFrames(3);
    expect(frame!.result.id).toBe(frame!.result.data.id);
    expect(frame!.result.data.data).toMatchObject({
      id: frame!.result.id,
      type: "message.created",
      workspace_id: workspaceId,
      channel_id: channelId,
      data: { message: { id: posted.body.data.id, content: "over the socket" } },
    });

    raw.stop(3);
    await raw.next((frame) => frame.id === 3 && frame.result?.type === "stopped");
    expect((await post(owner, workspaceId, channelId, "after the stop")).status).toBe(201);
    // A query answered after the post's event would have been sent shows nothing else came.
    raw.request(4, "query", "me.get");
    await raw.next((frame) => frame.id === 4);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(raw.dataFrames(3)).toHaveLength(1);
  });

  it("answers a subscription to a channel the user cannot see with NOT_FOUND and no started", async () => {
    const { workspaceId, channelId } = await channelWithMember();
    const stranger = await registerUser(ctx.api);
    const raw = await signedInSocket(stranger);
    raw.request(5, "subscription", "messages.onChannel", {
      input: { workspace_id: workspaceId, channel_id: channelId },
    });
    const refused = await raw.next((frame) => frame.id === 5);
    expect(refused.error).toMatchObject({ data: { code: "NOT_FOUND", httpStatus: 404 } });
  });
});

describe("a subscriber too slow to read", () => {
  it(`is closed (1013) once more than ${MAX_BUFFERED_BYTES / 1024 / 1024} MiB wait for it for ${SLOW_GRACE_MS} ms, and resumes from its last event with nothing lost`, async () => {
    const { owner, workspaceId, channelId } = await channelWithMember();
    const input = { workspace_id: workspaceId, channel_id: channelId };
    const slow = await signedInSocket(owner);
    slow.request(1, "subscription", "messages.onChannel", { input });
    await slow.next((frame) => frame.id === 1 && frame.result?.type === "started");

    // One message read, then the socket stops reading (the kernel buffers fill, then the server's).
    expect((await post(owner, workspaceId, channelId, "read")).status).toBe(201);
    await until(() => slow.dataFrames(1).length === 1 || undefined, "slow.dataFrames(1).length === 1", 5_000);
    const lastSeen: string = slow.dataFrames(1)[0]!.result.id;
    (slow.socket as unknown as { _socket: { pause(): void } })._socket.pause();

    const big = "x".repeat(39_000);
    const postedIds: string[] = [];
    // About 23 MB: more than the kernel's socket buffers and the server's limit together.
    for (let batch = 0; batch < 60; batch++) {
      const responses = await Promise.all(
        Array.from({ length: 10 }, (_, index) => post(owner, workspaceId, channelId, `${batch}-${index} ${big}`)),
      );
      for (const response of responses) {
        expect(response.status).toBe(201);
        postedIds.push(response.body.data.id);
      }
    }
    // The server checks a connection's backlog when it has an event for it: a few more small
    // messages after the grace period.
    const graceEnds = Date.now() + SLOW_GRACE_MS + 1_500;
    while (Date.now() < graceEnds) {
      const response = await post(owner, workspaceId, channelId, "one more");
      expect(response.status).toBe(201);
      postedIds.push(response.body.data.id);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    (slow.socket as unknown as { _socket: { resume(): void } })._socket.resume();
    expect(await slow.closed(10_000)).toBe(1013);

    // A new socket resuming from the last event it saw gets every message posted since, once.
    const resumed = await signedInSocket(owner);
    resumed.request(1, "subscription", "messages.onChannel", { input, lastEventId: lastSeen });
    await until(
      () => resumed.dataFrames(1).length >= postedIds.length || undefined,
      "resumed.dataFrames(1).length >= postedIds.length",
      15_000,
    );
    const ids = resumed.dataFrames(1).map((frame) => frame.result.data.data.data.message.id);
    expect(ids.sort()).toEqual([...postedIds].sort());
  }, 60_000);
});
