// GET /api/v1/asyncapi.json: the live events for those who do not use the typed client, as an
// AsyncAPI 3.0 document generated from what the server runs: the event schemas are the zod
// union subscribers' events are typed by (server/events/catalog.ts), the channels are the
// router's subscription procedures with their input schemas, and the frames are those of the
// two doors, tRPC's WebSocket protocol (trpc-ws-protocol.ts) and its SSE stream. A new event
// type or subscription that is not described here fails test/asyncapi.test.ts.
import type { AnyTRPCProcedure } from "@trpc/server";
import { z } from "zod";
import { liveEvent, type EventType } from "../events/catalog.ts";
import { REPLAY_LIMIT } from "../events/streams.ts";
import { presenceChangedEvent } from "../records/presence.ts";
import { CLOSE_CODES } from "./trpc-ws-protocol.ts";

type Json = Record<string, unknown>;

/** One line on each event type, the message's summary (its payload comes from the zod schema). */
const EVENT_SUMMARIES: Record<EventType, string> = {
  "message.created": "A message was posted (thread replies included).",
  "message.updated":
    "A message was edited: the record in the subscriber's reader view (its translation is pending again), reactions without `me`.",
  "message.deleted":
    "A message was deleted (a thread parent with replies stays as a tombstone; when it goes with its last reply, a second event names it).",
  "reaction.added": "Someone reacted to a message; `count` is the emoji's count after it.",
  "reaction.removed": "Someone took a reaction back; `count` is the emoji's count after it (0: gone).",
  "read.updated":
    "On the reader's own stream: their read position in a channel or conversation moved; the counts after it, for every device's badge.",
  "translation.ready": "A message's translation into the subscriber's language is stored, or was given up on.",
  typing: "Someone is typing. Ephemeral: never stored or replayed; `id` is the subscription's current position.",
  "user.updated": "The subscriber's own account changed.",
  "workspace.joined": "The subscriber became a member of the workspace (created it, joined it, accepted an invite).",
  "conversation.created": "A direct conversation was opened with the subscriber.",
  "member.joined": "Someone joined the workspace.",
  "member.updated": "A member's role or profile changed.",
  "member.left": "A member left or was removed from the workspace.",
  "channel.created": "A channel was created.",
  "channel.updated": "A channel changed.",
  "channel.deleted": "A channel was deleted.",
  "channel.member_joined": "Someone was added to a channel (a channel's creator is announced as its first member).",
  "channel.member_left": "Someone left or was removed from a channel.",
  "room.expiring": "The temporary room closes in 10 minutes (an extension moves it, and a new warning comes).",
  "room.expired": "The temporary room closed: its messages and files are gone. The last event of the subscription.",
};

const MESSAGE_EVENTS: EventType[] = [
  "message.created",
  "message.updated",
  "message.deleted",
  "reaction.added",
  "reaction.removed",
  "translation.ready",
];

/**
 * Events of a state (not history): no position, never stored or replayed. A subscription that
 * delivers them is not resumable: a client that reconnects subscribes again and reads the first ones.
 */
const STATE_EVENTS = {
  "presence.changed": {
    schema: presenceChangedEvent,
    summary: "A watched user's presence now: first one per visible user, then one per change (docs/presence.md).",
  },
} as const;
type StateEventType = keyof typeof STATE_EVENTS;

/** Each subscription procedure: what it follows and which events it delivers (docs/realtime.md). */
const SUBSCRIPTIONS: Record<string, { summary: string; events: (EventType | StateEventType)[]; state?: true }> = {
  "events.onUser": {
    summary:
      "Everything the user can see: their account, their own read positions, their workspaces' membership and channel events, messages in their channels and conversations. Temporary rooms are not part of it (rooms.onRoom).",
    events: [
      "user.updated",
      "read.updated",
      "workspace.joined",
      "conversation.created",
      ...MESSAGE_EVENTS,
      "member.joined",
      "member.updated",
      "member.left",
      "channel.created",
      "channel.updated",
      "channel.deleted",
      "channel.member_joined",
      "channel.member_left",
    ],
  },
  "messages.onChannel": {
    summary:
      "One channel's messages. Ends (after that event) when the subscriber loses access: `channel.member_left` or `member.left` of them, `channel.deleted`.",
    events: [...MESSAGE_EVENTS, "typing", "channel.member_left", "member.left", "channel.deleted"],
  },
  "direct.onConversation": {
    summary: "One direct conversation's messages (participants only).",
    events: [...MESSAGE_EVENTS, "typing"],
  },
  "rooms.onRoom": {
    summary: "One temporary room's messages, for its members. Ends with `room.expired`.",
    events: [...MESSAGE_EVENTS, "room.expiring", "room.expired"],
  },
  "presence.onUsers": {
    summary:
      "The presence of the users listed (1 to 500 ids): first one `presence.changed` per listed user the caller may see (their state now: the caller, people who share a workspace or a direct conversation with them), then one each time their `status`, `status_text` or `status_emoji` changes, from any server process, within 2 s; at most one per user per second (the last state wins). Ids the caller may not see are ignored, and a user who stops sharing a workspace or conversation with the caller gets no more events. A signed-in connection is also what makes its user `online`.",
    events: ["presence.changed"],
    state: true,
  },
};

const STATE_RULES =
  "Presence is a state, not history: its events have no position and this subscription is not resumable. A client that reconnects subscribes again and reads the first events.";

const RESUME_RULES = `Every event has an \`id\`, its **position**. A client that reconnects passes the last position it saw as \`lastEventId\` and receives every event after it that it may see, in order, then the live ones, each once. Events are kept for at least an hour. A resume that cannot be exact (more than ${REPLAY_LIMIT} events missed, a position older than what is kept, or newer than any event here) fails with \`PRECONDITION_FAILED\` (412): reload what you show over REST, then subscribe again without \`lastEventId\`. A \`lastEventId\` that is not a position (digits) fails with \`UNPROCESSABLE_CONTENT\` (422).`;

const DESCRIPTION = `Live events of the chat service, for any language. Two doors serve the same subscriptions:

- **WebSocket** at \`/trpc?connectionParams=1\` (tRPC v11's WebSocket protocol): the first frame signs in with \`{"method":"connectionParams","data":{"token":"<token>"}}\`; then each subscription is a \`subscription\` request with a request id of your choosing, answered by \`started\`, data frames (one per event), and \`stopped\` or an error. Many subscriptions share one connection. Answer the text frame \`PING\` with \`PONG\` (the server sends it after 30 s of silence and closes a connection that stays silent 5 s more).
- **Server-sent events** at \`GET /trpc/<subscription>?input=<JSON>\` (tRPC's httpSubscriptionLink format): one subscription per request, signed in with \`connectionParams={"token":"<token>"}\` in the query, an \`Authorization: Bearer\` header or the web session cookie.

${RESUME_RULES}

Close codes (WebSocket): ${CLOSE_CODES.goingAway} server shutting down (reconnect and resume), ${CLOSE_CODES.policyViolation} no connection params within 10 s, 1009 frame above 1 MiB, ${CLOSE_CODES.tryAgainLater} too slow to read (reconnect and resume), ${CLOSE_CODES.revoked} the token was revoked (sign in again). docs/live-events.md shows a client for each door.`;

const requestId = { description: "The request id the client chose", oneOf: [{ type: "integer" }, { type: "string" }] };
const position = { type: "string", pattern: "^\\d{1,18}$", description: "The event's position (its `id`)" };

/** The error shape of every door (server/trpc.ts errorFormatter). */
const TRPC_ERROR = {
  type: "object",
  required: ["message", "code", "data"],
  properties: {
    message: { type: "string" },
    code: { type: "integer", description: "JSON-RPC code, e.g. -32001 UNAUTHORIZED, -32004 NOT_FOUND" },
    data: {
      type: "object",
      required: ["code", "httpStatus"],
      properties: {
        code: {
          type: "string",
          examples: ["UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND", "PRECONDITION_FAILED", "UNPROCESSABLE_CONTENT"],
        },
        httpStatus: { type: "integer" },
        path: { type: "string" },
        errors: {
          description: "Field errors of a 422, keyed like the REST body's `errors`",
          oneOf: [
            { type: "object", additionalProperties: { type: "array", items: { type: "string" } } },
            { type: "null" },
          ],
        },
        retryAfter: { oneOf: [{ type: "integer" }, { type: "null" }] },
      },
    },
  },
};

const obj = (properties: Json, required = Object.keys(properties)) => ({ type: "object", required, properties });
const ref = (pointer: string) => ({ $ref: pointer });
const schemaRef = (name: string) => ref(`#/components/schemas/${name}`);

/** "message.created" → "MessageCreatedEvent"; "messages.onChannel" → "MessagesOnChannelInput". */
const pascal = (text: string) =>
  text
    .split(/[._]/)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join("");

/**
 * Converts a zod schema to JSON Schema (draft 7, the base of AsyncAPI's schema format) and
 * moves its definitions (records with a meta id, such as Message) into components/schemas,
 * where a `$ref` can reach them from anywhere in the document.
 */
function toComponentSchema(schema: z.ZodType, io: "input" | "output", name: string, components: Json): Json {
  const {
    $schema: _dialect,
    definitions,
    ...json
  } = z.toJSONSchema(schema, {
    target: "draft-7",
    io,
    unrepresentable: "any",
  }) as Json & { definitions?: Record<string, unknown> };
  // Input and output forms of one record may differ (a transform): inputs get names of their own.
  const nameOf = (key: string) => (key.startsWith("__schema") ? `${name}${key}` : io === "input" ? `${key}Input` : key);
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (!value || typeof value !== "object") return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, inner]) => [
        key,
        key !== "$ref" || typeof inner !== "string"
          ? rewrite(inner)
          : inner === "#" // the schema itself, when it is recursive
            ? `#/components/schemas/${name}`
            : inner.startsWith("#/definitions/")
              ? `#/components/schemas/${nameOf(inner.slice("#/definitions/".length))}`
              : inner,
      ]),
    );
  };
  for (const [key, definition] of Object.entries(definitions ?? {})) {
    const target = nameOf(key);
    const lifted = rewrite(definition);
    if (target in components && JSON.stringify(components[target]) !== JSON.stringify(lifted))
      throw new Error(`asyncapi: two different schemas named ${target}`);
    components[target] = lifted;
  }
  components[name] = rewrite(json);
  return schemaRef(name);
}

/** The subscription procedures of a router, by path. */
function subscriptionProcedures(router: { _def: { procedures: object } }): Map<string, AnyTRPCProcedure> {
  const found = new Map<string, AnyTRPCProcedure>();
  for (const [path, procedure] of Object.entries(router._def.procedures as Record<string, AnyTRPCProcedure>))
    if (procedure._def.type === "subscription") found.set(path, procedure);
  return found;
}

function inputSchemaOf(path: string, procedure: AnyTRPCProcedure): z.ZodType {
  const inputs = (procedure._def as { inputs?: unknown[] }).inputs ?? [];
  if (inputs.length !== 1 || !(inputs[0] instanceof z.ZodType))
    throw new Error(`asyncapi: subscription ${path} must have exactly one zod input`);
  return inputs[0];
}

export function buildAsyncApiDocument(router: { _def: { procedures: object } }, appUrl: string) {
  const url = new URL(appUrl);
  const secure = url.protocol === "https:";
  const schemas: Json = { TrpcError: TRPC_ERROR };
  const messages: Json = {};
  const channels: Json = {};
  const operations: Json = {};

  // Events: their schemas, and the frame that carries each on either door.
  for (const option of liveEvent.options) {
    const type = option.shape.type.value as EventType;
    const event = toComponentSchema(option, "output", `${pascal(type)}Event`, schemas);
    const about = { name: type, title: type, summary: EVENT_SUMMARIES[type] };
    messages[`ws.${type}`] = {
      ...about,
      description: "A data frame of the subscription: `result.id` and `result.data.id` are the event's position.",
      payload: obj({
        id: requestId,
        result: obj({ type: { const: "data" }, id: position, data: obj({ id: position, data: event }) }),
      }),
    };
    messages[`sse.${type}`] = {
      ...about,
      description: "An SSE message without `event:` line: `data:` is this JSON, `id:` its position.",
      payload: event,
    };
  }

  for (const [type, { schema, summary }] of Object.entries(STATE_EVENTS)) {
    const event = toComponentSchema(schema, "output", `${pascal(type)}Event`, schemas);
    const about = { name: type, title: type, summary };
    messages[`ws.${type}`] = {
      ...about,
      description: "A data frame of the subscription (no position: the state is not resumable).",
      payload: obj({ id: requestId, result: obj({ type: { const: "data" }, data: event }) }),
    };
    messages[`sse.${type}`] = {
      ...about,
      description: "An SSE message: `data:` is this JSON, with no `id:`.",
      payload: event,
    };
  }

  const frame = (name: string, summary: string, payload: Json, extra: Json = {}) => ({
    name,
    summary,
    payload,
    ...extra,
  });
  Object.assign(messages, {
    "ws.connectionParams": frame(
      "connectionParams",
      "The first frame on /trpc?connectionParams=1: signs the connection in.",
      obj({ method: { const: "connectionParams" }, data: obj({ token: { type: "string" } }) }),
    ),
    "ws.ping": frame(
      "PING",
      "Keep-alive: answer with PONG.",
      { type: "string", const: "PING" },
      { contentType: "text/plain" },
    ),
    "ws.pong": frame("PONG", "The answer to PING.", { type: "string", const: "PONG" }, { contentType: "text/plain" }),
    "ws.reconnect": frame(
      "reconnect",
      "The server is about to shut down: reconnect (to another process) and resume each subscription.",
      obj({ id: { type: "null" }, method: { const: "reconnect" } }),
    ),
    "ws.started": frame(
      "started",
      "The subscription listens: every event from now on is delivered.",
      obj({ id: requestId, result: obj({ type: { const: "started" } }) }),
    ),
    "ws.stopped": frame(
      "stopped",
      "The subscription ended (stopped by the client, or access lost).",
      obj({ id: requestId, result: obj({ type: { const: "stopped" } }) }),
    ),
    "ws.stop": frame(
      "subscription.stop",
      "Ends the subscription with this id.",
      obj({ id: requestId, method: { const: "subscription.stop" } }),
    ),
    "ws.error": frame(
      "error",
      "The subscription was refused or failed (no access, bad input, resync required, token revoked).",
      obj({ id: { oneOf: [requestId, { type: "null" }] }, error: schemaRef("TrpcError") }),
    ),
    "sse.connected": frame(
      "connected",
      "`event: connected`: the stream is open (`data:` holds client options, `{}`).",
      { type: "object" },
    ),
    "sse.error": frame(
      "serialized-error",
      "`event: serialized-error`: the subscription was refused or failed; the stream ends. The HTTP status is 200.",
      schemaRef("TrpcError"),
    ),
    "sse.return": frame("return", "`event: return` (empty `data:`): the subscription ended; the stream ends.", {
      type: "string",
      const: "",
    }),
  });

  const websocket = ref("#/servers/websocket");
  const sse = ref("#/servers/sse");
  channels["ws.connection"] = {
    address: "/trpc",
    title: "The WebSocket connection",
    servers: [websocket],
    bindings: { ws: { method: "GET", query: obj({ connectionParams: { const: "1" } }), bindingVersion: "0.1.0" } },
    messages: {
      connectionParams: ref("#/components/messages/ws.connectionParams"),
      ping: ref("#/components/messages/ws.ping"),
      pong: ref("#/components/messages/ws.pong"),
      reconnect: ref("#/components/messages/ws.reconnect"),
    },
  };
  operations["ws.signIn"] = {
    action: "send",
    summary: "Sign the connection in (first frame), and answer PING with PONG.",
    channel: ref("#/channels/ws.connection"),
    messages: [
      ref("#/channels/ws.connection/messages/connectionParams"),
      ref("#/channels/ws.connection/messages/pong"),
    ],
  };
  operations["ws.notices"] = {
    action: "receive",
    summary: "Keep-alive pings and the reconnect notice.",
    channel: ref("#/channels/ws.connection"),
    messages: [ref("#/channels/ws.connection/messages/ping"), ref("#/channels/ws.connection/messages/reconnect")],
  };

  const procedures = subscriptionProcedures(router);
  for (const [path, procedure] of procedures) {
    const described = SUBSCRIPTIONS[path];
    if (!described) throw new Error(`asyncapi: the subscription ${path} is not described in server/http/asyncapi.ts`);
    const input = toComponentSchema(inputSchemaOf(path, procedure), "input", `${pascal(path)}Input`, schemas);
    const description = `${described.summary}\n\n${described.state ? STATE_RULES : RESUME_RULES}`;
    const eventRefs = (door: "ws" | "sse") =>
      Object.fromEntries(described.events.map((type) => [type, ref(`#/components/messages/${door}.${type}`)]));

    const ws = `ws.${path}`;
    channels[ws] = {
      address: "/trpc",
      title: `${path} over WebSocket`,
      description,
      servers: [websocket],
      messages: {
        subscribe: {
          name: "subscription",
          summary: described.state
            ? `Starts ${path}.`
            : `Starts ${path}. To resume, put the last position seen in \`params.lastEventId\` (or in the input).`,
          payload: obj(
            {
              id: requestId,
              method: { const: "subscription" },
              params: obj({ path: { const: path }, input, ...(!described.state && { lastEventId: position }) }, [
                "path",
              ]),
            },
            ["id", "method", "params"],
          ),
        },
        stop: ref("#/components/messages/ws.stop"),
        started: ref("#/components/messages/ws.started"),
        ...eventRefs("ws"),
        error: ref("#/components/messages/ws.error"),
        stopped: ref("#/components/messages/ws.stopped"),
      },
    };
    const wsMessage = (key: string) => ref(`#/channels/${ws}/messages/${key}`);
    operations[`${ws}.send`] = {
      action: "send",
      summary: `Subscribe to ${path}, or stop it.`,
      channel: ref(`#/channels/${ws}`),
      messages: [wsMessage("subscribe"), wsMessage("stop")],
    };
    operations[`${ws}.receive`] = {
      action: "receive",
      summary: `${path}: started, one data frame per event, then stopped or an error.`,
      channel: ref(`#/channels/${ws}`),
      messages: ["started", ...described.events, "error", "stopped"].map(wsMessage),
    };

    const stream = `sse.${path}`;
    channels[stream] = {
      address: `/trpc/${path}`,
      title: `${path} over SSE`,
      description: described.state
        ? description
        : `${description}\n\nOver SSE, \`lastEventId\` may also come as the \`Last-Event-ID\` header (what a browser's EventSource sends when it reconnects) or the \`lastEventId\` query parameter.`,
      servers: [sse],
      messages: {
        connected: ref("#/components/messages/sse.connected"),
        ...eventRefs("sse"),
        error: ref("#/components/messages/sse.error"),
        return: ref("#/components/messages/sse.return"),
      },
    };
    const sseMessage = (key: string) => ref(`#/channels/${stream}/messages/${key}`);
    operations[`${stream}.receive`] = {
      action: "receive",
      summary: `GET /trpc/${path} with Accept: text/event-stream.`,
      channel: ref(`#/channels/${stream}`),
      messages: ["connected", ...described.events, "error", "return"].map(sseMessage),
      bindings: {
        http: {
          method: "GET",
          query: obj(
            {
              input: {
                type: "string",
                description: `The input as JSON text, following components/schemas/${pascal(path)}Input`,
              },
              connectionParams: { type: "string", description: 'JSON text: {"token":"<token>"}' },
              ...(!described.state && { lastEventId: position }),
            },
            [],
          ),
          bindingVersion: "0.3.0",
        },
      },
    };
  }

  return {
    asyncapi: "3.0.0",
    info: {
      title: "Chat Service live events",
      version: "1.0.0",
      description: DESCRIPTION,
      externalDocs: { url: `${url.origin}/api/v1/openapi.json`, description: "The REST API (records are shared)" },
    },
    defaultContentType: "application/json",
    servers: {
      websocket: {
        host: url.host,
        protocol: secure ? "wss" : "ws",
        title: "WebSocket (tRPC v11 protocol)",
        description: "One connection, many subscriptions. Sign in with the connectionParams frame.",
      },
      sse: {
        host: url.host,
        protocol: secure ? "https" : "http",
        title: "Server-sent events",
        description: "One subscription per request.",
        security: [ref("#/components/securitySchemes/connectionParams"), ref("#/components/securitySchemes/bearer")],
      },
    },
    channels,
    operations,
    components: {
      schemas,
      messages,
      securitySchemes: {
        connectionParams: {
          type: "httpApiKey",
          name: "connectionParams",
          in: "query",
          description: 'The token as JSON text: connectionParams={"token":"<token>"} (what EventSource can send).',
        },
        bearer: { type: "http", scheme: "bearer", description: "Authorization: Bearer <token>" },
      },
    },
  };
}
