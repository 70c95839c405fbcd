// The typed client for TypeScript apps: queries and mutations over HTTP batching at /trpc,
// subscriptions over one WebSocket at /trpc (token sent as connection params) or over SSE.
//
//   const chat = createChatClient({ url: "https://chat.example.com", token });
//   const me = await chat.me.get.query();
//   chat.events.onUser.subscribe(undefined, { onData: ({ data }) => console.log(data.type) });
import {
  createTRPCClient,
  createWSClient,
  httpBatchLink,
  httpSubscriptionLink,
  splitLink,
  wsLink,
  type OperationLink,
  type TRPCClient,
  type TRPCWebSocketClient,
} from "@trpc/client";
import type { inferRouterInputs, inferRouterOutputs } from "@trpc/server";
import type { AppRouter, ErrorShape, EventType, LiveEvent } from "./generated/api.js";

export type { AppRouter, ErrorShape, EventType, LiveEvent };
/** A live event: a union discriminated by `type`, so `event.data` is typed once `type` is checked. */
export type StreamEvent = LiveEvent;
/** The `data` of one event type, e.g. `EventData<"message.created">["message"]`. */
export type EventData<T extends EventType> = Extract<LiveEvent, { type: T }>["data"];
/** Every procedure's input, e.g. `RouterInputs["messages"]["post"]`. */
export type RouterInputs = inferRouterInputs<AppRouter>;
/** Every procedure's output as the client receives it, e.g. `RouterOutputs["me"]["get"]`. */
export type RouterOutputs = inferRouterOutputs<AppRouter>;
export { TRPCClientError } from "@trpc/client";

/**
 * A WebSocket class: the browser's, Node 22's global, or the `ws` package's default export.
 * Structural, so neither the DOM library nor @types/ws is needed to compile against it.
 */
export type WebSocketClass = new (url: string, protocols?: string | string[]) => unknown;
/** An EventSource class: the browser's, or the `eventsource` package's. */
export type EventSourceClass = new (url: string, init?: { withCredentials?: boolean }) => unknown;

export type ChatClientOptions = {
  /** The service's base URL, e.g. http://localhost:3000 */
  url: string;
  /** A bearer token from sign-in or a personal access token. */
  token?: string | undefined;
  /** The WebSocket implementation outside browsers and Node 22+ (`ws`), and whether to connect lazily. */
  webSocket?: { WebSocket?: WebSocketClass | undefined; lazy?: boolean | undefined } | undefined;
  /**
   * How subscriptions travel: one WebSocket (default), or server-sent events over HTTP for
   * clients that cannot open a WebSocket (needs a global EventSource, or pass one).
   */
  subscriptions?: "websocket" | { sse: { EventSource?: EventSourceClass | undefined } } | undefined;
};

export type ChatClient = TRPCClient<AppRouter> & { close(): void };

// tRPC types its options with the DOM's classes; the structural types above accept the same
// implementations without asking apps for the DOM library or casts.
type TRPCWebSocketOption = Parameters<typeof createWSClient>[0]["WebSocket"];
type TRPCEventSourceOption = Parameters<typeof httpSubscriptionLink>[0]["EventSource"];

export function createChatClient(options: ChatClientOptions): ChatClient {
  const base = options.url.replace(/\/+$/, "");
  const authHeaders = (): Record<string, string> => (options.token ? { Authorization: `Bearer ${options.token}` } : {});
  let wsClient: TRPCWebSocketClient | undefined;
  const getWsClient = () =>
    (wsClient ??= createWSClient({
      url: `${base.replace(/^http/, "ws")}/trpc`,
      connectionParams: () => (options.token ? { token: options.token } : {}),
      WebSocket: options.webSocket?.WebSocket as TRPCWebSocketOption,
      lazy: { enabled: options.webSocket?.lazy ?? true, closeMs: 5_000 },
    }));

  const client = createTRPCClient<AppRouter>({
    links: [
      splitLink({
        condition: (operation) => operation.type === "subscription",
        true:
          typeof options.subscriptions === "object"
            ? httpSubscriptionLink({
                url: `${base}/trpc`,
                connectionParams: () => (options.token ? { token: options.token } : {}),
                EventSource: options.subscriptions.sse.EventSource as TRPCEventSourceOption,
              })
            : // Built at the first subscription, so HTTP-only use needs no WebSocket implementation.
              (runtime) => {
                let link: OperationLink<AppRouter> | undefined;
                return (operation) => (link ??= wsLink<AppRouter>({ client: getWsClient() })(runtime))(operation);
              },
        false: httpBatchLink({ url: `${base}/trpc`, headers: authHeaders }),
      }),
    ],
  });
  const close = () => wsClient?.close();
  // The tRPC client is a proxy that turns every property into a procedure path, so `close`
  // is answered by a proxy of our own in front of it.
  return new Proxy(client, {
    get: (target, property, receiver) => (property === "close" ? close : Reflect.get(target, property, receiver)),
  }) as ChatClient;
}
