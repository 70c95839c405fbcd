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
import { jsonEncoder } from "@trpc/server/adapters/ws";
import { parseConnectionParamsFromUnknown } from "@trpc/server/http";
import { parseTRPCMessage, type TRPCClientOutgoingMessage, type TRPCResponseMessage } from "@trpc/server/rpc";
import type { WebSocket, WebSocketServer } from "ws";
import type { LiveSubscription } from "../events/live-subscription.ts";
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

type ConnectionParams = Record<string, string | undefined> | null;

/** What a connection's sign-in may do when its credential is revoked. */
export type Revocable = {
  /** Ends every subscription of the connection with `error`, then closes the connection with `code` and `reason`. */
  revoke(error: unknown, code: number, reason: string): void;
};

type Options<TRouter extends AnyTRPCRouter, TPeer> = {
  wss: WebSocketServer;
  router: TRouter;
  /**
   * What the connection's requests need of its upgrade request (its address, say), taken once
   * when it opens: the request itself is not kept for the connection's life.
   */
  peerOf(req: IncomingMessage): TPeer;
  /** The context of one request: called for every query, mutation and subscription. */
  createContext(peer: TPeer, connectionParams: ConnectionParams): Promise<inferRouterContext<TRouter>>;
  /**
   * Called once a connection's params are known: sign the connection itself in, watch its
   * credential, and call `connection.revoke` when it is revoked. Resolves to what to do when the
   * connection closes. A failure (the database away) is answered as a context that cannot be made.
   */
  signIn?(peer: TPeer, connectionParams: ConnectionParams, connection: Revocable): Promise<(() => void) | void>;
  keepAlive: { pingMs: number; pongWaitMs: number };
  onError?(error: TRPCError, path: string | undefined): void;
  /** Runs the handling of a frame of the connection of `peer` (the request log's scope). */
  inRequestScope?(peer: TPeer, work: () => void): void;
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

/** What every connection of one host shares. */
type Host = {
  options: Options<AnyTRPCRouter, unknown>;
  router: AnyTRPCRouter;
  config: AnyTRPCRouter["_def"]["_config"];
  reportError(error: TRPCError, path: string | undefined): void;
  /** The host's open connections (the metrics count their subscriptions; the keep-alive walks them). */
  connections: Set<Connection>;
  keepAlive: KeepAlive;
};

/**
 * tRPC's keep-alive, as its adapter keeps it: a connection the client has said nothing on for
 * `pingMs` is sent PING, and one that then stays silent for `pongWaitMs` is terminated. One
 * timer walks every connection of the host (at most every second) instead of two timers and
 * five functions per connection, rearmed on every message: a connection keeps two numbers.
 */
class KeepAlive {
  private timer: NodeJS.Timeout | undefined;
  private readonly everyMs: number;

  constructor(
    private readonly connections: Set<Connection>,
    private readonly pingMs: number,
    private readonly pongWaitMs: number,
  ) {
    this.everyMs = Math.max(10, Math.min(1_000, Math.floor(Math.min(pingMs, pongWaitMs) / 4)));
  }

  /** A connection opened: the walk runs while any is open. */
  opened(): void {
    this.timer ??= setInterval(() => this.walk(), this.everyMs).unref();
  }

  /** A connection closed. */
  closed(): void {
    if (this.connections.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private walk(): void {
    const now = Date.now();
    for (const connection of this.connections) {
      if (connection.pingedAt > 0) {
        if (now - connection.pingedAt >= this.pongWaitMs) connection.client.terminate();
      } else if (now - connection.heardAt >= this.pingMs && connection.client.readyState === OPEN) {
        connection.pingedAt = now;
        connection.client.send(PING);
      }
    }
  }
}

type Request = { id: RequestId; jsonrpc?: "2.0" | undefined };

/**
 * A subscription of a connection, from its request until it ends: `stop()` ends it (the client's
 * stop, the connection's close). Once its procedure answered a live subscription, it is that
 * subscription's sink. (Classes rather than closures per connection and per subscription: an
 * idle connection's memory is mostly what it keeps, and a method is kept once per process.)
 */
class SocketSubscription {
  /** Stopped before it was served, or while its stream is iterated. */
  stopRequested = false;
  /**
   * Only while a stream that is not a LiveSubscription is iterated: what ends the iteration.
   * (No signal is kept per subscription otherwise: a stop during set-up is seen by the door,
   * which closes what the procedure returned, and a served one is closed by `stop` itself.)
   */
  private iteration: AbortController | undefined;
  private live: LiveSubscription | undefined;
  /** What its procedure returned when that is a live stream of any kind: what a revocation fails. */
  stream: Pick<LiveSubscription, "fail"> | undefined;
  /** Made at the first event: an idle subscription keeps no bytes for it. */
  private frameHead: Buffer | undefined;
  private backlogSince = 0;
  private started = false;

  constructor(
    private readonly connection: Connection,
    private readonly request: Request,
    private readonly call: Call,
  ) {}

  stop(): void {
    if (!this.live) {
      this.stopRequested = true;
      this.iteration?.abort();
      return;
    }
    this.live.close();
    this.stopped();
  }

  /** The signal that ends the iteration of a stream that is not a LiveSubscription (aborted by `stop`). */
  iterationSignal(): AbortSignal {
    this.iteration = new AbortController();
    if (this.stopRequested) this.iteration.abort();
    return this.iteration.signal;
  }

  /** Answers "stopped", once, if the subscription was still registered. */
  stopped(): void {
    if (this.connection.subscriptions.delete(this.request.id))
      this.connection.respond({ ...this.request, result: { type: "stopped" } });
  }

  /** Serves `live` from here on: its events are written to the socket as frames. */
  serve(live: LiveSubscription): void {
    this.live = live;
    live.attach(this);
  }

  /** Ends the subscription with `error` (its credential was revoked), as its stream answers a failure. */
  revoke(error: unknown): void {
    if (this.stream) this.stream.fail(error);
    else this.stop();
  }

  /** "started" once the subscription listens, so that a client may rely on it. */
  ready(): void {
    if (this.started) return;
    this.started = true;
    this.connection.respond({ ...this.request, result: { type: "started" } });
  }

  event(position: string, event: StreamEvent): void {
    const { client } = this.connection;
    if (client.readyState !== OPEN) return;
    if (this.tooFarBehind()) {
      this.live!.close();
      this.connection.close(CLOSE_CODES.tryAgainLater, "too slow: resume with lastEventId");
      return;
    }
    this.frameHead ??= Buffer.from(trackedEventFrameHead(this.request.id, this.request.jsonrpc));
    const tail = frameTailOf(position, event);
    sendCoalesced(client, Buffer.concat([this.frameHead, tail], this.frameHead.length + tail.length));
    this.connection.host.options.onEventDelivered?.();
  }

  end(): void {
    this.stopped();
  }

  /**
   * As tRPC's adapter answers a stream that fails: "started" (it sends that before iterating,
   * so even when the set-up fails), the error, then "stopped".
   */
  fail(error: unknown): void {
    this.connection.subscriptions.delete(this.request.id);
    this.ready();
    this.connection.respondError(this.request, toTRPCError(error), this.call);
    this.connection.respond({ ...this.request, result: { type: "stopped" } });
  }

  private tooFarBehind(): boolean {
    const buffered = this.connection.client.bufferedAmount;
    if (buffered <= MAX_BUFFERED_BYTES) {
      this.backlogSince = 0;
      return false;
    }
    const now = Date.now();
    this.backlogSince ||= now;
    return buffered > HARD_MAX_BUFFERED_BYTES || now - this.backlogSince > SLOW_GRACE_MS;
  }
}

type Established = { ok: true } | { ok: false; error: TRPCError };

/**
 * One WebSocket connection: its sign-in, its requests and its subscriptions. Its socket's
 * listeners are methods bound once (`ws` calls them with the socket as `this`).
 */
class Connection implements Revocable {
  /** Subscriptions by request id. */
  readonly subscriptions = new Map<RequestId, SocketSubscription>();
  private connectionParams: ConnectionParams = null;
  /** Once the connection's params are known: its sign-in, then how it went. */
  private established: Promise<Established> | Established | undefined;
  private stopWatching: (() => void) | void = undefined;
  private paramsTimer: NodeJS.Timeout | undefined;
  /** When the client last sent a frame, and when a PING went unanswered since (KeepAlive). */
  heardAt = Date.now();
  pingedAt = 0;

  constructor(
    readonly host: Host,
    readonly client: WebSocket,
    private readonly peer: unknown,
    req: IncomingMessage,
  ) {
    host.connections.add(this);
    host.keepAlive.opened();
    // Protocol errors (a bad frame, a frame above maxPayload, invalid UTF-8): `ws` closes the
    // connection itself; without this listener the error would end the process. They are the
    // client's (reported as a bad request, not as a server failure with a stack).
    client.on("error", this.onSocketError.bind(this));
    client.on("message", this.onMessage.bind(this));
    // `on`, not `once` (which wraps the listener in one more function and object per connection): a socket closes once.
    client.on("close", this.closed.bind(this));

    const awaitingParams = new URL(req.url ?? "/", "http://localhost").search.includes(CONNECTION_PARAMS_QUERY);
    if (awaitingParams) {
      this.paramsTimer = setTimeout(
        () => this.close(CLOSE_CODES.policyViolation, "connection params not received"),
        CONNECTION_PARAMS_TIMEOUT_MS,
      );
    } else {
      this.establish(() => null);
    }
  }

  close(code: number, reason: string): void {
    if (this.client.readyState === OPEN) this.client.close(code, reason);
  }

  revoke(error: unknown, code: number, reason: string): void {
    for (const subscription of [...this.subscriptions.values()]) subscription.revoke(error);
    // After the subscriptions' last frames (an iterated stream answers in promise jobs).
    setImmediate(() => this.close(code, reason));
  }

  private onSocketError(cause: Error): void {
    this.host.reportError(
      new TRPCError({ code: "BAD_REQUEST", message: "WebSocket protocol error", cause }),
      undefined,
    );
  }

  private onMessage(raw: Buffer, isBinary: boolean): void {
    this.heardAt = Date.now();
    this.pingedAt = 0;
    const { inRequestScope } = this.host.options;
    if (inRequestScope) inRequestScope(this.peer, () => this.receiveSafely(raw, isBinary));
    else this.receiveSafely(raw, isBinary);
  }

  respond(message: TRPCResponseMessage): void {
    if (this.client.readyState !== OPEN) return;
    let frame: string;
    try {
      frame = JSON.stringify(transformTRPCResponse(this.host.config, message));
    } catch (cause) {
      this.host.reportError(getTRPCErrorFromUnknown(cause), undefined);
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
    this.client.send(frame);
  }

  /** Answers with the error shape; `ctx` is the request's own context when it got that far (none is kept). */
  respondError(
    request: { id: RequestId | null; jsonrpc?: "2.0" | undefined },
    cause: unknown,
    call: Call,
    ctx?: unknown,
  ): void {
    const error = getTRPCErrorFromUnknown(cause);
    this.host.reportError(error, call.path);
    let shape;
    try {
      shape = getTRPCErrorShape({ config: this.host.config, error, ctx, ...call });
    } catch (formatError) {
      this.host.reportError(getTRPCErrorFromUnknown(formatError), call.path);
      shape = {
        code: -32603,
        message: "Internal server error",
        data: { code: "INTERNAL_SERVER_ERROR", httpStatus: 500 },
      };
    }
    this.respond({ id: request.id, jsonrpc: request.jsonrpc, error: shape } as TRPCResponseMessage);
  }

  /** Signs the connection in with its params, and starts watching its credential. */
  private establish(params: () => ConnectionParams): void {
    this.established = this.signIn(params)
      .catch((cause: unknown) => {
        const error = getTRPCErrorFromUnknown(cause);
        this.respondError({ id: null }, error, NO_CALL);
        setImmediate(() => this.client.close());
        return { ok: false as const, error };
      })
      // Settled: kept as the outcome, not as a promise (which would keep the scope it was made in).
      .then((outcome: Established) => (this.established = outcome));
  }

  private async signIn(params: () => ConnectionParams): Promise<Established> {
    this.connectionParams = params();
    const stop = await this.host.options.signIn?.(this.peer, this.connectionParams, this);
    if (this.client.readyState === OPEN) this.stopWatching = stop;
    else stop?.();
    return { ok: true as const };
  }

  private async handle(message: TRPCClientOutgoingMessage, batchIndex: number): Promise<void> {
    const { id, jsonrpc } = message;
    if (id === null) {
      this.respondError({ id, jsonrpc }, new TRPCError({ code: "PARSE_ERROR", message: "`id` is required" }), NO_CALL);
      return;
    }
    if (message.method === "subscription.stop") {
      this.subscriptions.get(id)?.stop();
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
    const request: Request = { id, jsonrpc };
    if (type === "subscription") {
      if (this.subscriptions.has(id)) {
        this.respondError(request, new TRPCError({ code: "BAD_REQUEST", message: `Duplicate id ${id}` }), call);
        return;
      }
      if (this.subscriptions.size >= MAX_SUBSCRIPTIONS) {
        const tooMany = new TRPCError({
          code: "TOO_MANY_REQUESTS",
          message: `At most ${MAX_SUBSCRIPTIONS} subscriptions may be open on one connection.`,
        });
        this.respondError(request, tooMany, call);
        return;
      }
    }

    // A subscription is registered before it starts, so a stop or a close during set-up ends it.
    const subscription = type === "subscription" ? new SocketSubscription(this, request, call) : undefined;
    if (subscription) this.subscriptions.set(id, subscription);
    let ctx: unknown;
    try {
      const connection = await this.established!;
      if (!connection.ok) throw connection.error;
      if (subscription?.stopRequested) return subscription.stopped();
      // Each request is authorized with the credential's current state, as over HTTP.
      ctx = await this.host.options.createContext(this.peer, this.connectionParams);
      if (subscription?.stopRequested) return subscription.stopped();
      const result = await callTRPCProcedure({
        router: this.host.router,
        path,
        getRawInput: async () => input,
        ctx,
        type,
        signal: undefined,
        batchIndex,
      });
      if (!subscription) {
        this.respond({ id, jsonrpc, result: { type: "data", data: result } });
        return;
      }
      // A live subscription is served from its sink, not iterated (tRPC's tracked face is for HTTP/SSE).
      const live = result instanceof TrackedLiveStream ? result.subscription : undefined;
      const stream = liveStreamOf(result);
      if (subscription.stopRequested || this.client.readyState !== OPEN) {
        // Never served: closed here (any kind of live stream), so what watches it lets go.
        stream?.close();
        return subscription?.stopped();
      }
      subscription.stream = stream;
      if (live) {
        subscription.serve(live);
        return;
      }
      if (!result || typeof result !== "object" || !(Symbol.asyncIterator in result))
        throw new TRPCError({
          code: "INTERNAL_SERVER_ERROR",
          message: "Subscription did not return an async iterable",
        });
      this.respond({ id, jsonrpc, result: { type: "started" } });
      try {
        await this.iterate(result as AsyncIterable<unknown>, request, subscription.iterationSignal());
      } catch (cause) {
        // As tRPC's adapter answers a stream that fails while it runs: the error, then "stopped".
        this.respondError(request, cause, call, ctx);
      }
      subscription.stopped();
    } catch (cause) {
      // A subscription stopped during its set-up ends quietly, as with tRPC's own adapter.
      if (subscription?.stopRequested) return subscription.stopped();
      this.subscriptions.delete(id);
      this.respondError(request, cause, call, ctx);
    }
  }

  /** A subscription that is not a LiveSubscription: iterate it, one frame per value. */
  private async iterate(result: AsyncIterable<unknown>, request: Request, signal: AbortSignal): Promise<void> {
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
        this.respond({
          ...request,
          result: isTrackedEnvelope(value)
            ? { type: "data", id: value[0], data: { id: value[0], data: value[1] } }
            : { type: "data", data: value },
        });
        this.host.options.onEventDelivered?.();
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      await iterator.return?.();
    }
  }

  /** One frame from the client; never throws. */
  private receiveSafely(raw: Buffer, isBinary: boolean): void {
    try {
      this.receive(raw, isBinary);
    } catch (cause) {
      this.host.reportError(getTRPCErrorFromUnknown(cause), undefined);
    }
  }

  private receive(raw: Buffer, isBinary: boolean): void {
    const text = isBinary ? undefined : raw.toString();
    if (text === PING || text === PONG) {
      if (text === PING) this.client.send(PONG);
      return;
    }
    if (!this.established) {
      clearTimeout(this.paramsTimer);
      this.paramsTimer = undefined;
      this.establish(() => {
        if (text === undefined)
          throw new TRPCError({ code: "PARSE_ERROR", message: "Malformed TRPCConnectionParamsMessage" });
        return connectionParamsOf(text);
      });
      return;
    }
    // An input may nest MAX_JSON_DEPTH deep, as over HTTP; the request around it (`{"params":
    // {"input": …}}`) and a batch's array do not count. Deeper is answered as malformed JSON is.
    if (text !== undefined && jsonNestsDeeperThan(text, MAX_JSON_DEPTH + 2 + (startsWithJsonArray(text) ? 1 : 0))) {
      this.respondError({ id: null }, new TRPCError({ code: "PARSE_ERROR", message: JSON_TOO_DEEP_MESSAGE }), NO_CALL);
      return;
    }
    let decoded: unknown;
    try {
      // tRPC's own decoder, so that a binary frame is refused in tRPC's words.
      decoded = jsonEncoder.decode(text ?? raw);
    } catch (cause) {
      this.respondError({ id: null }, new TRPCError({ code: "PARSE_ERROR", cause }), NO_CALL);
      return;
    }
    const messages = Array.isArray(decoded) ? decoded : [decoded];
    if (Array.isArray(decoded) && decoded.length > MAX_BATCH) {
      this.refuseBatch(decoded);
      return;
    }
    let parsed: TRPCClientOutgoingMessage[];
    try {
      parsed = messages.map(
        (message) => parseTRPCMessage(message, this.host.config.transformer) as TRPCClientOutgoingMessage,
      );
    } catch (cause) {
      this.respondError({ id: null }, new TRPCError({ code: "PARSE_ERROR", cause }), NO_CALL);
      return;
    }
    parsed.forEach((message, index) => {
      this.handle(message, index).catch((cause: unknown) =>
        this.host.reportError(getTRPCErrorFromUnknown(cause), undefined),
      );
    });
  }

  /** A batch above the limit: every request in it is refused before any input is parsed. */
  private refuseBatch(batch: unknown[]): void {
    const error = new TRPCError({ code: "BAD_REQUEST", message: "Batch call exceeds maximum size" });
    let answered = false;
    for (const raw of batch) {
      const request = raw as { id?: unknown; method?: unknown; jsonrpc?: unknown } | null;
      if (!request || typeof request !== "object" || request.method === "subscription.stop") continue;
      if (typeof request.id !== "number" && typeof request.id !== "string") continue;
      this.respondError({ id: request.id, jsonrpc: request.jsonrpc === "2.0" ? "2.0" : undefined }, error, NO_CALL);
      answered = true;
    }
    if (!answered) this.respondError({ id: null }, error, NO_CALL);
  }

  private closed(): void {
    clearTimeout(this.paramsTimer);
    this.stopWatching?.();
    for (const subscription of this.subscriptions.values()) subscription.stop();
    this.subscriptions.clear();
    this.host.connections.delete(this);
    this.host.keepAlive.closed();
  }
}

export function serveTrpcOverWebSocket<TRouter extends AnyTRPCRouter, TPeer>(options: Options<TRouter, TPeer>) {
  const connections = new Set<Connection>();
  const host: Host = {
    options: options as unknown as Options<AnyTRPCRouter, unknown>,
    router: options.router,
    config: options.router._def._config,
    reportError(error, path) {
      try {
        options.onError?.(error, path);
      } catch {
        // A failing error report must not take the connection (or the process) with it.
      }
    },
    connections,
    keepAlive: new KeepAlive(connections, options.keepAlive.pingMs, options.keepAlive.pongWaitMs),
  };

  // A server-level failure: reported, never thrown into the process. (A bad handshake is
  // answered 400 by `ws` itself.)
  options.wss.on("error", (cause) => host.reportError(getTRPCErrorFromUnknown(cause), undefined));

  options.wss.on(
    "connection",
    (client: WebSocket, req: IncomingMessage) => void new Connection(host, client, options.peerOf(req), req),
  );

  return {
    /** Subscriptions open on all connections. */
    subscriptionCount(): number {
      let count = 0;
      for (const connection of host.connections) count += connection.subscriptions.size;
      return count;
    },
    /** Asks every client to reconnect (before a shutdown); tRPC clients resume their subscriptions. */
    broadcastReconnectNotification() {
      for (const client of options.wss.clients) if (client.readyState === OPEN) client.send(RECONNECT_NOTICE);
    },
  };
}
