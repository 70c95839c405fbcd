// The fan-out baseline of `npm run bench -- fanout` and `fanout-baseline`: about the least a chat
// server has to do per message, as a standalone process (started by startBaselineRelay in
// bench/lib.ts, like the service by startBenchServer). A bare `node:http` server plus a `ws`
// WebSocketServer on the same port, only on 127.0.0.1:
//
//   POST /channels/<id>/messages  {"content":"…"}  one INSERT into a table of its own in the
//                                 PostgreSQL of DATABASE_URL (through `postgres`, a pool of 10
//                                 as the service's), then the stored message as one text frame
//                                 {"type":"message.created","data":{"message":{…}}} to every
//                                 connected socket (serialized once), then 201 with the message
//   GET /ws                       a WebSocket that receives every broadcast; its first frame is
//                                 {"type":"ready"}
//   GET /readyz                   200 once the table exists
//
// No authentication, no membership check, no Redis, no backpressure: what the service does on
// top of this is what the comparison measures. The table (BASELINE_TABLE, default
// bench_baseline_messages: id, channel_id, content, created_at, primary key and an index on
// (channel_id, id), as a chat's history needs) is emptied at start and dropped on SIGTERM.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import postgres from "postgres";
import { WebSocket, WebSocketServer } from "ws";

const port = Number(process.env.PORT);
const databaseUrl = process.env.DATABASE_URL;
const table = process.env.BASELINE_TABLE ?? "bench_baseline_messages";
if (!Number.isInteger(port) || port <= 0) throw new Error("PORT is required");
if (!databaseUrl) throw new Error("DATABASE_URL is required");
if (!/^[a-z_][a-z0-9_]{0,50}$/.test(table)) throw new Error(`BASELINE_TABLE: not a plain table name: ${table}`);

const sql = postgres(databaseUrl, { max: 10, onnotice: () => {} });
await sql.unsafe(
  `create table if not exists ${table} (
     id bigint generated always as identity primary key,
     channel_id text not null,
     content text not null,
     created_at timestamptz not null default now()
   )`,
);
await sql.unsafe(`create index if not exists ${table}_channel_id on ${table} (channel_id, id)`);
await sql.unsafe(`truncate ${table}`);
const INSERT = `insert into ${table} (channel_id, content) values ($1, $2) returning id, created_at`;

const MAX_BODY = 64 * 1024;
const ROUTE = /^\/channels\/([A-Za-z0-9_-]{1,64})\/messages$/;

const server = createServer((request, response) => {
  if (request.method === "GET" && request.url === "/readyz") {
    response.writeHead(200, { "Content-Type": "text/plain" }).end("ok");
    return;
  }
  const route = request.method === "POST" ? ROUTE.exec(request.url ?? "") : null;
  if (!route) {
    response.writeHead(404).end();
    return;
  }
  readBody(request, (body) => {
    if (body === undefined) return answer(response, 413, { error: "body too large" });
    post(route[1]!, body, response).catch((error: Error) => answer(response, 500, { error: error.message }));
  });
});

function readBody(request: IncomingMessage, done: (body: string | undefined) => void) {
  const chunks: Buffer[] = [];
  let size = 0;
  request.on("data", (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY) chunks.push(chunk);
  });
  request.once("end", () => done(size <= MAX_BODY ? Buffer.concat(chunks).toString("utf8") : undefined));
}

function answer(response: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  response
    .writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) })
    .end(text);
}

async function post(channelId: string, body: string, response: ServerResponse) {
  let content: unknown;
  try {
    content = (JSON.parse(body) as { content?: unknown }).content;
  } catch {
    return answer(response, 400, { error: "invalid JSON" });
  }
  if (typeof content !== "string" || content.length === 0 || content.length > 4000)
    return answer(response, 400, { error: "content: a string of 1 to 4000 characters" });
  const [row] = await sql.unsafe<{ id: string; created_at: Date }[]>(INSERT, [channelId, content], { prepare: true });
  const message = { id: row!.id, channel_id: channelId, content, created_at: row!.created_at.toISOString() };
  const frame = Buffer.from(JSON.stringify({ type: "message.created", data: { message } }));
  for (const socket of sockets.clients) if (socket.readyState === WebSocket.OPEN) socket.send(frame, { binary: false });
  answer(response, 201, { data: message });
}

const sockets = new WebSocketServer({ server, path: "/ws", perMessageDeflate: false });
sockets.on("connection", (socket) => {
  socket.on("error", () => {});
  socket.send('{"type":"ready"}');
});

server.keepAliveTimeout = 60_000;
server.listen(port, "127.0.0.1");

let stopping = false;
process.on("SIGTERM", () => {
  if (stopping) return;
  stopping = true;
  for (const socket of sockets.clients) socket.terminate();
  sockets.close();
  server.close();
  server.closeAllConnections();
  sql
    .unsafe(`drop table if exists ${table}`)
    .catch(() => {})
    .finally(() => sql.end({ timeout: 5 }).finally(() => process.exit(0)));
});
