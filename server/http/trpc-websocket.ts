// tRPC over WebSocket at /trpc: the protocol @trpc/client's wsLink speaks (trpc-ws-protocol.ts),
// served with tRPC's own procedure call, error shape, connection-params parsing and keep-alive.
//
// Why not @trpc/server's applyWSSHandler: it runs every subscription as its own async loop
// (a race against the abort signal per event, the envelope copied and JSON.stringify'd per
// receiver). A message to a channel with 1000 subscribers paid that 1000 times, which capped
// fan-out well below issue 6's targets (docs/performance.md). Here a live subscription
// (LiveSubscription) hands each event synchronously to a sink that writes the frame: the
// event's JSON is made once per event and shared by every receiver, and only the few bytes
// naming the subscription differ. Frames sent to one connection in the same turn of the event
// loop leave in one socket write. Anything else a subscription procedure returns (an async
// iterable) is iterated as tRPC does. test/websocket-protocol.test.ts keeps this host
// frame-for-frame equal to applyWSSHandler.
//
// What differs on purpose: every request creates its context anew (so it is authorized with
// the token's current state, as a REST request is), and the host defends itself: frames of at
// most 1 MiB, batches of at most MAX_BATCH requests, at most MAX_SUBSCRIPTIONS subscriptions per
// connection, connection params within 10 s, and no error of a socket or a request can reach
// the process.
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
import { handleKeepAlive, jsonEncoder } from "@trpc/server/adapters/ws";
import { parseConnectionParamsFromUnknown } from "@trpc/server/http";
import { parseTRPCMessage, type TRPCClientOutgoingMessage, type TRPCResponseMessage } from "@trpc/server/rpc";
import type { WebSocket, WebSocketServer } from "ws";
import type { StreamEvent } from "../events/streams.ts";
import { toTRPCError } from "../trpc-errors.ts";
import { liveStreamOf, TrackedLiveStream } from "../trpc-live.ts";
import { JSON_TOO_DEEP_MESSAGE, jsonNestsDeeperThan, MAX_JSON_DEPTH, startsWithJsonArray } from "./json-limits.ts";
import {
  CLOSE_CODES,
  CONNECTION_PARAMS_QUERY,
  PING,
  PONG,
  RECONNECT_NOTICE,
  trackedEventFrameHead,
  trackedEventFrameTail,
  type RequestId,
} from "./trpc-ws-protocol.ts";

const OPEN = 1;

/** The largest frame a client may send; `ws` closes the connection (1009) above it. */
export const MAX_PAYLOAD_BYTES = 1024 * 1024;
/** Requests in one batch frame; above it, every request of the batch is refused, as tRPC's own `maxBatchSize` does. */
export const MAX_BATCH = 50;
/** Subscriptions open at once on one connection (each may replay up to 1000 events). */
export const MAX_SUBSCRIPTIONS = 100;
/** A connection that announced connection params and sent none within this is closed (1008). */
export const CONNECTION_PARAMS_TIMEOUT_MS = 10_000;

/**
 * A connection whose unsent frames stay above MAX_BUFFERED_BYTES for SLOW_GRACE_MS (or pass
 * HARD_MAX_BUFFERED_BYTES) is too slow: it is closed, and its client resumes by lastEventId.
 * The grace lets a replay burst (up to 1000 events at once) drain.
 */
export const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
export const SLOW_GRACE_MS = 2_000;
const HARD_MAX_BUFFERED_BYTES = 64 * 1024 * 1024;

type Options<TRouter extends AnyTRPCRouter> = {
  wss: WebSocketServer;
  router: TRouter;
  /** The context of one request: called for every query, mutation and subscription. */
  createContext(
    req: IncomingMessage,
    connectionParams: Record<string, string | undefined> | null,
  ): Promise<inferRouterContext<TRouter>>;
  /**
   * Called once a connection's params are known: sign the connection itself in, watch its
   * credential, and call `close` when it is revoked. Resolves to what to do when the connection
   * closes. A failure (the database away) is answered as a context that cannot be made.
   */
  signIn?(
    req: IncomingMessage,
    connectionParams: Record<string, string | undefined> | null,
    close: (code: number, reason: string) => void,
  ): Promise<(() => void) | void>;
  keepAlive: { pingMs: number; pongWaitMs: number };
  onError?(error: TRPCError, path: string | undefined): void;
  /** Runs the handling of a frame of the connection opened by `req` (the request log's scope). */
  inRequestScope?(req: IncomingMessage, work: () => void): void;
  /** Called for each live event written to a subscriber (the metrics count them). */
  onEventDelivered?(): void;
};

/**
 * Each event's frame tail (its position and JSON) as UTF-8 bytes, made once however many
 * subscribers receive it: a subscriber's frame is then its head's bytes and these, copied, not
 * a string each socket encodes again. (An ephemeral event carries each subscriber's position:
 * its tail is made again when the position differs.)
 */
const frameTails = new WeakMap<StreamEvent, { position: string; bytes: Buffer }>();
function frameTailOf(position: string, event: StreamEvent): Buffer {
  const known = frameTails.get(event);
  if (known?.position === position) return known.bytes;
  const bytes = Buffer.from(trackedEventFrameTail(position, JSON.stringify(event)));
  frameTails.set(event, { position, bytes });
  return bytes;
}

/** A text frame from bytes that are UTF-8 already (ws would send a Buffer as binary). */
const TEXT = { binary: false } as const;

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
function sendCoalesced(client: WebSocket, frame: Buffer) {
  const socket = (client as unknown as { _socket?: { cork(): void; uncork(): void } })._socket;
  if (socket && !corked.has(socket)) {
    socket.cork();
    corked.add(socket);
    if (!uncorkScheduled) {
      uncorkScheduled = true;
      setImmediate(uncorkAll);
    }
  }
  client.send(frame, TEXT);
}

type Call = { type: "query" | "mutation" | "subscription" | "unknown"; path: string | undefined; input: unknown };
const NO_CALL: Call = { type: "unknown", path: undefined, input: undefined };

/** The connection params message (the first message, with `?connectionParams=1`), checked as tRPC checks it. */
function connectionParamsOf(text: string): Record<string, string | undefined> | null {
  // `{"data": {…}}`: the params are one level down.
  if (jsonNestsDeeperThan(text, MAX_JSON_DEPTH + 1)) {
    throw new TRPCError({ code: "PARSE_ERROR", message: JSON_TOO_DEEP_MESSAGE });
  }
  let message: unknown;
  try {
    message = JSON.parse(text);
    if (!message || typeof message !== "object" || Array.isArray(message)) throw new Error("Message was not an object");
  } catch (cause) {
    throw new TRPCError({ code: "PARSE_ERROR", message: "Malformed TRPCConnectionParamsMessage", cause });
  }
  return parseConnectionParamsFromUnknown((message as { data?: unknown }).data);
}

export function serveTrpcOverWebSocket<TRouter extends AnyTRPCRouter>(options: Options<TRouter>) {
  const { router } = options;
  const config = router._def._config;
  type Context = inferRouterContext<TRouter>;

  const reportError = (error: TRPCError, path: string | undefined) => {
    try {
      options.onError?.(error, path);
    } catch {
      // A failing error report must not take the connection (or the process) with it.
    }
  };

  // A server-level failure: reported, never thrown into the process. (A bad handshake is
  // answered 400 by `ws` itself.)
  options.wss.on("error", (cause) => reportError(getTRPCErrorFromUnknown(cause), undefined));

  /** Every open connection's subscriptions, counted for the metrics. */
  const openSubscriptions = new Set<Map<RequestId, unknown>>();

  options.wss.on("connection", (client: WebSocket, req: IncomingMessage) => {
    /** Subscriptions by request id; stop() ends one (client stop, close, or server end). */
    const subscriptions = new Map<RequestId, { stop(): void }>();
    openSubscriptions.add(subscriptions);
    let connectionParams: Record<string, string | undefined> | null = null;
    /** Settles once the connection's params are known and its first context made. */
    let established: Promise<{ ok: true } | { ok: false; error: TRPCError }> | undefined;
    let stopWatching: (() => void) | void = undefined;

    // Protocol errors (a bad frame, a frame above maxPayload, invalid UTF-8): `ws` closes the
    // connection itself; without this listener the error would end the process. They are the
    // client's (reported as a bad request, not as a server failure with a stack).
    client.on("error", (cause) =>
      reportError(new TRPCError({ code: "BAD_REQUEST", message: "WebSocket protocol error", cause }), undefined),
    );
    handleKeepAlive(client, options.keepAlive.pingMs, options.keepAlive.pongWaitMs);

    const close = (code: number, reason: string) => {
      if (client.readyState === OPEN) client.close(code, reason);
    };

    const respond = (message: TRPCResponseMessage) => {
      if (client.readyState !== OPEN) return;
      let frame: string;
      try {
        frame = JSON.stringify(transformTRPCResponse(config, message));
      } catch (cause) {
        reportError(getTRPCErrorFromUnknown(cause), undefined);
        frame = JSON.stringify({
          id: message.id,
          ...(message.jsonrpc && { jsonrpc: message.jsonrpc }),
          error: {
            code: -32603,
            message: "Internal server error",
            data: { code: "INTERNAL_SERVER_ERROR", httpStatus: 500 },
          },
        });
      }
      client.send(frame);
    };
    /** Answers with the error shape; `ctx` is the request's own context when it got that far (none is kept). */
    const respondError = (
      request: { id: RequestId | null; jsonrpc?: "2.0" | undefined },
      cause: unknown,
      call: Call,
      ctx?: Context,
    ) => {
      const error = getTRPCErrorFromUnknown(cause);
      reportError(error, call.path);
      let shape;
      try {
        shape = getTRPCErrorShape({ config, error, ctx, ...call });
      } catch (formatError) {
        reportError(getTRPCErrorFromUnknown(formatError), call.path);
        shape = {
          code: -32603,
          message: "Internal server error",
          data: { code: "INTERNAL_SERVER_ERROR", httpStatus: 500 },
        };
      }
      respond({ id: request.id, jsonrpc: request.jsonrpc, error: shape } as TRPCResponseMessage);
    };

    /** Signs the connection in with its params, and starts watching its credential. */
    const establish = (params: () => Record<string, string | undefined> | null) => {
      established = (async () => {
        connectionParams = params();
        const stop = await options.signIn?.(req, connectionParams, close);
        if (client.readyState === OPEN) stopWatching = stop;
        else stop?.();
        return { ok: true as const };
      })().catch((cause: unknown) => {
        const error = getTRPCErrorFromUnknown(cause);
        respondError({ id: null }, error, NO_CALL);
        setImmediate(() => client.close());
        return { ok: false as const, error };
      });
    };

    const awaitingParams = new URL(req.url ?? "/", "http://localhost").search.includes(CONNECTION_PARAMS_QUERY);
    const paramsTimer = awaitingParams
      ? setTimeout(
          () => close(CLOSE_CODES.policyViolation, "connection params not received"),
          CONNECTION_PARAMS_TIMEOUT_MS,
        )
      : undefined;
    if (!awaitingParams) establish(() => null);

    async function handle(message: TRPCClientOutgoingMessage, batchIndex: number) {
      const { id, jsonrpc } = message;
      if (id === null) {
        respondError({ id, jsonrpc }, new TRPCError({ code: "PARSE_ERROR", message: "`id` is required" }), NO_CALL);
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
        input =
          input && typeof input === "object" && !Array.isArray(input)
            ? { ...input, lastEventId }
            : (input ?? { lastEventId });
      const call = { type, path, input };
      if (type === "subscription") {
        if (subscriptions.has(id)) {
          respondError({ id, jsonrpc }, new TRPCError({ code: "BAD_REQUEST", message: `Duplicate id ${id}` }), call);
          return;
        }
        if (subscriptions.size >= MAX_SUBSCRIPTIONS) {
          const tooMany = new TRPCError({
            code: "TOO_MANY_REQUESTS",
            message: `At most ${MAX_SUBSCRIPTIONS} subscriptions may be open on one connection.`,
          });
          respondError({ id, jsonrpc }, tooMany, call);
          return;
        }
      }

      // A subscription is registered before it starts, so a stop or a close during set-up ends it.
      const abort = new AbortController();
      let stopSubscription = () => abort.abort();
      if (type === "subscription") subscriptions.set(id, { stop: () => stopSubscription() });
      const stopped = () => {
        if (subscriptions.delete(id)) respond({ id, jsonrpc, result: { type: "stopped" } });
      };
      let ctx: Context | undefined;
      try {
        const connection = await established!;
        if (!connection.ok) throw connection.error;
        if (abort.signal.aborted) return stopped();
        // Each request is authorized with the credential's current state, as over HTTP.
        ctx = await options.createContext(req, connectionParams);
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
        // A live subscription is served from its sink, not iterated (tRPC's tracked face is for HTTP/SSE).
        const live = result instanceof TrackedLiveStream ? result.subscription : undefined;
        if (abort.signal.aborted || client.readyState !== OPEN) {
          // Never served: closed here (any kind of live stream), so what watches it lets go.
          liveStreamOf(result)?.close();
          return stopped();
        }
        if (live) {
          stopSubscription = () => {
            live.close();
            stopped();
          };
          let backlogSince = 0;
          // Made at the first event: an idle subscription keeps no bytes for it.
          let frameHead: Buffer | undefined;
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
          let started = false;
          const start = () => {
            if (started) return;
            started = true;
            respond({ id, jsonrpc, result: { type: "started" } });
          };
          live.attach({
            // "started" once the subscription listens, so that a client may rely on it.
            ready: start,
            event(position, event) {
              if (client.readyState !== OPEN) return;
              if (tooFarBehind()) {
                live.close();
                close(CLOSE_CODES.tryAgainLater, "too slow: resume with lastEventId");
                return;
              }
              frameHead ??= Buffer.from(trackedEventFrameHead(id, jsonrpc));
              const tail = frameTailOf(position, event);
              sendCoalesced(client, Buffer.concat([frameHead, tail], frameHead.length + tail.length));
              options.onEventDelivered?.();
            },
            end: stopped,
            // As tRPC's adapter answers a stream that fails: "started" (it sends that before
            // iterating, so even when the set-up fails), the error, then "stopped".
            fail(error) {
              subscriptions.delete(id);
              start();
              respondError({ id, jsonrpc }, toTRPCError(error), call);
              respond({ id, jsonrpc, result: { type: "stopped" } });
            },
          });
          return;
        }
        if (!result || typeof result !== "object" || !(Symbol.asyncIterator in result))
          throw new TRPCError({
            code: "INTERNAL_SERVER_ERROR",
            message: "Subscription did not return an async iterable",
          });
        respond({ id, jsonrpc, result: { type: "started" } });
        try {
          await iterate(result as AsyncIterable<unknown>, { id, jsonrpc }, abort.signal);
        } catch (cause) {
          // As tRPC's adapter answers a stream that fails while it runs: the error, then "stopped".
          respondError({ id, jsonrpc }, cause, call, ctx);
        }
        stopped();
      } catch (cause) {
        // A subscription stopped during its set-up ends quietly, as with tRPC's own adapter.
        if (type === "subscription" && abort.signal.aborted) return stopped();
        subscriptions.delete(id);
        respondError({ id, jsonrpc }, cause, call, ctx);
      }
    }

    /** A subscription that is not a LiveSubscription: iterate it, one frame per value. */
    async function iterate(
      result: AsyncIterable<unknown>,
      request: { id: RequestId; jsonrpc?: "2.0" | undefined },
      signal: AbortSignal,
    ) {
      const iterator = result[Symbol.asyncIterator]();
      // A fresh abort promise per value: racing every value against one promise that stays
      // pending for the subscription's life would keep each value reachable from it (a long-lived
      // subscription's memory would grow with every event).
      let abortWaiting: ((value: "aborted") => void) | undefined;
      const onAbort = () => abortWaiting?.("aborted");
      signal.addEventListener("abort", onAbort, { once: true });
      try {
        for (;;) {
          if (signal.aborted) return;
          const aborted = new Promise<"aborted">((resolve) => (abortWaiting = resolve));
          const next = await Promise.race([iterator.next(), aborted]);
          abortWaiting = undefined;
          if (next === "aborted" || next.done) return;
          const value: unknown = next.value;
          respond({
            ...request,
            result: isTrackedEnvelope(value)
              ? { type: "data", id: value[0], data: { id: value[0], data: value[1] } }
              : { type: "data", data: value },
          });
          options.onEventDelivered?.();
        }
      } finally {
        signal.removeEventListener("abort", onAbort);
        await iterator.return?.();
      }
    }

    /** One frame from the client; never throws. */
    function receive(raw: Buffer, isBinary: boolean) {
      const text = isBinary ? undefined : raw.toString();
      if (text === PING || text === PONG) {
        if (text === PING) client.send(PONG);
        return;
      }
      if (!established) {
        clearTimeout(paramsTimer);
        establish(() => {
          if (text === undefined)
            throw new TRPCError({ code: "PARSE_ERROR", message: "Malformed TRPCConnectionParamsMessage" });
          return connectionParamsOf(text);
        });
        return;
      }
      // An input may nest MAX_JSON_DEPTH deep, as over HTTP; the request around it (`{"params":
      // {"input": …}}`) and a batch's array do not count. Deeper is answered as malformed JSON is.
      if (text !== undefined && jsonNestsDeeperThan(text, MAX_JSON_DEPTH + 2 + (startsWithJsonArray(text) ? 1 : 0))) {
        respondError({ id: null }, new TRPCError({ code: "PARSE_ERROR", message: JSON_TOO_DEEP_MESSAGE }), NO_CALL);
        return;
      }
      let decoded: unknown;
      try {
        // tRPC's own decoder, so that a binary frame is refused in tRPC's words.
        decoded = jsonEncoder.decode(text ?? raw);
      } catch (cause) {
        respondError({ id: null }, new TRPCError({ code: "PARSE_ERROR", cause }), NO_CALL);
        return;
      }
      const messages = Array.isArray(decoded) ? decoded : [decoded];
      if (Array.isArray(decoded) && decoded.length > MAX_BATCH) {
        refuseBatch(decoded);
        return;
      }
      let parsed: TRPCClientOutgoingMessage[];
      try {
        parsed = messages.map((message) => parseTRPCMessage(message, config.transformer) as TRPCClientOutgoingMessage);
      } catch (cause) {
        respondError({ id: null }, new TRPCError({ code: "PARSE_ERROR", cause }), NO_CALL);
        return;
      }
      parsed.forEach((message, index) => {
        handle(message, index).catch((cause: unknown) => reportError(getTRPCErrorFromUnknown(cause), undefined));
      });
    }

    /** A batch above the limit: every request in it is refused before any input is parsed. */
    function refuseBatch(batch: unknown[]) {
      const error = new TRPCError({ code: "BAD_REQUEST", message: "Batch call exceeds maximum size" });
      let answered = false;
      for (const raw of batch) {
        const request = raw as { id?: unknown; method?: unknown; jsonrpc?: unknown } | null;
        if (!request || typeof request !== "object" || request.method === "subscription.stop") continue;
        if (typeof request.id !== "number" && typeof request.id !== "string") continue;
        respondError({ id: request.id, jsonrpc: request.jsonrpc === "2.0" ? "2.0" : undefined }, error, NO_CALL);
        answered = true;
      }
      if (!answered) respondError({ id: null }, error, NO_CALL);
    }

    client.on("message", (raw: Buffer, isBinary: boolean) => {
      const work = () => {
        try {
          receive(raw, isBinary);
        } catch (cause) {
          reportError(getTRPCErrorFromUnknown(cause), undefined);
        }
      };
      if (options.inRequestScope) options.inRequestScope(req, work);
      else work();
    });

    client.once("close", () => {
      clearTimeout(paramsTimer);
      stopWatching?.();
      for (const subscription of subscriptions.values()) subscription.stop();
      subscriptions.clear();
      openSubscriptions.delete(subscriptions);
    });
  });

  return {
    /** Subscriptions open on all connections. */
    subscriptionCount(): number {
      let count = 0;
      for (const subscriptions of openSubscriptions) count += subscriptions.size;
      return count;
    },
    /** Asks every client to reconnect (before a shutdown); tRPC clients resume their subscriptions. */
    broadcastReconnectNotification() {
      for (const client of options.wss.clients) if (client.readyState === OPEN) client.send(RECONNECT_NOTICE);
    },
  };
}
