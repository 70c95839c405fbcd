// `npm run bench -- unread` (only when named; needs DATABASE_URL): what the unread and mention
// counts (docs/unread.md, server/services/messaging/unread-counts.ts) cost on a large database.
// The issue's target: PostgreSQL with 10,000,000 messages over 2,000 channels, a user in 100
// channels with at least 1,000 unread messages (COUNT_CAP, where counts stop) and some mentions in
// each: `GET /api/v1/workspaces/{id}/channels` and `GET /api/v1/unread` p95 under 30 ms each.
//
// The data set. One server (startBenchServer: its own process, on the PostgreSQL of DATABASE_URL,
// which it migrates). Through the API: three accounts, the measured user ("reader") and two
// authors (alice, bob), a workspace the reader creates (its owner, with #general) and an invite
// both authors accept. Then directly in SQL (the `postgres` package, one connection):
//   - BENCH_UNREAD_CHANNELS channels (2000) in that workspace, created by alice; the reader is a
//     member of BENCH_UNREAD_MEMBER_CHANNELS of them (100), spread evenly over the channel numbers
//     (every 4th of those private, the rest public); of the others about one in 19 is public (the
//     list shows them with null counts), the rest private; alice and bob are members of all;
//   - BENCH_UNREAD_MESSAGES messages (10,000,000): each of the reader's channels gets
//     max(messages / channels, 1500) and the others share the rest evenly. Message k of a channel
//     is by bob when k % 3 = 0, else by alice (never the reader); a reply (parent_message_id: message
//     k - 9 of its channel, whose reply_count is 1) when k % 10 = 9 (10%); a tombstone (deleted_at
//     set, content '') when k % 200 = 100 (a thread parent); in the reader's channels it mentions the
//     reader (`<@reader>`, mentioned_user_ids {reader}) when k % 50 = 7, the reader and bob (a reply)
//     when k % 100 = 19, bob only when k % 50 = 27, and `<!channel>` (mentions_channel) when
//     k % 250 = 33; elsewhere bob when k % 50 = 7 or 27 and `<!channel>` when k % 500 = 33.
//     Messages interleave over the channels in time order: message k of a channel with n messages
//     falls in time slot floor(k × S / n) of S (the largest n), and its sequence number is
//     slot × channels + channel number. Ids are `msg_` + 26 Crockford base32 characters like
//     server/ids.ts makes them: 10 of a millisecond time (400 days before the first load, a fixed
//     step per sequence number) and 16 of the sequence number, so they are unique and sort in
//     time order; rows go in in that order (the heap is in time order, as in production);
//   - the reader's read position in each of their channels (channel_members.last_read_message_id)
//     leaves between 1250 and n - 50 messages after it (evenly spread over the channels), at least
//     1118 top-level ones: every channel's unread_count is capped at 1000, and its mention_count is
//     3.4% of the messages after the position (about 42 to 168 at the defaults). The plan of every
//     channel (its number, id, message count, position) is kept in bench_unread_channels.
// Loading. The messages table's secondary indexes (their definitions read from pg_indexes and kept
// in bench_unread_state while they are gone) are dropped before the bulk insert and created again
// after it (maintenance_work_mem 1 GB), foreign-key triggers are skipped for the load
// (session_replication_role = replica, when the role may), rows go in by INSERT … SELECT over
// generate_series in chunks of about 250,000, then VACUUM ANALYZE messages (so that the visibility
// map is set and the count scans are index-only). Progress is kept in bench_unread_state after
// every chunk (with the seconds spent so far, so the load time of a resumed load adds up): a load
// that stopped resumes where it was, and a database that already holds the data set with the same
// knobs is not loaded again (BENCH_UNREAD_RELOAD=1: delete the old workspace and its messages, then
// load anew). Use a database of its own for this section.
//
// The measurement, through the running server over HTTP (node:http keep-alive, one request at a
// time) with the reader's bearer token (a fresh sign-in every run): the reader's positions are
// first reset to the loaded ones; 20 unrecorded requests of each, a wait (at most
// BENCH_UNREAD_QUIET_WAIT seconds) until the machine is nearly idle, then BENCH_UNREAD_REQUESTS (200)
// of each, alternating `GET /api/v1/workspaces/{id}/channels` and `GET /api/v1/unread`: p50, p95,
// p99 and max, and the target (p95 < 30 ms), with the machine's busy share and the other work on
// it meanwhile (on a shared machine a latency includes waiting for a core). Then 100 more of each
// endpoint alone, unrecorded, for its CPU per request: the server process's and that of the
// database's PostgreSQL backends (/proc), which other work on the machine does not inflate. The
// answers are checked against counts made here directly in SQL (uncapped, written independently
// of the service): every one of the reader's
// loaded channels shows is_member, its position, unread_count 1000 (more than 1000 unread) and
// mention_count equal to its mentions (> 0); channels not joined show null counts; the list has
// every visible channel; /unread lists exactly the reader's channels with anything unread, with the
// same counts, per-workspace sums and total_mentions = the sum of the mention counts; every
// recorded answer is the same as the checked one. Then EXPLAIN (ANALYZE, BUFFERS, TIMING OFF: clocks
// around every row would inflate scans of 100,000 rows), on a connection of this process with the
// database's own settings (JIT included), of the service's own SQL: the unread count and the
// mention count of one channel (the helpers of unread-counts.ts), and the very statements the two
// endpoints send, caught by running listChannels and unreadSummary here: execution and planning
// time, whether PostgreSQL compiled it with JIT (then the execution time again with jit = off), the
// scans (index-only? heap fetches; rows over all loops) and buffers. Last,
// BENCH_UNREAD_READS (100) `POST /api/v1/workspaces/{id}/channels/{c}/read`, each moving the
// position of one of the reader's channels (in turn) forward by one live top-level message: p50,
// p95, p99 (and the answers checked), CPU per move as above; the positions are then reset again.
//
//   BENCH_UNREAD_MESSAGES         messages in the data set (10000000)
//   BENCH_UNREAD_CHANNELS         channels in the workspace (2000)
//   BENCH_UNREAD_MEMBER_CHANNELS  channels the reader is in, each with > 1000 unread (100)
//   BENCH_UNREAD_REQUESTS         recorded requests of each endpoint (200)
//   BENCH_UNREAD_READS            read position moves (100)
//   BENCH_UNREAD_RELOAD           1: load the data set again even when it is there
//   BENCH_UNREAD_QUIET_WAIT       longest wait for a quiet machine before the recorded requests, s (60)
//
// Reading the numbers: the load generator, the server and PostgreSQL share the machine; the data set
// is freshly vacuumed (every page all-visible), which is the best case for index-only scans: in
// production the newest pages, where the unread messages are, become all-visible only when
// autovacuum has been through them (see the heap fetches of the EXPLAIN lines).
import { Agent as HttpAgent } from "node:http";
import { isDeepStrictEqual } from "node:util";
import { sql as dsql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type { Sql } from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import type { Database } from "../db/client.ts";
import * as schema from "../db/schema/index.ts";
import type { Deps } from "../server/deps.ts";
import { unreadSummary } from "../server/services/messaging/read-state.ts";
import { channelMentionCount, channelUnreadCount, COUNT_CAP } from "../server/services/messaging/unread-counts.ts";
import { listChannels } from "../server/services/workspaces/channels.ts";
import {
  api,
  envNumber,
  keepAliveCaller,
  percentile,
  round,
  startBenchServer,
  startDatabaseCpuWindow,
  startUsageWindow,
  waitForQuietMachine,
  type Answer,
} from "./lib.ts";
import type { UnreadSummary } from "../server/records/read-state.ts";

const MESSAGES = Math.floor(envNumber("BENCH_UNREAD_MESSAGES", 10_000_000));
const CHANNELS = Math.floor(envNumber("BENCH_UNREAD_CHANNELS", 2000));
const MEMBER_CHANNELS = Math.min(CHANNELS, Math.floor(envNumber("BENCH_UNREAD_MEMBER_CHANNELS", 100)));
const REQUESTS = Math.min(100_000, Math.floor(envNumber("BENCH_UNREAD_REQUESTS", 200)));
const READS = Math.min(10_000, Math.floor(envNumber("BENCH_UNREAD_READS", 100)));
const RELOAD = process.env.BENCH_UNREAD_RELOAD === "1";
const WARMUP = 20;
/** Longest wait for a quiet machine before the recorded requests, seconds (BENCH_UNREAD_QUIET_WAIT). */
const QUIET_WAIT_SECONDS = Math.min(600, envNumber("BENCH_UNREAD_QUIET_WAIT", 60));
/** Requests of each endpoint alone for its CPU per request (at most BENCH_UNREAD_REQUESTS). */
const CPU_REQUESTS = 100;
/** Target of the issue: p95 of each endpoint under this. */
export const TARGET_P95_MS = 30;
/** Messages in each of the reader's channels at least, and how many at least follow their position. */
const MIN_MEMBER_MESSAGES = 1500;
const MIN_UNREAD_MESSAGES = 1250;
/** Rows per INSERT of the load. */
const CHUNK_ROWS = 250_000;
/** Bump when the generated data changes: a data set of another version is loaded again. */
const DATA_VERSION = 1;
const PASSWORD = "bench-unread-password";
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const DAY_MS = 86_400_000;

// ---------------------------------------------------------------------------------------------
// The data set's shape

type Params = { version: number; messages: number; channels: number; member_channels: number };
const PARAMS: Params = {
  version: DATA_VERSION,
  messages: MESSAGES,
  channels: CHANNELS,
  member_channels: MEMBER_CHANNELS,
};

type ChannelPlan = {
  idx: number;
  member: boolean;
  /** The reader's channels numbered 0 … MEMBER_CHANNELS-1, else null. */
  member_rank: number | null;
  cnt: number;
  /** Index (k) of the message the reader's position is at, else null. */
  pos_k: number | null;
  visibility: "public" | "private";
};

/** Which channels the reader is in, how many messages each channel holds and where the positions are. */
function planChannels(): { channels: ChannelPlan[]; slots: number } {
  const memberIdx = new Map<number, number>();
  for (let j = 0; j < MEMBER_CHANNELS; j++) memberIdx.set(Math.floor((j * CHANNELS) / MEMBER_CHANNELS), j);
  const others = CHANNELS - MEMBER_CHANNELS;
  const perMember = Math.max(Math.floor(MESSAGES / CHANNELS), MIN_MEMBER_MESSAGES);
  const rest = MESSAGES - perMember * MEMBER_CHANNELS;
  if (rest < others) {
    throw new Error(
      `BENCH_UNREAD_MESSAGES (${MESSAGES}) is too small: the reader's ${MEMBER_CHANNELS} channels need ` +
        `${MIN_MEMBER_MESSAGES} messages each and every other channel one at least ` +
        `(${perMember * MEMBER_CHANNELS + others} in all)`,
    );
  }
  const channels: ChannelPlan[] = [];
  let otherRank = 0;
  for (let idx = 0; idx < CHANNELS; idx++) {
    const rank = memberIdx.get(idx);
    if (rank !== undefined) {
      // Messages after the position: evenly from MIN_UNREAD_MESSAGES to perMember - 50.
      const span = Math.max(0, perMember - 50 - MIN_UNREAD_MESSAGES);
      const after = MIN_UNREAD_MESSAGES + (MEMBER_CHANNELS > 1 ? Math.floor((rank * span) / (MEMBER_CHANNELS - 1)) : 0);
      channels.push({
        idx,
        member: true,
        member_rank: rank,
        cnt: perMember,
        pos_k: perMember - 1 - after,
        visibility: rank % 4 === 3 ? "private" : "public",
      });
    } else {
      const cnt = Math.floor(rest / others) + (otherRank < rest % others ? 1 : 0);
      otherRank++;
      channels.push({
        idx,
        member: false,
        member_rank: null,
        cnt,
        pos_k: null,
        visibility: idx % 19 === 1 ? "public" : "private",
      });
    }
  }
  // With no other channel, the rest goes to the reader's channels (one more each, in turn).
  if (others === 0) {
    for (let i = 0; i < rest; i++) channels[i % CHANNELS]!.cnt++;
  }
  return { channels, slots: Math.max(...channels.map((channel) => channel.cnt)) };
}

/** SQL of `width` Crockford base32 characters of a non-negative bigint expression, most significant first. */
function base32Sql(expression: string, width: number): string {
  return Array.from(
    { length: width },
    (_, i) => `substr('${ALPHABET}', (((${expression}) >> ${5 * (width - 1 - i)}) & 31)::integer + 1, 1)`,
  ).join(" || ");
}

type Layout = { baseMs: number; stepMs: number; slots: number };

/** SQL of a message's sequence number: message `k` of channel `idx` holding `cnt` messages. */
const seqSql = (layout: Layout, k: string, cnt: string, idx: string) =>
  `(((${k})::bigint * ${layout.slots}) / (${cnt}))::bigint * ${CHANNELS} + (${idx})`;

/** SQL of a message id (`msg_` + 10 characters of time + 16 of the sequence number) from a sequence number. */
const messageIdSql = (layout: Layout, seq: string) =>
  `'msg_' || ${base32Sql(`${layout.baseMs}::bigint + (${seq}) * ${layout.stepMs}::bigint`, 10)} || ${base32Sql(seq, 16)}`;

/** SQL of a message's time from its sequence number. */
const createdAtSql = (layout: Layout, seq: string) =>
  `to_timestamp((${layout.baseMs}::bigint + (${seq}) * ${layout.stepMs}::bigint) / 1000.0)`;

// ---------------------------------------------------------------------------------------------
// Requests

const agent = new HttpAgent({ keepAlive: true, maxSockets: 4 });

const call = keepAliveCaller(agent, 60_000);

async function register(baseUrl: string, name: string, email: string): Promise<{ id: number; token: string }> {
  const body = await api<{ access_token: string; user: { id: number } }>(
    baseUrl,
    "POST",
    "/api/v1/auth/app/register",
    undefined,
    { name, email, password: PASSWORD, password_confirmation: PASSWORD },
  );
  return { id: body.user.id, token: body.access_token };
}

// ---------------------------------------------------------------------------------------------
// Loading

type State = {
  params: Params;
  workspace_id: string;
  reader_email: string;
  reader_id: number;
  alice_id: number;
  bob_id: number;
  base_ms: string;
  step_ms: string;
  slots: string;
  loaded_slot: string;
  index_defs: { name: string; definition: string }[] | null;
  stage: "loading" | "indexing" | "analyzing" | "done";
  load_seconds: number;
  loaded_at: Date | null;
};

async function readState(sql: Sql): Promise<State | undefined> {
  await sql`create table if not exists bench_unread_state (
    id integer primary key default 1 check (id = 1),
    params jsonb not null,
    workspace_id text not null,
    reader_email text not null,
    reader_id integer not null,
    alice_id integer not null,
    bob_id integer not null,
    base_ms bigint not null,
    step_ms bigint not null,
    slots bigint not null,
    loaded_slot bigint not null default 0,
    index_defs jsonb,
    stage text not null,
    load_seconds double precision not null default 0,
    loaded_at timestamptz
  )`;
  await sql`create table if not exists bench_unread_channels (
    idx integer primary key,
    id text not null,
    member boolean not null,
    member_rank integer,
    cnt integer not null,
    pos_k integer,
    position_id text,
    visibility text not null
  )`;
  const [row] = await sql<State[]>`select * from bench_unread_state where id = 1`;
  return row;
}

/** Runs `task` with foreign-key triggers off on this connection (superusers only; else as is). */
async function withoutTriggers<T>(sql: Sql, log: (line: string) => void, task: () => Promise<T>): Promise<T> {
  let off = false;
  try {
    await sql`set session_replication_role = replica`;
    off = true;
  } catch {
    log("unread: cannot set session_replication_role (not a superuser): foreign keys are checked row by row");
  }
  try {
    return await task();
  } finally {
    if (off) await sql`set session_replication_role = origin`;
  }
}

/** Deletes a data set loaded before (its workspace, its messages) and the state. */
async function dropOldDataSet(sql: Sql, state: State, log: (line: string) => void): Promise<void> {
  const started = performance.now();
  log(`unread: deleting the old data set (workspace ${state.workspace_id})`);
  // Without the foreign-key triggers (a cascade from each channel would scan messages, whose
  // indexes may be gone): the messages, the channels and their members; then the workspace with
  // the rest (its members, invites) as usual.
  await withoutTriggers(sql, log, async () => {
    await sql`delete from messages where workspace_id = ${state.workspace_id}`;
    await sql`delete from channel_members where channel_id in (select id from channels where workspace_id = ${state.workspace_id})`;
    await sql`delete from channels where workspace_id = ${state.workspace_id}`;
  });
  await sql`delete from workspaces where id = ${state.workspace_id}`;
  await sql`delete from bench_unread_channels`;
  await sql`delete from bench_unread_state`;
  log(`unread: old data set deleted in ${round((performance.now() - started) / 1000, 1)} s`);
}

/** The messages table's secondary indexes (not those of a constraint): name and CREATE INDEX statement. */
async function secondaryIndexes(sql: Sql): Promise<{ name: string; definition: string }[]> {
  return sql<{ name: string; definition: string }[]>`
    select i.indexname as name, i.indexdef as definition from pg_indexes i
    where i.schemaname = current_schema() and i.tablename = 'messages'
      and not exists (select 1 from pg_constraint c where c.conindid = format('%I.%I', i.schemaname, i.indexname)::regclass)
    order by i.indexname`;
}

async function setUp(
  sql: Sql,
  baseUrl: string,
  log: (line: string) => void,
  carriedIndexDefs: State["index_defs"],
): Promise<State> {
  const { channels, slots } = planChannels();
  const stamp = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  log("unread: registering the reader and two authors, creating the workspace");
  const readerEmail = `unread-reader-${stamp}@example.test`;
  const reader = await register(baseUrl, "reader", readerEmail);
  const alice = await register(baseUrl, "alice", `unread-alice-${stamp}@example.test`);
  const bob = await register(baseUrl, "bob", `unread-bob-${stamp}@example.test`);
  const workspace = await api<{ data: { id: string } }>(baseUrl, "POST", "/api/v1/workspaces", reader.token, {
    name: "Unread bench",
  });
  const workspaceId = workspace.data.id;
  const invite = await api<{ data: { token: string } }>(
    baseUrl,
    "POST",
    `/api/v1/workspaces/${workspaceId}/invites`,
    reader.token,
    {},
  );
  for (const author of [alice, bob]) {
    await api(baseUrl, "POST", `/api/v1/invites/${invite.data.token}/accept`, author.token);
  }
  // 400 days before now, spread over the sequence numbers (slots × channels).
  const baseMs = Date.now() - 400 * DAY_MS;
  const stepMs = Math.max(1, Math.floor((399 * DAY_MS) / (slots * CHANNELS)));
  const layout: Layout = { baseMs, stepMs, slots };
  log(`unread: creating ${CHANNELS} channels (the reader in ${MEMBER_CHANNELS})`);
  await sql.begin(async (tx) => {
    await tx`insert into bench_unread_state ${tx({
      id: 1,
      params: tx.json(PARAMS),
      workspace_id: workspaceId,
      reader_email: readerEmail,
      reader_id: reader.id,
      alice_id: alice.id,
      bob_id: bob.id,
      base_ms: baseMs,
      step_ms: stepMs,
      slots,
      loaded_slot: 0,
      index_defs: carriedIndexDefs ? tx.json(carriedIndexDefs) : null,
      stage: "loading",
      load_seconds: 0,
    })}`;
    await tx`insert into bench_unread_channels ${tx(
      channels.map((channel) => ({
        idx: channel.idx,
        id: `ch_${encode(baseMs, 10)}${encode(channel.idx, 16)}`,
        member: channel.member,
        member_rank: channel.member_rank,
        cnt: channel.cnt,
        pos_k: channel.pos_k,
        visibility: channel.visibility,
      })),
    )}`;
    await tx.unsafe(`update bench_unread_channels set position_id =
      ${messageIdSql(layout, seqSql(layout, "pos_k", "cnt", "idx"))} where member`);
    const created = new Date(baseMs);
    await tx`insert into channels (id, workspace_id, name, slug, visibility, is_general, created_by, created_at, updated_at)
      select b.id, ${workspaceId}, 'bench-' || lpad(b.idx::text, 5, '0'), 'bench-' || lpad(b.idx::text, 5, '0'),
        b.visibility, false, ${alice.id}::integer, ${created}, ${created}
      from bench_unread_channels b`;
    await tx`insert into channel_members (channel_id, user_id, joined_at, last_read_message_id)
      select b.id, ${reader.id}::integer, ${created}, b.position_id from bench_unread_channels b where b.member
      union all
      select b.id, u.id, ${created}, null from bench_unread_channels b
        cross join (values (${alice.id}::integer), (${bob.id}::integer)) u(id)`;
  });
  const [state] = await sql<State[]>`select * from bench_unread_state where id = 1`;
  return state!;
}

function encode(value: number, width: number): string {
  let out = "";
  let rest = value;
  for (let i = 0; i < width; i++) {
    out = ALPHABET[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/** One chunk of messages: time slots [s0, s1) of every channel, in sequence order. */
function chunkSql(state: State, layout: Layout): string {
  const seq = seqSql(layout, "g.k", "b.cnt", "b.idx");
  const parentSeq = seqSql(layout, "g.k - g.k % 10", "b.cnt", "b.idx");
  const reader = state.reader_id;
  const bob = state.bob_id;
  return `insert into messages (id, workspace_id, channel_id, author_user_id, content, type, parent_message_id,
      reply_count, language, mentioned_user_ids, mentions_channel, created_at, updated_at, deleted_at)
    select ${messageIdSql(layout, "s.seq")}, $1, b.id,
      case when g.k % 3 = 0 then ${bob} else ${state.alice_id} end,
      case
        when g.k % 200 = 100 then ''
        when b.member and g.k % 50 = 7 then '<@${reader}> message ' || g.k || ' of channel ' || b.idx || ', have a look'
        when b.member and g.k % 100 = 19 then '<@${reader}> <@${bob}> reply ' || g.k || ' in channel ' || b.idx
        when g.k % 50 = 27 or (not b.member and g.k % 50 = 7) then '<@${bob}> message ' || g.k || ' of channel ' || b.idx
        when (b.member and g.k % 250 = 33) or (not b.member and g.k % 500 = 33) then '<!channel> message ' || g.k || ' for everyone'
        else 'message ' || g.k || ' of channel ' || b.idx || ': the quick brown fox jumps over the lazy dog'
      end,
      'text',
      case when g.k % 10 = 9 then ${messageIdSql(layout, parentSeq)} end,
      case when g.k % 10 = 0 and g.k + 9 < b.cnt then 1 else 0 end,
      'en',
      case
        when b.member and g.k % 50 = 7 then array[${reader}]
        when b.member and g.k % 100 = 19 then array[${reader}, ${bob}]
        when g.k % 50 = 27 or (not b.member and g.k % 50 = 7) then array[${bob}]
        else '{}'::integer[]
      end,
      (b.member and g.k % 250 = 33) or (not b.member and g.k % 500 = 33),
      ${createdAtSql(layout, "s.seq")}, ${createdAtSql(layout, "s.seq")},
      case when g.k % 200 = 100 then ${createdAtSql(layout, "s.seq")} + interval '1 minute' end
    from bench_unread_channels b
      cross join lateral generate_series(($2::bigint * b.cnt + ${layout.slots} - 1) / ${layout.slots},
        ($3::bigint * b.cnt + ${layout.slots} - 1) / ${layout.slots} - 1) as g(k)
      cross join lateral (select ${seq} as seq) s
    order by s.seq`;
}

/** Loads (or finishes loading) the data set; answers the state, done. */
async function load(sql: Sql, state: State, log: (line: string) => void): Promise<{ state: State; seconds: number }> {
  const started = performance.now();
  // load_seconds grows with every step that commits, so that a load that stopped and resumed adds up.
  let accounted = started;
  const elapsed = () => {
    const now = performance.now();
    const seconds = (now - accounted) / 1000;
    accounted = now;
    return seconds;
  };
  const layout: Layout = { baseMs: Number(state.base_ms), stepMs: Number(state.step_ms), slots: Number(state.slots) };
  let stage = state.stage;
  if (stage === "loading") {
    const [saved] = await sql<{ index_defs: State["index_defs"] }[]>`select index_defs from bench_unread_state`;
    if (!saved?.index_defs) {
      const indexes = await secondaryIndexes(sql);
      await sql.begin(async (tx) => {
        await tx`update bench_unread_state set index_defs = ${tx.json(indexes)}`;
        for (const index of indexes) await tx.unsafe(`drop index if exists "${index.name}"`);
      });
      log(`unread: dropped the messages table's ${indexes.length} secondary indexes for the load`);
    } else {
      for (const index of saved.index_defs) await sql.unsafe(`drop index if exists "${index.name}"`);
    }
    const total = Number(state.slots);
    const slotsPerChunk = Math.max(1, Math.ceil((CHUNK_ROWS * total) / MESSAGES));
    const text = chunkSql(state, layout);
    let slot = Number(state.loaded_slot);
    if (slot > 0) log(`unread: resuming the load at time slot ${slot} of ${total}`);
    let lastLog = performance.now();
    await sql`set work_mem = '256MB'`;
    await withoutTriggers(sql, log, async () => {
      while (slot < total) {
        const next = Math.min(total, slot + slotsPerChunk);
        await sql.begin(async (tx) => {
          await tx.unsafe(text, [state.workspace_id, slot, next]);
          await tx`update bench_unread_state set loaded_slot = ${next}, load_seconds = load_seconds + ${elapsed()}`;
        });
        slot = next;
        if (performance.now() - lastLog > 10_000 || slot === total) {
          lastLog = performance.now();
          log(
            `unread: loaded ${Math.round((slot / total) * 100)}% of ${MESSAGES} messages ` +
              `(${round((performance.now() - started) / 1000, 0)} s)`,
          );
        }
      }
    });
    await sql`reset work_mem`;
    await sql`update bench_unread_state set stage = 'indexing'`;
    stage = "indexing";
  }
  if (stage === "indexing") {
    const [saved] = await sql<{ index_defs: State["index_defs"] }[]>`select index_defs from bench_unread_state`;
    const present = new Set((await secondaryIndexes(sql)).map((index) => index.name));
    await sql`set maintenance_work_mem = '1GB'`;
    for (const index of saved?.index_defs ?? []) {
      if (present.has(index.name)) continue;
      const t0 = performance.now();
      await sql.unsafe(index.definition);
      await sql`update bench_unread_state set load_seconds = load_seconds + ${elapsed()}`;
      log(`unread: created ${index.name} in ${round((performance.now() - t0) / 1000, 1)} s`);
    }
    await sql`reset maintenance_work_mem`;
    await sql`update bench_unread_state set index_defs = null, stage = 'analyzing'`;
    stage = "analyzing";
  }
  if (stage === "analyzing") {
    const t0 = performance.now();
    await sql`vacuum (analyze) messages`;
    await sql`analyze channels`;
    await sql`analyze channel_members`;
    await sql`analyze workspace_members`;
    log(`unread: VACUUM ANALYZE in ${round((performance.now() - t0) / 1000, 1)} s`);
  }
  const seconds = (performance.now() - started) / 1000;
  await sql`update bench_unread_state set stage = 'done', load_seconds = load_seconds + ${elapsed()},
    loaded_at = coalesce(loaded_at, now())`;
  const [done] = await sql<State[]>`select * from bench_unread_state where id = 1`;
  return { state: done!, seconds };
}

// ---------------------------------------------------------------------------------------------
// Checking the answers

type Expected = { id: string; position_id: string; unread: number; mentions: number };

/** The reader's counts per loaded channel, uncapped, counted here directly in SQL. */
async function expectedCounts(sql: Sql, state: State): Promise<Expected[]> {
  return sql<Expected[]>`
    select b.id, b.position_id,
      (select count(*)::integer from messages m where m.channel_id = b.id and m.id > b.position_id
        and m.deleted_at is null and m.parent_message_id is null
        and m.author_user_id is distinct from ${state.reader_id}::integer) as unread,
      (select count(*)::integer from messages m where m.channel_id = b.id and m.id > b.position_id
        and m.deleted_at is null and m.author_user_id is distinct from ${state.reader_id}::integer
        and (m.mentions_channel or ${state.reader_id}::integer = any(m.mentioned_user_ids))) as mentions
    from bench_unread_channels b where b.member order by b.idx`;
}

type ChannelRow = {
  id: string;
  is_member: boolean;
  last_read_message_id: string | null;
  unread_count: number | null;
  mention_count: number | null;
  muted: boolean | null;
};

const capped = (n: number) => Math.min(COUNT_CAP, n);

/** What is wrong with the channel list (empty: nothing). */
function checkList(body: string, expected: Expected[], visible: number): string[] {
  const problems: string[] = [];
  const rows = (JSON.parse(body) as { data: ChannelRow[] }).data;
  if (rows.length !== visible) problems.push(`list: ${rows.length} channels, expected ${visible}`);
  const byId = new Map(rows.map((row) => [row.id, row]));
  let wrong = 0;
  for (const want of expected) {
    const row = byId.get(want.id);
    if (
      !row ||
      !row.is_member ||
      row.last_read_message_id !== want.position_id ||
      row.unread_count !== capped(want.unread) ||
      want.unread < COUNT_CAP ||
      row.mention_count !== capped(want.mentions) ||
      !(want.mentions > 0)
    ) {
      if (wrong++ < 3) {
        problems.push(
          `list: channel ${want.id}: ${row ? JSON.stringify({ is_member: row.is_member, last_read_message_id: row.last_read_message_id, unread_count: row.unread_count, mention_count: row.mention_count }) : "missing"}, ` +
            `expected unread ${capped(want.unread)} (of ${want.unread}), mentions ${want.mentions}, position ${want.position_id}`,
        );
      }
    }
  }
  if (wrong > 3) problems.push(`list: ${wrong} channels wrong in all`);
  const notJoined = rows.filter((row) => !row.is_member);
  if (notJoined.some((row) => row.unread_count !== null || row.mention_count !== null || row.muted !== null)) {
    problems.push("list: a channel not joined shows counts");
  }
  return problems;
}

/** What is wrong with /unread (empty: nothing). */
function checkSummary(body: string, expected: Expected[], workspaceId: string): string[] {
  const problems: string[] = [];
  const summary = (JSON.parse(body) as { data: UnreadSummary }).data;
  const byId = new Map(summary.channels.map((row) => [row.channel_id, row]));
  if (summary.channels.length !== expected.length) {
    problems.push(`unread: ${summary.channels.length} channels, expected ${expected.length}`);
  }
  let wrong = 0;
  for (const want of expected) {
    const row = byId.get(want.id);
    if (
      !row ||
      row.workspace_id !== workspaceId ||
      row.last_read_message_id !== want.position_id ||
      row.unread_count !== capped(want.unread) ||
      row.mention_count !== capped(want.mentions) ||
      row.muted
    ) {
      if (wrong++ < 3) problems.push(`unread: channel ${want.id}: ${row ? JSON.stringify(row) : "missing"}`);
    }
  }
  if (wrong > 3) problems.push(`unread: ${wrong} channels wrong in all`);
  const mentionSum = summary.channels.reduce((sum, row) => sum + row.mention_count, 0);
  const expectedMentions = expected.reduce((sum, want) => sum + capped(want.mentions), 0);
  if (summary.total_mentions !== mentionSum || mentionSum !== expectedMentions) {
    problems.push(
      `unread: total_mentions ${summary.total_mentions}, sum of the channels' ${mentionSum}, expected ${expectedMentions}`,
    );
  }
  const sums = summary.workspaces.find((row) => row.workspace_id === workspaceId);
  const unreadSum = expected.reduce((sum, want) => sum + capped(want.unread), 0);
  if (summary.workspaces.length !== 1 || sums?.unread_count !== unreadSum || sums.mention_count !== expectedMentions) {
    problems.push(`unread: workspaces ${JSON.stringify(summary.workspaces)}, expected unread ${unreadSum}`);
  }
  if (summary.conversations.length !== 0) problems.push(`unread: ${summary.conversations.length} conversations`);
  return problems;
}

// ---------------------------------------------------------------------------------------------
// EXPLAIN

export type ExplainRow = {
  statement: string;
  execution_ms: number;
  planning_ms: number;
  /** Each scan node: kind, relation or index, rows × loops, heap fetches (index-only scans). */
  scans: string[];
  heap_fetches: number;
  shared_hit: number;
  shared_read: number;
  /** Functions PostgreSQL compiled with JIT for it (null: no JIT). */
  jit_functions: number | null;
  /** With JIT: the execution time of the same EXPLAIN with `jit = off`. */
  execution_ms_without_jit: number | null;
};

type PlanNode = {
  "Node Type": string;
  "Index Name"?: string;
  "Relation Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Heap Fetches"?: number;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
};

const dialect = new PgDialect();

/** A statement as text and parameters, as it is sent. */
type Statement = { text: string; params: unknown[] };

const render = (statement: SQL): Statement => {
  const query = dialect.sqlToQuery(statement);
  return { text: query.sql, params: query.params };
};

/**
 * The statements the service sends for the channel list and for /unread, caught by running its
 * own functions (listChannels, unreadSummary) here: the list's through a drizzle logger (it runs
 * for real), /unread's by a stand-in client that records it unrun.
 */
async function serviceStatements(
  databaseUrl: string,
  readerId: number,
  workspaceId: string,
): Promise<{ list: Statement; unread: Statement }> {
  const logged: Statement[] = [];
  // A client of its own: drizzle changes its client's type parsers.
  const { default: postgres } = await import("postgres");
  const client = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const db = drizzle(client, {
      schema,
      casing: "snake_case",
      logger: { logQuery: (text, params) => logged.push({ text, params }) },
    }) as unknown as Database;
    await listChannels({ db } as Deps, readerId, workspaceId);
  } finally {
    await client.end({ timeout: 1 });
  }
  const list = logged.find((statement) => statement.text.includes("capped"));
  let unread: Statement | undefined;
  const recorder = {
    $client: {
      unsafe: async (text: string, params: unknown[]) => {
        unread = { text, params };
        return [];
      },
    },
  } as unknown as Database;
  await unreadSummary({ db: recorder }, readerId);
  if (!list || !unread) throw new Error("unread: could not catch the service's statements");
  return { list, unread };
}

type ExplainRoot = {
  Plan: PlanNode;
  "Execution Time": number;
  "Planning Time": number;
  JIT?: { Functions?: number };
};

async function explainJson(sql: Pick<Sql, "unsafe">, statement: Statement): Promise<ExplainRoot> {
  const [row] = await sql.unsafe(
    `explain (analyze, buffers, timing off, format json) ${statement.text}`,
    statement.params as never[],
  );
  return ((row as Record<string, unknown>)["QUERY PLAN"] as ExplainRoot[])[0]!;
}

/** EXPLAIN of `statement`; when PostgreSQL compiled it with JIT, once more with JIT off (for the time only). */
async function explain(sql: Sql, label: string, statement: Statement): Promise<ExplainRow> {
  const root = await explainJson(sql, statement);
  let withoutJit: number | null = null;
  if (root.JIT) {
    withoutJit = await sql.begin(async (tx) => {
      await tx`set local jit = off`;
      return (await explainJson(tx, statement))["Execution Time"];
    });
  }
  const scans = new Map<string, { rows: number; loops: number; fetches: number; nodes: number }>();
  let heapFetches = 0;
  const walk = (node: PlanNode) => {
    if (node["Node Type"].includes("Scan")) {
      const key = `${node["Node Type"]} ${node["Index Name"] ?? node["Relation Name"] ?? ""}`.trim();
      const seen = scans.get(key) ?? { rows: 0, loops: 0, fetches: 0, nodes: 0 };
      const loops = node["Actual Loops"] ?? 1;
      seen.rows += (node["Actual Rows"] ?? 0) * loops;
      seen.loops += loops;
      seen.fetches += node["Heap Fetches"] ?? 0;
      seen.nodes++;
      scans.set(key, seen);
      heapFetches += node["Heap Fetches"] ?? 0;
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(root.Plan);
  return {
    statement: label,
    execution_ms: round(root["Execution Time"], 2),
    planning_ms: round(root["Planning Time"], 2),
    scans: [...scans].map(
      ([key, seen]) =>
        `${key}: ${seen.rows} rows in ${seen.loops} loops` +
        (key.startsWith("Index Only") ? `, heap fetches ${seen.fetches}` : ""),
    ),
    heap_fetches: heapFetches,
    shared_hit: root.Plan["Shared Hit Blocks"] ?? 0,
    shared_read: root.Plan["Shared Read Blocks"] ?? 0,
    jit_functions: root.JIT?.Functions ?? null,
    execution_ms_without_jit: withoutJit === null ? null : round(withoutJit, 2),
  };
}

// ---------------------------------------------------------------------------------------------
// The section

export type LatencyRow = {
  endpoint: string;
  requests: number;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
  max_ms: number | null;
  answer_kib: number | null;
  errors: number;
  /** CPU per request of this endpoint alone: the server process, the database's PostgreSQL backends. */
  server_cpu_ms: number | null;
  pg_cpu_ms: number | null;
  /** null: not judged (the read moves have no target). */
  pass: boolean | null;
};

export type UnreadResult = {
  settings: {
    messages: number;
    channels: number;
    member_channels: number;
    requests: number;
    warmup: number;
    reads: number;
  };
  data_set: {
    loaded_this_run: boolean;
    /** Seconds of this run's load (null: the data set was there). */
    load_seconds_this_run: number | null;
    /** Seconds all the loads of this data set took together (resumed loads add up). */
    load_seconds_total: number;
    loaded_at: string | null;
    workspace_id: string;
    messages: number;
    database_mib: number;
    messages_heap_mib: number;
    messages_indexes_mib: number;
    index_mib: Record<string, number>;
    listed_channels: number;
  };
  rows: LatencyRow[];
  /**
   * Over the recorded requests: the machine's busy share (100 = every core), the other work on it
   * (100 = one core) and its busy share just before; latencies on a shared machine include
   * waiting for a core.
   */
  machine: { machine_busy_pct: number; other_cpu_pct: number; busy_before_pct: number };
  explain: ExplainRow[];
  checks: { list: string[]; unread: string[]; reads: string[]; differing_answers: number };
  targets: { channels_p95_under_30ms: boolean | null; unread_p95_under_30ms: boolean | null; answers_right: boolean };
};

type Cpu = { server: number | null; pg: number | null };

function latencyRow(
  endpoint: string,
  latencies: number[],
  errors: number,
  bytes: number | null,
  cpu: Cpu,
  target: boolean,
): LatencyRow {
  const sorted = Float64Array.from(latencies).sort();
  const at = (p: number) => (sorted.length > 0 ? round(percentile(sorted, p), 2) : null);
  const p95 = at(95);
  return {
    endpoint,
    requests: latencies.length,
    p50_ms: at(50),
    p95_ms: p95,
    p99_ms: at(99),
    max_ms: sorted.length > 0 ? round(sorted[sorted.length - 1]!, 2) : null,
    answer_kib: bytes === null ? null : round(bytes / 1024, 1),
    errors,
    server_cpu_ms: cpu.server,
    pg_cpu_ms: cpu.pg,
    pass: target ? (p95 === null || errors > 0 ? false : p95 < TARGET_P95_MS) : null,
  };
}

export async function runUnread(log: (line: string) => void): Promise<UnreadResult> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    throw new Error(
      "the unread section needs PostgreSQL: set DATABASE_URL to a database of its own, e.g. " +
        "DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_unread npm run bench -- unread",
    );
  }
  planChannels(); // refuses impossible knobs before anything starts
  const { default: postgres } = await import("postgres");
  const server = await startBenchServer("unread");
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {}, idle_timeout: 0 });
  try {
    // ---- the data set
    let state = await readState(sql);
    let loadedThisRun = false;
    let loadSeconds: number | null = null;
    if (state && (RELOAD || !isDeepStrictEqual(state.params, PARAMS))) {
      if (!RELOAD) log(`unread: the data set there was made with other knobs (${JSON.stringify(state.params)})`);
      const carried = state.index_defs;
      await dropOldDataSet(sql, state, log);
      state = await setUp(sql, server.url, log, carried);
    } else if (!state) {
      state = await setUp(sql, server.url, log, null);
    }
    if (state.stage !== "done") {
      log(`unread: loading ${MESSAGES} messages over ${CHANNELS} channels`);
      const loaded = await load(sql, state, log);
      state = loaded.state;
      loadedThisRun = true;
      loadSeconds = round(loaded.seconds, 1);
      log(`unread: data set loaded in ${loadSeconds} s (${round(state.load_seconds, 1)} s in all its loads)`);
    } else {
      log(
        `unread: the data set is there (loaded ${state.loaded_at?.toISOString()} in ${round(state.load_seconds, 1)} s); ` +
          "BENCH_UNREAD_RELOAD=1 loads it again",
      );
    }
    const workspaceId = state.workspace_id;
    const readerId = state.reader_id;

    const resetPositions = () => sql`update channel_members cm set last_read_message_id = b.position_id, muted = false
      from bench_unread_channels b where cm.channel_id = b.id and cm.user_id = ${readerId}::integer and b.member
        and (cm.last_read_message_id is distinct from b.position_id or cm.muted)`;
    await resetPositions();
    await sql`vacuum (analyze) channel_members`;

    const [sizes] = await sql<{ database: string; heap: string; indexes: string; messages: string }[]>`
      select pg_database_size(current_database())::bigint as database,
        pg_relation_size('messages')::bigint as heap, pg_indexes_size('messages')::bigint as indexes,
        (select count(*) from messages where workspace_id = ${workspaceId})::bigint as messages`;
    const indexSizes = await sql<{ name: string; bytes: string }[]>`
      select c.relname as name, pg_relation_size(c.oid)::bigint as bytes from pg_index i
        join pg_class c on c.oid = i.indexrelid where i.indrelid = 'messages'::regclass order by c.relname`;
    const mib = (bytes: string | number) => round(Number(bytes) / 2 ** 20, 1);
    log(
      `unread: database ${mib(sizes!.database)} MiB (messages heap ${mib(sizes!.heap)} MiB, ` +
        `indexes ${mib(sizes!.indexes)} MiB), ${sizes!.messages} messages in the workspace`,
    );

    const expected = await expectedCounts(sql, state);
    const [visible] = await sql<{ n: number }[]>`
      select count(*)::integer as n from channels ch
        left join channel_members cm on cm.channel_id = ch.id and cm.user_id = ${readerId}::integer
      where ch.workspace_id = ${workspaceId} and (ch.visibility = 'public' or cm.user_id is not null)`;
    const underCap = expected.filter((want) => want.unread < COUNT_CAP).length;
    if (underCap > 0) log(`unread: ${underCap} of the reader's channels have fewer than ${COUNT_CAP} unread messages`);

    // ---- the reader signs in
    const signIn = await api<{ access_token: string }>(server.url, "POST", "/api/v1/auth/app/login", undefined, {
      email: state.reader_email,
      password: PASSWORD,
    });
    const token = signIn.access_token;
    const listUrl = `${server.url}/api/v1/workspaces/${workspaceId}/channels`;
    const unreadUrl = `${server.url}/api/v1/unread`;

    // ---- the two lists
    type Endpoint = "channels" | "unread";
    const urls: Record<Endpoint, string> = { channels: listUrl, unread: unreadUrl };
    const latencies: Record<Endpoint, number[]> = { channels: [], unread: [] };
    const errors: Record<Endpoint, number> = { channels: 0, unread: 0 };
    const first: Record<Endpoint, string | undefined> = { channels: undefined, unread: undefined };
    const bytes: Record<Endpoint, number | null> = { channels: null, unread: null };
    let differing = 0;
    const errorTexts: string[] = [];
    const once = async (endpoint: Endpoint, record: boolean) => {
      const started = performance.now();
      let answer: Answer;
      try {
        answer = await call("GET", urls[endpoint], token);
      } catch (error) {
        errors[endpoint]++;
        if (errorTexts.length < 3) errorTexts.push(`${endpoint}: ${(error as Error).message}`);
        return;
      }
      const ms = performance.now() - started;
      if (answer.status !== 200) {
        errors[endpoint]++;
        if (errorTexts.length < 3) errorTexts.push(`${endpoint}: HTTP ${answer.status} ${answer.body.slice(0, 200)}`);
        return;
      }
      if (first[endpoint] === undefined) {
        first[endpoint] = answer.body;
        bytes[endpoint] = Buffer.byteLength(answer.body);
      } else if (answer.body !== first[endpoint]) differing++;
      if (record) latencies[endpoint].push(ms);
    };
    log(`unread: ${WARMUP} unrecorded requests of each endpoint`);
    for (let i = 0; i < WARMUP; i++) {
      await once("channels", false);
      await once("unread", false);
    }
    const busyBefore = await waitForQuietMachine(QUIET_WAIT_SECONDS);
    log(
      `unread: ${REQUESTS} requests of each endpoint, alternating, one at a time ` +
        `(machine ${Math.round(busyBefore)}% busy before)`,
    );
    const usage = startUsageWindow(server.pid);
    for (let i = 0; i < REQUESTS; i++) {
      const order: Endpoint[] = i % 2 === 0 ? ["channels", "unread"] : ["unread", "channels"];
      for (const endpoint of order) await once(endpoint, true);
    }
    const window = usage.finish();
    const machine = {
      machine_busy_pct: round(window.machineBusyPct, 1),
      other_cpu_pct: round(window.otherCpuPct, 1),
      busy_before_pct: round(busyBefore, 1),
    };
    log(`unread: machine ${machine.machine_busy_pct}% busy meanwhile, other work ${machine.other_cpu_pct}% of a core`);
    // CPU per request of each endpoint alone (not recorded as latency).
    const cpuRequests = Math.min(REQUESTS, CPU_REQUESTS);
    const cpuOf = async (task: () => Promise<number>): Promise<Cpu> => {
      const usage = startUsageWindow(server.pid);
      const databaseCpu = await startDatabaseCpuWindow(databaseUrl);
      const count = await task();
      const pgSeconds = await databaseCpu.finish();
      const { serverCpuSeconds } = usage.finish();
      return count > 0
        ? { server: round((serverCpuSeconds / count) * 1000, 2), pg: round((pgSeconds / count) * 1000, 2) }
        : { server: null, pg: null };
    };
    const cpu: Record<Endpoint, Cpu> = { channels: { server: null, pg: null }, unread: { server: null, pg: null } };
    for (const endpoint of ["channels", "unread"] as const) {
      cpu[endpoint] = await cpuOf(async () => {
        for (let i = 0; i < cpuRequests; i++) await once(endpoint, false);
        return cpuRequests;
      });
      log(`unread: ${endpoint}: CPU per request: server ${cpu[endpoint].server} ms, PostgreSQL ${cpu[endpoint].pg} ms`);
    }
    const listProblems = first.channels ? checkList(first.channels, expected, visible!.n) : ["list: no answer"];
    const unreadProblems = first.unread ? checkSummary(first.unread, expected, workspaceId) : ["unread: no answer"];
    for (const text of errorTexts) log(`unread: error: ${text}`);
    for (const text of [...listProblems, ...unreadProblems]) log(`unread: wrong answer: ${text}`);

    // ---- EXPLAIN of the service's count SQL
    log("unread: EXPLAIN (ANALYZE, BUFFERS) of the count statements");
    const one = expected[0]!;
    const channelRef = dsql`${one.id}::text`;
    const positionRef = dsql`${one.position_id}::text`;
    const service = await serviceStatements(databaseUrl, readerId, workspaceId);
    const explains = [
      await explain(
        sql,
        "unread_count, one channel",
        render(dsql`select ${channelUnreadCount(readerId, channelRef, positionRef)} as unread_count`),
      ),
      await explain(
        sql,
        "mention_count, one channel",
        render(dsql`select ${channelMentionCount(readerId, channelRef, positionRef)} as mention_count`),
      ),
      await explain(sql, "the channel list (listChannels' statement)", service.list),
      await explain(sql, "/unread (unreadSummary's statement)", service.unread),
    ];
    for (const row of explains) {
      log(
        `unread: EXPLAIN ${row.statement}: execution ${row.execution_ms} ms, planning ${row.planning_ms} ms, ` +
          `buffers hit ${row.shared_hit} read ${row.shared_read}` +
          (row.jit_functions === null
            ? ""
            : `, JIT (${row.jit_functions} functions; ${row.execution_ms_without_jit} ms with jit = off)`) +
          `; ${row.scans.join("; ")}`,
      );
    }

    // ---- read position moves
    const perChannel = Math.ceil(READS / expected.length);
    const nextIds = await sql<{ id: string; channel_id: string; rank: number }[]>`
      select n.id, b.id as channel_id, b.member_rank as rank from bench_unread_channels b
        cross join lateral (select m.id from messages m where m.channel_id = b.id and m.id > b.position_id
          and m.deleted_at is null and m.parent_message_id is null order by m.id limit ${perChannel}) n
      where b.member order by n.id`;
    const queues = new Map<string, string[]>();
    for (const row of nextIds) queues.set(row.channel_id, [...(queues.get(row.channel_id) ?? []), row.id]);
    const readLatencies: number[] = [];
    let readErrors = 0;
    const readProblems: string[] = [];
    log(`unread: ${READS} read position moves, one message forward each`);
    const readCpu = await cpuOf(async () => {
      for (let i = 0; i < READS; i++) {
        const channel = expected[i % expected.length]!;
        const messageId = queues.get(channel.id)?.shift();
        if (!messageId) break;
        const started = performance.now();
        try {
          const answer = await call("POST", `${listUrl}/${channel.id}/read`, token, { message_id: messageId });
          const ms = performance.now() - started;
          if (answer.status !== 200) {
            readErrors++;
            if (readProblems.length < 3) readProblems.push(`read: HTTP ${answer.status} ${answer.body.slice(0, 200)}`);
            continue;
          }
          readLatencies.push(ms);
          const data = (
            JSON.parse(answer.body) as {
              data: { last_read_message_id: string; unread_count: number; mention_count: number };
            }
          ).data;
          if (data.last_read_message_id !== messageId || data.unread_count !== COUNT_CAP || !(data.mention_count > 0)) {
            if (readProblems.length < 3) readProblems.push(`read: ${channel.id} answered ${answer.body.slice(0, 200)}`);
          }
        } catch (error) {
          readErrors++;
          if (readProblems.length < 3) readProblems.push(`read: ${(error as Error).message}`);
        }
      }
      return readLatencies.length;
    });
    for (const text of readProblems) log(`unread: ${text}`);
    await resetPositions();

    const rows = [
      latencyRow(
        `GET /api/v1/workspaces/{id}/channels (${visible!.n} channels)`,
        latencies.channels,
        errors.channels,
        bytes.channels,
        cpu.channels,
        true,
      ),
      latencyRow(
        `GET /api/v1/unread (${expected.length} channels unread)`,
        latencies.unread,
        errors.unread,
        bytes.unread,
        cpu.unread,
        true,
      ),
      latencyRow("POST …/channels/{c}/read (one message on)", readLatencies, readErrors, null, readCpu, false),
    ];
    const answersRight =
      listProblems.length === 0 && unreadProblems.length === 0 && readProblems.length === 0 && differing === 0;
    return {
      settings: {
        messages: MESSAGES,
        channels: CHANNELS,
        member_channels: MEMBER_CHANNELS,
        requests: REQUESTS,
        warmup: WARMUP,
        reads: READS,
      },
      data_set: {
        loaded_this_run: loadedThisRun,
        load_seconds_this_run: loadSeconds,
        load_seconds_total: round(state.load_seconds, 1),
        loaded_at: state.loaded_at?.toISOString() ?? null,
        workspace_id: workspaceId,
        messages: Number(sizes!.messages),
        database_mib: mib(sizes!.database),
        messages_heap_mib: mib(sizes!.heap),
        messages_indexes_mib: mib(sizes!.indexes),
        index_mib: Object.fromEntries(indexSizes.map((row) => [row.name, mib(row.bytes)])),
        listed_channels: visible!.n,
      },
      rows,
      machine,
      explain: explains,
      checks: { list: listProblems, unread: unreadProblems, reads: readProblems, differing_answers: differing },
      targets: {
        channels_p95_under_30ms: rows[0]!.pass,
        unread_p95_under_30ms: rows[1]!.pass,
        answers_right: answersRight,
      },
    };
  } finally {
    await sql.end({ timeout: 5 });
    await server.stop();
  }
}
