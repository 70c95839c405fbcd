// tRPC over WebSocket at /trpc: the protocol @trpc/client's wsLink speaks (connection params,
// queries, mutations, subscriptions with tracked ids, subscription.stop, PING/PONG, the
// reconnect notice), served with tRPC's own procedure call, error shape and keep-alive.
//
// Why not @trpc/server's applyWSSHandler: it runs every subscription as its own async loop
// (a race against the abort signal per event, the envelope copied and JSON.stringify'd per
// receiver). A message to a channel with 1000 subscribers paid that 1000 times, which capped
// fan-out well below issue 6's targets (docs/performance.md). Here a live subscription
// (LiveSubscription) hands each event synchronously to a sink that writes the frame: the
// event's JSON is made once per event and shared by every receiver, and only the few bytes
// naming the subscription differ. Frames sent to one connection in the same turn of the event
// loop leave in one socket write. Anything else a subscription procedure returns (an async
// iterable) is iterated as tRPC does.
import type { IncomingMessage } from "node:http";
import {
  callTRPCProcedure,
  getTRPCErrorFromUnknown,
  getTRPCErrorShape,
  isTrackedEnvelope,
  transformTRPCResponse,
  TRPCError,
  type AnyTRPCRouter,
  type inferRouterContext,
} from "@trpc/server";
import { handleKeepAlive } from "@trpc/server/adapters/ws";
import { parseTRPCMessage, type TRPCClientOutgoingMessage, type TRPCResponseMessage } from "@trpc/server/rpc";
import type { WebSocket, WebSocketServer } from "ws";
import { LiveSubscription, type StreamEvent } from "../events/streams.ts";

const OPEN = 1;

/**
 * A connection whose unsent frames stay above MAX_BUFFERED_BYTES for SLOW_GRACE_MS (or pass
 * HARD_MAX_BUFFERED_BYTES) is too slow: it is closed, and its client resumes by lastEventId.
 * The grace lets a replay burst (up to 1000 events at once) drain.
 */
export const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
export const SLOW_GRACE_MS = 2_000;
const HARD_MAX_BUFFERED_BYTES = 64 * 1024 * 1024;
/** Close code for it: "try again later" (RFC 6455 registry). The client reconnects by itself. */
const CLOSE_TOO_SLOW = 1013;

type Options<TRouter extends AnyTRPCRouter> = {
  wss: WebSocketServer;
  router: TRouter;
  createContext(
    req: IncomingMessage,
    connectionParams: Record<string, string> | null,
  ): Promise<inferRouterContext<TRouter>>;
  keepAlive: { pingMs: number; pongWaitMs: number };
  onError?(error: TRPCError, path: string | undefined): void;
};

/** Each event's JSON, made once however many subscribers receive it. */
const eventJson = new WeakMap<StreamEvent, string>();
function jsonOf(event: StreamEvent): string {
  let json = eventJson.get(event);
  if (json === undefined) {
    json = JSON.stringify(event);
    eventJson.set(event, json);
  }
  return json;
}

/**
 * Frames written in one turn of the event loop leave together: the socket is corked at the
 * first and uncorked once the turn's callbacks and promise jobs are done, so a busy channel
 * costs one socket write per connection per turn rather than one per event. (`_socket` is the
 * net.Socket under a `ws` WebSocket, the one `ws` itself reads `bufferedAmount` from.)
 */
const corked = new Set<{ uncork(): void }>();
let uncorkScheduled = false;
function uncorkAll() {
  uncorkScheduled = false;
  for (const socket of corked) socket.uncork();
  corked.clear();
}
function sendCoalesced(client: WebSocket, frame: string) {
  const socket = (client as unknown as { _socket?: { cork(): void; uncork(): void } })._socket;
  if (socket && !corked.has(socket)) {
    socket.cork();
    corked.add(socket);
    if (!uncorkScheduled) {
      uncorkScheduled = true;
      setImmediate(uncorkAll);
    }
  }
  client.send(frame);
}

/**
 * Closes a connection that does not read fast enough. No frame is queued after the close frame;
 * `ws` destroys the socket if the close handshake does not finish within 30 seconds.
 */
function tooSlow(client: WebSocket) {
  client.close(CLOSE_TOO_SLOW, "too slow: resume with lastEventId");
}

function connectionParamsOf(message: unknown): Record<string, string> {
  const data = (message as { method?: unknown; data?: unknown } | null)?.data;
  if ((message as { method?: unknown } | null)?.method !== "connectionParams" || !data || typeof data !== "object")
    throw new TRPCError({ code: "PARSE_ERROR", message: "Expected a connectionParams message" });
  const params: Record<string, string> = {};
  for (const [key, value] of Object.entries(data)) {
    if (typeof value !== "string")
      throw new TRPCError({ code: "PARSE_ERROR", message: `Connection param ${key} must be a string` });
    params[key] = value;
  }
  return params;
}

export function serveTrpcOverWebSocket<TRouter extends AnyTRPCRouter>(options: Options<TRouter>) {
  const { router } = options;
  const config = router._def._config;

  options.wss.on("connection", (client: WebSocket, req: IncomingMessage) => {
    /** Subscriptions by request id; stop() ends one (client stop, close, or server end). */
    const subscriptions = new Map<string | number, { stop(): void }>();
    let ctx: inferRouterContext<TRouter> | undefined;
    let ctxPromise: Promise<{ ok: true } | { ok: false; error: TRPCError }> | undefined;

    handleKeepAlive(client, options.keepAlive.pingMs, options.keepAlive.pongWaitMs);

    const respond = (message: TRPCResponseMessage) => {
      if (client.readyState === OPEN) client.send(JSON.stringify(transformTRPCResponse(config, message)));
    };
    const respondError = (
      request: { id: string | number | null; jsonrpc?: "2.0" | undefined },
      cause: unknown,
      call: { type: "query" | "mutation" | "subscription" | "unknown"; path: string | undefined; input: unknown },
    ) => {
      const error = getTRPCErrorFromUnknown(cause);
      options.onError?.(error, call.path);
      respond({
        id: request.id,
        jsonrpc: request.jsonrpc,
        error: getTRPCErrorShape({ config, error, ctx, ...call }),
      });
    };

    const createContext = (connectionParams: Record<string, string> | null) =>
      options.createContext(req, connectionParams).then(
        (value) => {
          ctx = value;
          return { ok: true as const };
        },
        (cause: unknown) => {
          const error = getTRPCErrorFromUnknown(cause);
          respondError({ id: null }, error, { type: "unknown", path: undefined, input: undefined });
          setImmediate(() => client.close());
          return { ok: false as const, error };
        },
      );
    // With ?connectionParams=1 the first message carries them (the token); else none are coming.
    if (new URL(req.url ?? "/", "http://localhost").searchParams.get("connectionParams") !== "1")
      ctxPromise = createContext(null);

    async function handle(message: TRPCClientOutgoingMessage, batchIndex: number) {
      const { id, jsonrpc } = message;
      if (id === null) {
        respondError({ id, jsonrpc }, new TRPCError({ code: "PARSE_ERROR", message: "`id` is required" }), {
          type: "unknown",
          path: undefined,
          input: undefined,
        });
        return;
      }
      if (message.method === "subscription.stop") {
        subscriptions.get(id)?.stop();
        return;
      }
      const type = message.method;
      const { path, lastEventId } = message.params;
      let input: unknown = message.params.input;
      if (lastEventId !== undefined)
        input = input && typeof input === "object" ? { ...input, lastEventId } : (input ?? { lastEventId });
      const call = { type, path, input };
      if (type === "subscription" && subscriptions.has(id)) {
        respondError({ id, jsonrpc }, new TRPCError({ code: "BAD_REQUEST", message: `Duplicate id ${id}` }), call);
        return;
      }

      // A subscription is registered before it starts, so a stop or a close during set-up ends it.
      const abort = new AbortController();
      let stopSubscription = () => abort.abort();
      if (type === "subscription") subscriptions.set(id, { stop: () => stopSubscription() });
      const stopped = () => {
        if (subscriptions.delete(id)) respond({ id, jsonrpc, result: { type: "stopped" } });
      };
      try {
        const context = await ctxPromise!;
        if (!context.ok) throw context.error;
        if (abort.signal.aborted) return stopped();
        const result = await callTRPCProcedure({
          router,
          path,
          getRawInput: async () => input,
          ctx,
          type,
          signal: abort.signal,
          batchIndex,
        });
        if (type !== "subscription") {
          respond({ id, jsonrpc, result: { type: "data", data: result } });
          return;
        }
        if (abort.signal.aborted || client.readyState !== OPEN) {
          if (result instanceof LiveSubscription) result.close();
          return stopped();
        }
        if (result instanceof LiveSubscription) {
          stopSubscription = () => {
            result.close();
            stopped();
          };
          const prefix = `{"id":${JSON.stringify(id)},${jsonrpc ? '"jsonrpc":"2.0",' : ""}"result":{"type":"data","id":`;
          let backlogSince = 0;
          const tooFarBehind = () => {
            const buffered = client.bufferedAmount;
            if (buffered <= MAX_BUFFERED_BYTES) {
              backlogSince = 0;
              return false;
            }
            const now = Date.now();
            backlogSince ||= now;
            return buffered > HARD_MAX_BUFFERED_BYTES || now - backlogSince > SLOW_GRACE_MS;
          };
          result.attach({
            // "started" once the subscription listens, so that a client may rely on it.
            ready: () => respond({ id, jsonrpc, result: { type: "started" } }),
            event(position, event) {
              if (client.readyState !== OPEN) return;
              if (tooFarBehind()) {
                result.close();
                tooSlow(client);
                return;
              }
              const positionJson = JSON.stringify(position);
              sendCoalesced(client, `${prefix}${positionJson},"data":{"id":${positionJson},"data":${jsonOf(event)}}}}`);
            },
            end: stopped,
            fail(error) {
              subscriptions.delete(id);
              respondError({ id, jsonrpc }, error, call);
            },
          });
          return;
        }
        respond({ id, jsonrpc, result: { type: "started" } });
        await iterate(result, { id, jsonrpc }, abort.signal);
        stopped();
      } catch (cause) {
        // A subscription stopped during its set-up ends quietly, as with tRPC's own adapter.
        if (type === "subscription" && abort.signal.aborted) return stopped();
        subscriptions.delete(id);
        respondError({ id, jsonrpc }, cause, call);
      }
    }

    /** A subscription that is not a LiveSubscription: iterate it, one frame per value. */
    async function iterate(
      result: unknown,
      request: { id: string | number; jsonrpc?: "2.0" | undefined },
      signal: AbortSignal,
    ) {
      if (!result || typeof result !== "object" || !(Symbol.asyncIterator in result))
        throw new TRPCError({
          code: "INTERNAL_SERVER_ERROR",
          message: "Subscription did not return an async iterable",
        });
      const iterator = (result as AsyncIterable<unknown>)[Symbol.asyncIterator]();
      const aborted = new Promise<"aborted">((resolve) =>
        signal.addEventListener("abort", () => resolve("aborted"), { once: true }),
      );
      try {
        for (;;) {
          const next = await Promise.race([iterator.next(), aborted]);
          if (next === "aborted" || next.done) return;
          const value: unknown = next.value;
          respond({
            ...request,
            result: isTrackedEnvelope(value)
              ? { type: "data", id: value[0], data: { id: value[0], data: value[1] } }
              : { type: "data", data: value },
          });
        }
      } finally {
        await iterator.return?.();
      }
    }

    client.on("message", (raw, isBinary) => {
      const text = raw.toString();
      if (!isBinary && (text === "PING" || text === "PONG")) {
        if (text === "PING") client.send("PONG");
        return;
      }
      let decoded: unknown;
      try {
        decoded = JSON.parse(text);
        if (!ctxPromise) {
          ctxPromise = createContext(connectionParamsOf(decoded));
          return;
        }
      } catch (cause) {
        const error = cause instanceof TRPCError ? cause : new TRPCError({ code: "PARSE_ERROR", cause });
        respondError({ id: null }, error, { type: "unknown", path: undefined, input: undefined });
        if (!ctxPromise) setImmediate(() => client.close());
        return;
      }
      const messages = Array.isArray(decoded) ? decoded : [decoded];
      messages.forEach((rawMessage: unknown, index) => {
        let message: TRPCClientOutgoingMessage;
        try {
          message = parseTRPCMessage(rawMessage, config.transformer) as TRPCClientOutgoingMessage;
        } catch (cause) {
          respondError({ id: null }, new TRPCError({ code: "PARSE_ERROR", cause }), {
            type: "unknown",
            path: undefined,
            input: undefined,
          });
          return;
        }
        void handle(message, index);
      });
    });

    client.once("close", () => {
      for (const subscription of subscriptions.values()) subscription.stop();
      subscriptions.clear();
    });
  });

  return {
    /** Asks every client to reconnect (before a shutdown); tRPC clients resume their subscriptions. */
    broadcastReconnectNotification() {
      const notice = JSON.stringify({ id: null, method: "reconnect" });
      for (const client of options.wss.clients) if (client.readyState === OPEN) client.send(notice);
    },
  };
}
