// The typed client for TypeScript apps: queries and mutations over HTTP batching at /trpc,
// subscriptions over one WebSocket at /trpc (token sent as connection params).
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
import type { AppRouter } from "../routers/index.ts";

export type { AppRouter };
/** A live event: a union discriminated by `type`, so `event.data` is typed once `type` is checked. */
export type { StreamEvent } from "../server/events/streams.ts";
export type { EventType, LiveEvent } from "../server/events/catalog.ts";
export type RouterInputs = inferRouterInputs<AppRouter>;
export type RouterOutputs = inferRouterOutputs<AppRouter>;
export { TRPCClientError } from "@trpc/client";

export type ChatClientOptions = {
  /** The service's base URL, e.g. http://localhost:3000 */
  url: string;
  /** A bearer token from sign-in or a personal access token. */
  token?: string;
  /** Overrides for the WebSocket client (e.g. a WebSocket implementation outside browsers and Node 22+). */
  webSocket?: { WebSocket?: typeof globalThis.WebSocket; lazy?: boolean };
  /**
   * How subscriptions travel: one WebSocket (default), or server-sent events over HTTP for
   * clients that cannot open a WebSocket (needs a global EventSource, or pass one).
   */
  subscriptions?: "websocket" | { sse: { EventSource?: typeof globalThis.EventSource } };
};

export type ChatClient = TRPCClient<AppRouter> & { close(): void };

export function createChatClient(options: ChatClientOptions): ChatClient {
  const base = options.url.replace(/\/+$/, "");
  const authHeaders = (): Record<string, string> => (options.token ? { Authorization: `Bearer ${options.token}` } : {});
  let wsClient: TRPCWebSocketClient | undefined;
  const getWsClient = () =>
    (wsClient ??= createWSClient({
      url: `${base.replace(/^http/, "ws")}/trpc`,
      connectionParams: () => (options.token ? { token: options.token } : {}),
      WebSocket: options.webSocket?.WebSocket,
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
                EventSource: options.subscriptions.sse.EventSource,
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
