// tRPC's WebSocket protocol (what @trpc/client's wsLink speaks), written down once: the host
// (trpc-websocket.ts) encodes its answers with it, and the tests' and the bench's bare sockets
// speak to the host with it. test/websocket-protocol.test.ts replays one scripted session
// against this host and against @trpc/server's own applyWSSHandler and compares the frames, so
// a tRPC upgrade that changes the protocol fails there.
//
// Client → server: the text frames "PING"/"PONG"; with `?connectionParams=1` on the URL, first
// `{"method":"connectionParams","data":{…strings}}`; then requests, alone or in arrays (batches):
// `{"id":1,"method":"query"|"mutation"|"subscription","params":{"path","input","lastEventId"?}}`
// and `{"id":1,"method":"subscription.stop"}`. Server → client: `{"id","result":{"type":"data",
// "data"}}` for queries and mutations; `started`, then `data` frames with the event's position as
// `result.id`, then `stopped` for subscriptions; `{"id","error":{message,code,data}}`; and
// `{"id":null,"method":"reconnect"}` before a shutdown. A request's `jsonrpc: "2.0"` is echoed.

export const PING = "PING";
export const PONG = "PONG";

/** The query parameter a client adds when its first message carries the connection params. */
export const CONNECTION_PARAMS_QUERY = "connectionParams=1";

/** Close codes the host uses. */
export const CLOSE_CODES = {
  /** The server shuts down; clients reconnect (to another process) and resume. */
  goingAway: 1001,
  /** Too slow to read: the client reconnects and resumes from its last event ("try again later"). */
  tryAgainLater: 1013,
  /** No connection params within the allowed time. */
  policyViolation: 1008,
  /** The credential the connection was opened with was revoked (logout, password change, deactivation). */
  revoked: 4401,
} as const;

export type RequestId = number | string;
export type ClientRequestMethod = "query" | "mutation" | "subscription";

/** What a client sends (for the tests' and the bench's bare sockets). */
export const clientFrames = {
  connectionParams: (data: Record<string, string>) => JSON.stringify({ method: "connectionParams", data }),
  request: (
    id: RequestId,
    method: ClientRequestMethod,
    path: string,
    options: { input?: unknown; lastEventId?: string; jsonrpc?: "2.0" } = {},
  ) =>
    JSON.stringify({
      id,
      ...(options.jsonrpc && { jsonrpc: options.jsonrpc }),
      method,
      params: {
        path,
        ...(options.input !== undefined && { input: options.input }),
        ...(options.lastEventId !== undefined && { lastEventId: options.lastEventId }),
      },
    }),
  stop: (id: RequestId) => JSON.stringify({ id, method: "subscription.stop" }),
};

/** The WebSocket URL of a server's /trpc endpoint, as wsLink opens it when it sends connection params. */
export function trpcSocketUrl(httpBaseUrl: string, options: { connectionParams?: boolean } = {}): string {
  const url = `${httpBaseUrl.replace(/\/+$/, "").replace(/^http/, "ws")}/trpc`;
  return options.connectionParams === false ? url : `${url}?${CONNECTION_PARAMS_QUERY}`;
}

export const RECONNECT_NOTICE = JSON.stringify({ id: null, method: "reconnect" });

/**
 * The frame of one tracked event for subscription `id` is its head (the subscription's few
 * bytes, made once per subscription) and its tail (the position and the event's JSON, made once
 * however many subscribers receive it): the same frame tRPC's adapter sends for
 * `tracked(position, event)`.
 */
export function trackedEventFrameHead(id: RequestId, jsonrpc: "2.0" | undefined): string {
  return `{"id":${JSON.stringify(id)},${jsonrpc ? '"jsonrpc":"2.0",' : ""}"result":{"type":"data","id":`;
}

export function trackedEventFrameTail(position: string, eventJson: string): string {
  const positionJson = JSON.stringify(position);
  return `${positionJson},"data":{"id":${positionJson},"data":${eventJson}}}}`;
}
