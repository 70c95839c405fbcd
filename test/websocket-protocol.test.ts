// A differential fence around our tRPC-over-WebSocket host (server/http/trpc-websocket.ts): one
// scripted session is replayed against our host and against @trpc/server's own applyWSSHandler,
// both serving the same router on the same database and event bus, and every frame received
// must be the same (parsed JSON, deep equality, same order). A tRPC upgrade that changes the
// wire protocol, or a change to our host that drifts from it, fails here. The last tests check
// the fence is not vacuous: the real @trpc/client speaks to our host.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { createTRPCClient, createWSClient, wsLink } from "@trpc/client";
import { applyWSSHandler } from "@trpc/server/adapters/ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { createChatClient, type StreamEvent } from "@chat-service/client";
import { appRouter, type AppRouter } from "../routers/index.ts";
import { createWsContext, peerOf } from "../server/context.ts";
import { MAX_BATCH, MAX_PAYLOAD_BYTES, serveTrpcOverWebSocket } from "../server/http/trpc-websocket.ts";
import { clientFrames, PING, trpcSocketUrl, type RequestId } from "../server/http/trpc-ws-protocol.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { RawSocket } from "./helpers/raw-socket.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();

type HostKind = "trpc" | "ours";
type Host = { kind: HostKind; url: string; broadcastReconnectNotification(): void; close(): Promise<void> };

const KEEP_ALIVE = { pingMs: 30_000, pongWaitMs: 5_000 };

/**
 * A host on its own HTTP server, next to the test server and sharing its deps: tRPC's
 * applyWSSHandler, or a second instance of ours configured as server/app.ts configures it (so
 * that we hold its broadcastReconnectNotification).
 */
async function startHost(
  kind: HostKind,
  keepAlive: { pingMs: number; pongWaitMs: number } = KEEP_ALIVE,
): Promise<Host> {
  const deps = ctx.server.app.deps;
  const server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD_BYTES });
  server.on("upgrade", (req: IncomingMessage, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req)),
  );
  const handler =
    kind === "trpc"
      ? applyWSSHandler({
          wss,
          router: appRouter,
          createContext: ({ req, info }) => createWsContext(deps, peerOf(req, deps.config), info.connectionParams),
          maxBatchSize: MAX_BATCH,
          keepAlive: { enabled: true, ...keepAlive },
          onError: () => {},
        })
      : serveTrpcOverWebSocket({
          wss,
          router: appRouter,
          peerOf: (req) => peerOf(req, deps.config),
          createContext: (peer, connectionParams) => createWsContext(deps, peer, connectionParams),
          keepAlive,
        });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    kind,
    url: `http://127.0.0.1:${port}`,
    broadcastReconnectNotification: () => handler.broadcastReconnectNotification(),
    async close() {
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let trpcHost: Host;
let ourHost: Host;
beforeAll(async () => {
  trpcHost = await startHost("trpc");
  ourHost = await startHost("ours");
});
afterAll(async () => {
  await trpcHost?.close();
  await ourHost?.close();
});

/** What a frame from the server was: its parsed JSON, or the text / bytes when it was not JSON. */
type Received = unknown;

function decode(data: Buffer, isBinary: boolean): Received {
  if (isBinary) return { binary: data.toString("hex") };
  const text = data.toString();
  try {
    return JSON.parse(text);
  } catch {
    return { text };
  }
}

type Session = { socket: WebSocket; host: Host };
type Step = {
  name: string;
  send(session: Session): void;
  /** How many frames the step draws from tRPC's adapter (the reference): the replay waits for them. */
  frames: number;
  /** Requests answered concurrently (a batch): their answers are compared by id, not by arrival. */
  unordered?: boolean;
};
type Transcript = { step: string; frames: Received[] }[];

const byId = (a: Received, b: Received) =>
  JSON.stringify((a as { id?: unknown }).id ?? null).localeCompare(JSON.stringify((b as { id?: unknown }).id ?? null));

/**
 * Plays the steps on one connection to `host` and records what each step drew, and how the
 * server closed the connection if it did.
 */
async function replay(
  host: Host,
  steps: Step[],
  options: { connectionParams?: boolean } = {},
): Promise<{ transcript: Transcript; closeCode: number | undefined }> {
  const socket = new WebSocket(trpcSocketUrl(host.url, options));
  const received: Received[] = [];
  let closeCode: number | undefined;
  socket.on("message", (data: Buffer, isBinary) => received.push(decode(data, isBinary)));
  socket.on("close", (code) => (closeCode = code));
  socket.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  const transcript: Transcript = [];
  // Every frame is counted in exactly one step: one that arrives late counts in the next.
  let from = 0;
  try {
    for (const step of steps) {
      step.send({ socket, host });
      // A host that sends fewer frames is not waited for long: the comparison shows the gap.
      const deadline = Date.now() + 3_000;
      while (received.length < from + step.frames && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 10));
      // Room for a frame too many to arrive within its own step.
      await new Promise((resolve) => setTimeout(resolve, step.frames === 0 ? 150 : 50));
      const frames = received.slice(from);
      from += frames.length;
      transcript.push({ step: step.name, frames: step.unordered ? frames.sort(byId) : frames });
    }
    // Nothing may trail the script.
    await new Promise((resolve) => setTimeout(resolve, 200));
    transcript.push({ step: "after the script", frames: received.slice(from) });
  } finally {
    socket.terminate();
  }
  return { transcript, closeCode };
}

function post(user: RegisteredUser, workspaceId: string, channelId: string, content: string) {
  return ctx.api.post(
    `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
    { content },
    { token: user.token },
  );
}

/**
 * A channel with messages posted over REST, and the event position from before them (that of
 * an "anchor" message posted first): a subscription resuming from there replays exactly them.
 */
async function channelWithHistory(owner: RegisteredUser, contents: string[]) {
  const { workspaceId, channelId } = await createWorkspaceWithGeneral(ctx.api, owner);
  const watcher = await RawSocket.signedIn(ctx.server.url, owner.token);
  try {
    watcher.request(1, "subscription", "messages.onChannel", {
      input: { workspace_id: workspaceId, channel_id: channelId },
    });
    await watcher.next((frame) => frame.id === 1 && frame.result?.type === "started");
    expect((await post(owner, workspaceId, channelId, "anchor")).status).toBe(201);
    const messageIds: string[] = [];
    for (const content of contents) {
      const posted = await post(owner, workspaceId, channelId, content);
      expect(posted.status).toBe(201);
      messageIds.push(posted.body.data.id);
    }
    await until(
      () => watcher.dataFrames(1).length === contents.length + 1 || undefined,
      "the channel's events to be positioned",
    );
    const positions: string[] = watcher.dataFrames(1).map((frame) => frame.result.id);
    return { workspaceId, channelId, lastEventId: positions[0]!, positions: positions.slice(1), messageIds };
  } finally {
    watcher.terminate();
  }
}

describe("our WebSocket host against @trpc/server's applyWSSHandler", () => {
  it("answers one scripted session frame for frame as tRPC's own adapter does", async () => {
    const user = await registerUser(ctx.api, { name: "Fence User" });
    const contents = ["first replayed", "second replayed", "third replayed"];
    const history = await channelWithHistory(user, contents);
    const { workspaceId, channelId } = history;
    // A channel the user is not in.
    const stranger = await registerUser(ctx.api);
    const elsewhere = await createWorkspaceWithGeneral(ctx.api, stranger);

    const text = (frame: string | Buffer) => (session: Session) => session.socket.send(frame);
    const json = (value: unknown) => text(JSON.stringify(value));
    const query = (id: RequestId, path: string, input?: unknown) => ({ id, method: "query", params: { path, input } });
    // More than MAX_BATCH requests, some with jsonrpc "2.0", plus two that cannot be answered:
    // a stop and a request without an id.
    const oversizeBatch = [
      ...Array.from({ length: MAX_BATCH + 1 }, (_, index) =>
        index % 3 === 0
          ? { id: `big-${index}`, jsonrpc: "2.0", method: "query", params: { path: "me.get" } }
          : { id: 1000 + index, method: "query", params: { path: "me.get" } },
      ),
      { id: "big-stop", method: "subscription.stop" },
      { method: "query", params: { path: "me.get" } },
    ];
    const channelInput = { workspace_id: workspaceId, channel_id: channelId };

    const steps: Step[] = [
      { name: "connection params", send: text(clientFrames.connectionParams({ token: user.token })), frames: 0 },
      { name: "PING", send: text(PING), frames: 1 },
      { name: "query me.get", send: text(clientFrames.request(1, "query", "me.get")), frames: 1 },
      {
        name: "mutation messages.typing (before any subscription: no event on this socket)",
        send: text(clientFrames.request(2, "mutation", "messages.typing", { input: channelInput })),
        frames: 1,
      },
      {
        name: "mutation with invalid input (a domain error with field errors)",
        send: text(clientFrames.request(3, "mutation", "messages.typing", { input: {} })),
        frames: 1,
      },
      {
        name: "mutation failing input validation",
        send: text(clientFrames.request(4, "mutation", "messages.typing", { input: { workspace_id: 42 } })),
        frames: 1,
      },
      {
        name: "unknown procedure, jsonrpc 2.0 echoed",
        send: text(clientFrames.request(5, "query", "no.such.procedure", { jsonrpc: "2.0" })),
        frames: 1,
      },
      {
        name: "a subscription path called as a query",
        send: text(clientFrames.request(6, "query", "messages.onChannel", { input: channelInput })),
        frames: 1,
      },
      { name: "malformed JSON", send: text("{not json"), frames: 1 },
      { name: "a binary frame", send: text(Buffer.from(clientFrames.request(7, "query", "me.get"))), frames: 1 },
      { name: "JSON that is not an object", send: text("42"), frames: 1 },
      {
        name: "a request with a null id",
        send: json({ id: null, method: "query", params: { path: "me.get" } }),
        frames: 1,
      },
      { name: "an unknown method", send: json({ id: 8, method: "call", params: { path: "me.get" } }), frames: 1 },
      { name: "an empty batch", send: text("[]"), frames: 0 },
      {
        name: "a batch of two queries",
        send: json([query(9, "me.get"), { ...query("ten", "me.get"), jsonrpc: "2.0" }]),
        frames: 2,
        unordered: true,
      },
      { name: `a batch above ${MAX_BATCH} requests`, send: json(oversizeBatch), frames: MAX_BATCH + 1 },
      {
        name: "an oversize batch with nothing to answer",
        send: json(Array.from({ length: MAX_BATCH + 1 }, () => ({ method: "subscription.stop" }))),
        frames: 1,
      },
      {
        name: "subscription resumed from lastEventId: started, then the replayed events",
        send: text(
          clientFrames.request("sub", "subscription", "messages.onChannel", {
            input: channelInput,
            lastEventId: history.lastEventId,
          }),
        ),
        frames: 1 + contents.length,
      },
      {
        name: "a duplicate subscription id",
        send: text(clientFrames.request("sub", "subscription", "messages.onChannel", { input: channelInput })),
        frames: 1,
      },
      {
        name: "a subscription to a channel the user is not in",
        send: text(
          clientFrames.request("stranger", "subscription", "messages.onChannel", {
            input: { workspace_id: elsewhere.workspaceId, channel_id: elsewhere.channelId },
          }),
        ),
        frames: 1,
      },
      {
        name: "a subscription with an array input and a lastEventId",
        send: text(
          clientFrames.request("array", "subscription", "messages.onChannel", {
            input: ["not", "an", "object"],
            lastEventId: history.lastEventId,
          }),
        ),
        frames: 1,
      },
      {
        name: "a subscription resumed from a position the server does not know",
        send: text(
          clientFrames.request("unknown-position", "subscription", "messages.onChannel", {
            input: channelInput,
            lastEventId: "999999999999",
          }),
        ),
        frames: 3,
      },
      { name: "subscription.stop", send: text(clientFrames.stop("sub")), frames: 1 },
      { name: "subscription.stop of an unknown id", send: text(clientFrames.stop("nobody")), frames: 0 },
      { name: "the reconnect notice", send: ({ host }) => host.broadcastReconnectNotification(), frames: 1 },
    ];

    const { transcript: theirs } = await replay(trpcHost, steps);
    const { transcript: ours } = await replay(ourHost, steps);

    // The reference itself says what the script is about (so that the fence cannot pass empty).
    const reference = Object.fromEntries(theirs.map(({ step, frames }) => [step, frames])) as Record<string, any[]>;
    expect(reference["PING"]).toEqual([{ text: "PONG" }]);
    expect(reference["query me.get"]).toEqual([
      { id: 1, result: { type: "data", data: expect.objectContaining({ id: user.id, email: user.email }) } },
    ]);
    expect(reference["mutation messages.typing (before any subscription: no event on this socket)"]).toEqual([
      { id: 2, result: { type: "data", data: { message: "ok" } } },
    ]);
    expect(reference["unknown procedure, jsonrpc 2.0 echoed"]).toEqual([
      {
        id: 5,
        jsonrpc: "2.0",
        error: expect.objectContaining({ code: -32004, data: expect.objectContaining({ code: "NOT_FOUND" }) }),
      },
    ]);
    expect(reference["malformed JSON"]).toEqual([
      { id: null, error: expect.objectContaining({ data: expect.objectContaining({ code: "PARSE_ERROR" }) }) },
    ]);
    const refused = reference[`a batch above ${MAX_BATCH} requests`]!;
    expect(refused).toHaveLength(MAX_BATCH + 1);
    for (const frame of refused)
      expect(frame.error).toMatchObject({
        message: "Batch call exceeds maximum size",
        data: { code: "BAD_REQUEST" },
      });
    expect(reference["subscription resumed from lastEventId: started, then the replayed events"]).toEqual([
      { id: "sub", result: { type: "started" } },
      ...history.positions.map((position, index) => ({
        id: "sub",
        result: {
          type: "data",
          id: position,
          data: {
            id: position,
            data: expect.objectContaining({
              id: position,
              type: "message.created",
              data: expect.objectContaining({
                message: expect.objectContaining({ id: history.messageIds[index], content: contents[index] }),
              }),
            }),
          },
        },
      })),
    ]);
    expect(reference["a duplicate subscription id"]).toEqual([
      {
        id: "sub",
        error: expect.objectContaining({
          message: "Duplicate id sub",
          data: expect.objectContaining({ code: "BAD_REQUEST" }),
        }),
      },
    ]);
    // A stream that fails in its set-up: "started", the error, "stopped".
    expect(reference["a subscription resumed from a position the server does not know"]).toEqual([
      { id: "unknown-position", result: { type: "started" } },
      {
        id: "unknown-position",
        error: expect.objectContaining({ data: expect.objectContaining({ code: "PRECONDITION_FAILED" }) }),
      },
      { id: "unknown-position", result: { type: "stopped" } },
    ]);
    expect(reference["subscription.stop"]).toEqual([{ id: "sub", result: { type: "stopped" } }]);
    expect(reference["the reconnect notice"]).toEqual([{ id: null, method: "reconnect" }]);
    expect(reference["after the script"]).toEqual([]);

    // The fence: every step drew the same frames from our host.
    expect(ours).toEqual(theirs);
  });

  it("answers connection params it cannot use as tRPC's adapter does, and closes the connection alike", async () => {
    const user = await registerUser(ctx.api);
    const send = (frame: string | Buffer) => (session: Session) => session.socket.send(frame);
    const meGet = { name: "query me.get", send: send(clientFrames.request(1, "query", "me.get")), frames: 1 };
    // A frame in place of the connection params, and whether the server then closes the socket.
    const sessions: { name: string; params: string | Buffer; closes: boolean }[] = [
      { name: "not JSON", params: "{not json", closes: true },
      {
        name: "a binary frame",
        params: Buffer.from(clientFrames.connectionParams({ token: user.token })),
        closes: true,
      },
      { name: "JSON that is not an object", params: "42", closes: true },
      {
        name: "an array",
        params: JSON.stringify([{ method: "connectionParams", data: { token: user.token } }]),
        closes: true,
      },
      { name: "no data", params: JSON.stringify({ method: "connectionParams" }), closes: true },
      {
        name: "data that is not an object",
        params: JSON.stringify({ method: "connectionParams", data: "token" }),
        closes: true,
      },
      {
        name: "values that are not strings",
        params: JSON.stringify({ method: "connectionParams", data: { token: 42 } }),
        closes: true,
      },
      {
        name: "null data (no params: signed out)",
        params: JSON.stringify({ method: "connectionParams", data: null }),
        closes: false,
      },
      { name: "an unknown token", params: clientFrames.connectionParams({ token: "chat_nope" }), closes: false },
    ];
    for (const session of sessions) {
      const steps: Step[] = [
        { name: "connection params", send: send(session.params), frames: session.closes ? 1 : 0 },
        ...(session.closes ? [] : [meGet]),
      ];
      const theirs = await replay(trpcHost, steps);
      const ours = await replay(ourHost, steps);
      const [refused] = theirs.transcript[0]!.frames as any[];
      if (session.closes) {
        expect(refused, session.name).toMatchObject({ id: null, error: { data: { code: "PARSE_ERROR" } } });
        expect(theirs.closeCode, session.name).toBe(1005);
      } else {
        expect(theirs.transcript[1]!.frames, session.name).toMatchObject([
          { id: 1, error: { data: { code: "UNAUTHORIZED" } } },
        ]);
        expect(theirs.closeCode, session.name).toBeUndefined();
      }
      expect(ours, session.name).toEqual(theirs);
    }

    // Without `?connectionParams=1` the connection is signed out from the start.
    const signedOut = [meGet];
    const theirs = await replay(trpcHost, signedOut, { connectionParams: false });
    expect(theirs.transcript[0]!.frames).toMatchObject([{ id: 1, error: { data: { code: "UNAUTHORIZED" } } }]);
    expect(await replay(ourHost, signedOut, { connectionParams: false })).toEqual(theirs);
  });

  it("keeps a connection alive as tRPC's adapter does: PING after silence, terminated when nothing answers", async () => {
    const user = await registerUser(ctx.api);
    const keepAlive = { pingMs: 300, pongWaitMs: 300 };
    const hosts = [await startHost("trpc", keepAlive), await startHost("ours", keepAlive)];
    try {
      /** One connection for `ms`: what it received, and how the server ended it (1006: terminated, no close frame). */
      const session = async (host: Host, answer: "PONG" | "nothing", ms: number) => {
        const socket = new WebSocket(trpcSocketUrl(host.url));
        const received: string[] = [];
        let closeCode: number | undefined;
        socket.on("message", (data: Buffer) => {
          received.push(data.toString());
          if (data.toString() === PING && answer === "PONG") socket.send("PONG");
        });
        socket.on("close", (code) => (closeCode = code));
        socket.on("error", () => {});
        await new Promise<void>((resolve, reject) => socket.once("open", () => resolve()).once("error", reject));
        socket.send(clientFrames.connectionParams({ token: user.token }));
        await new Promise((resolve) => setTimeout(resolve, ms));
        const ended = closeCode;
        socket.terminate();
        return { received, closeCode: ended };
      };
      for (const host of hosts) {
        // Silent after its params: one PING after 300 ms, then terminated 300 ms later.
        const silent = await session(host, "nothing", 1_500);
        expect(silent, host.kind).toEqual({ received: [PING], closeCode: 1006 });
        // Answering each PING: still open after 1.5 s, pinged again after each answer's silence.
        const answering = await session(host, "PONG", 1_500);
        expect(answering.closeCode, host.kind).toBeUndefined();
        expect(answering.received.length, host.kind).toBeGreaterThanOrEqual(2);
        expect(new Set(answering.received), host.kind).toEqual(new Set([PING]));
      }
    } finally {
      for (const host of hosts) await host.close();
    }
  });
});

describe("the real @trpc/client against our host", () => {
  it("runs a query, a mutation and a subscription over wsLink alone, through the fenced instance", async () => {
    const user = await registerUser(ctx.api);
    const { workspaceId, channelId } = await createWorkspaceWithGeneral(ctx.api, user);
    const wsClient = createWSClient({
      url: `${ourHost.url}/trpc`,
      connectionParams: { token: user.token },
      WebSocket: WebSocket as unknown as typeof globalThis.WebSocket,
    });
    const client = createTRPCClient<AppRouter>({ links: [wsLink({ client: wsClient })] });
    try {
      expect(await client.me.get.query()).toMatchObject({ id: user.id, email: user.email });
      expect(await client.messages.typing.mutate({ workspace_id: workspaceId, channel_id: channelId })).toEqual({
        message: "ok",
      });

      const received: { id: string; data: StreamEvent }[] = [];
      const errors: unknown[] = [];
      let started = false;
      const subscription = client.messages.onChannel.subscribe(
        { workspace_id: workspaceId, channel_id: channelId },
        {
          onStarted: () => (started = true),
          onData: (value) => received.push(value as unknown as { id: string; data: StreamEvent }),
          onError: (error) => errors.push(error),
        },
      );
      await until(() => started || undefined, "the subscription to start");
      const posted = await post(user, workspaceId, channelId, "over the typed client");
      expect(posted.status).toBe(201);
      await until(() => received[0], "the message event");
      expect(received[0]).toEqual({
        id: expect.any(String),
        data: expect.objectContaining({
          id: received[0]!.id,
          type: "message.created",
          channel_id: channelId,
          data: expect.objectContaining({
            message: expect.objectContaining({ id: posted.body.data.id, content: "over the typed client" }),
          }),
        }),
      });
      subscription.unsubscribe();
      expect(errors).toEqual([]);

      // A refused call reaches the typed client as its error.
      await expect(client.messages.typing.mutate({})).rejects.toMatchObject({
        data: { code: "UNPROCESSABLE_CONTENT" },
      });
    } finally {
      wsClient.close();
    }
  });

  it("runs createChatClient's query, mutation and subscription against the server (the subscription on our host)", async () => {
    const user = await registerUser(ctx.api);
    const { workspaceId, channelId } = await createWorkspaceWithGeneral(ctx.api, user);
    const chat = createChatClient({
      url: ctx.server.url,
      token: user.token,
      webSocket: { WebSocket },
    });
    try {
      expect(await chat.me.get.query()).toMatchObject({ id: user.id });
      expect(await chat.messages.typing.mutate({ workspace_id: workspaceId, channel_id: channelId })).toEqual({
        message: "ok",
      });
      const received: { id: string; data: StreamEvent }[] = [];
      let started = false;
      const subscription = chat.messages.onChannel.subscribe(
        { workspace_id: workspaceId, channel_id: channelId },
        {
          onStarted: () => (started = true),
          onData: (value) => received.push(value as unknown as { id: string; data: StreamEvent }),
        },
      );
      await until(() => started || undefined, "the subscription to start");
      const posted = await post(user, workspaceId, channelId, "over createChatClient");
      expect(posted.status).toBe(201);
      await until(() => received[0], "the message event");
      expect(received[0]!.data).toMatchObject({
        id: received[0]!.id,
        type: "message.created",
        data: { message: { id: posted.body.data.id, content: "over createChatClient" } },
      });
      subscription.unsubscribe();
    } finally {
      chat.close();
    }
  });
});
