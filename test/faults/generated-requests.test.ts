// Issue 11, item 6 a, and its sequel: at least 50,000 generated bad requests, through every door
// of one real server process (`npm start`, a child process, on a fresh database):
// - REST (/api/v1), from GET /api/v1/openapi.json, for every operation: each path/query
//   parameter and body field mutated (wrong types, missing, null, empty, over-limit strings, NUL
//   and lone surrogates, integers around the 32/53/64-bit boundaries, unicode oddities), the
//   body as a whole (malformed, truncated, scalar or array bodies, JSON nested 5,000 and 100,000
//   levels deep, unknown and prototype-polluting fields, wrong content types, invalid UTF-8, a
//   body shorter than its Content-Length, 2 MiB), methods and paths the document does not have,
//   a stranger's private ids in place of the owner's, plus cases drawn by fast-check;
// - tRPC over HTTP (/trpc), from the router's procedure list and each procedure's zod input:
//   GET /trpc/<query>?input=…, POST /trpc/<mutation>, batches (?batch=1) of either, raw
//   bodies, the wrong HTTP method, unknown procedures (rpc-generators.ts);
// - tRPC over WebSocket (/trpc upgrade): the same inputs as request frames of each procedure's
//   type (queries, mutations, subscriptions) pipelined on long-lived sockets, the wrong request
//   type, unknown procedures, batch frames, malformed frames and envelopes, connection params
//   that cannot be used, frames past 1 MiB; and subscriptions to a stranger's private channels,
//   conversation and room while the stranger writes there.
// The requests come from a real user, who owns a workspace (channels, messages, an invite, a
// token, attachments, a direct conversation, a temporary room), from nobody, and from bogus
// tokens; a stranger keeps a private workspace, a private channel in a workspace the user has
// joined, a direct conversation and a room, their messages carrying a marker word.
//
// Asserted: no answer at or above 500 (on tRPC, no INTERNAL_SERVER_ERROR either), a REST 4xx is
// the documented error body (a string `message`; a 422 also `errors`), no answer or frame leaks
// (SQL, a password hash, a stack trace, a file path, APP_KEY, the stranger's token or the marker
// word), every request answered, a stranger's place never answered with data (REST and tRPC: no
// 2xx where its ids are looked up; WebSocket: an error frame, never data), the server process
// alive throughout (same pid) and healthy at the end, and at least MIN_TOTAL_REQUESTS sent. A
// table of the requests per door is printed at the end.
//
// Run: `npm run test:faults -- test/faults/generated-requests.test.ts`, with DATABASE_URL and
// REDIS_URL for PostgreSQL + Redis, without them for PGlite. Reproducible: the seed is printed;
// FAULTS_SEED=<n> replays or varies it. The server logs at FAULTS_LOG_LEVEL (error) into the
// fault folder (FAULTS_KEEP_LOGS=1 keeps it); FAULTS_CONCURRENCY (16) HTTP requests in flight;
// FAULTS_WS_LANES (8) signed-in sockets; FAULTS_HTTP_SHARE (0.5) of the tRPC inputs also go over
// HTTP. Failures print as a deduplicated list (mutation, status, operations, one example request
// and the answer) and are written in full as JSON to $TMPDIR/generated-requests-failures.json.
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientFrames } from "../../server/http/trpc-ws-protocol.ts";
import { restClient, type RestClient } from "../helpers/api.ts";
import {
  createWorkspaceWithGeneral,
  DEFAULT_PASSWORD,
  registerUser,
  uniqueEmail,
  type RegisteredUser,
} from "../helpers/factories.ts";
import { createDatabase } from "../helpers/server.ts";
import {
  BOGUS_AUTHORIZATIONS,
  buildCases,
  CONCURRENCY,
  DESTRUCTIVE,
  describeSent,
  enc,
  excerpt,
  FailureLog,
  leakIn,
  operationsOf,
  randomPools,
  RANDOM_CASES_PER_OPERATION,
  restProblem,
  REVOKES_OWN_TOKEN,
  runPool,
  SEED,
  send,
  serialize,
  undocumentedCases,
  type Auth,
  type Body,
  type Case,
  type Fixtures,
  type OpenApiDocument,
  type Operation,
  type Secret,
} from "./request-generators.ts";
import {
  httpBatchCases,
  httpRawCases,
  httpSingleCases,
  httpUnknownProcedureCases,
  oneShotSocket,
  proceduresOf,
  rpcInputs,
  frameProblem,
  unknownProcedureNames,
  wsBatchCases,
  wsInputCases,
  wsMalformedCases,
  wsMethodCases,
  wsOversizedCases,
  wsParamsCases,
  WsLane,
  type HttpRpcCase,
  type Procedure,
  type RpcInput,
  type WsCase,
} from "./rpc-generators.ts";
import { faultDir, sleep, startServer, stopAll, type ServerProc } from "./support.ts";

const MIN_TOTAL_REQUESTS = 50_000;
/** REST cases whose (already mutated) inputs also go through tRPC over HTTP, as sent to REST. */
const TRPC_REST_SAMPLE = 500;
/** The share of the tRPC inputs sent as single calls over HTTP too (over WebSocket: all of them). */
const HTTP_INPUT_SHARE = Number(process.env.FAULTS_HTTP_SHARE ?? 0.5);
const WS_LANES = Number(process.env.FAULTS_WS_LANES ?? 8);
/** Requests in flight on one socket. */
const WS_WINDOW = 16;
const WS_TIMEOUT_MS = 20_000;

type Door =
  | "REST /api/v1"
  | "tRPC HTTP GET (queries)"
  | "tRPC HTTP POST (mutations)"
  | "tRPC HTTP batched"
  | "tRPC HTTP other methods"
  | "WS calls (query/mutation)"
  | "WS subscriptions"
  | "WS subscriptions, stranger's places"
  | "WS batch frames"
  | "WS malformed frames"
  | "WS connection params"
  | "WS frames over 1 MiB";

const DOORS: Door[] = [
  "REST /api/v1",
  "tRPC HTTP GET (queries)",
  "tRPC HTTP POST (mutations)",
  "tRPC HTTP batched",
  "tRPC HTTP other methods",
  "WS calls (query/mutation)",
  "WS subscriptions",
  "WS subscriptions, stranger's places",
  "WS batch frames",
  "WS malformed frames",
  "WS connection params",
  "WS frames over 1 MiB",
];

/** Requests sent, those accepted (2xx, a result, a started subscription), and problems found, per door. */
class Tally {
  readonly rows = new Map<Door, { sent: number; accepted: number; problems: Map<string, number> }>(
    DOORS.map((door) => [door, { sent: 0, accepted: 0, problems: new Map() }]),
  );
  sent(door: Door) {
    this.rows.get(door)!.sent++;
  }
  accepted(door: Door) {
    this.rows.get(door)!.accepted++;
  }
  problem(door: Door, kind: string) {
    const problems = this.rows.get(door)!.problems;
    problems.set(kind, (problems.get(kind) ?? 0) + 1);
  }
  total() {
    return [...this.rows.values()].reduce((sum, row) => sum + row.sent, 0);
  }
  problems(kind?: string) {
    let count = 0;
    for (const row of this.rows.values())
      for (const [name, n] of row.problems) if (kind === undefined || name === kind) count += n;
    return count;
  }
  render(): string {
    const kinds = ["5xx", "leak", "foreign", "no-answer"];
    const line = (label: string, sent: number, accepted: number, counts: number[], other: number) =>
      [
        label.padEnd(38),
        sent.toLocaleString("en").padStart(9),
        accepted.toLocaleString("en").padStart(9),
        ...counts.map((count) => String(count).padStart(9)),
        String(other).padStart(7),
      ].join(" ");
    const lines = [
      ["door".padEnd(38), "requests".padStart(9), "accepted".padStart(9), ...kinds.map((k) => k.padStart(9))]
        .concat("other".padStart(7))
        .join(" "),
    ];
    for (const [door, row] of this.rows) {
      const other = [...row.problems].filter(([kind]) => !kinds.includes(kind)).reduce((sum, [, n]) => sum + n, 0);
      lines.push(
        line(
          door,
          row.sent,
          row.accepted,
          kinds.map((kind) => row.problems.get(kind) ?? 0),
          other,
        ),
      );
    }
    const rows = [...this.rows.values()];
    lines.push(
      line(
        "total",
        this.total(),
        rows.reduce((sum, row) => sum + row.accepted, 0),
        kinds.map((kind) => this.problems(kind)),
        this.problems() - kinds.reduce((sum, kind) => sum + this.problems(kind), 0),
      ),
    );
    return lines.join("\n");
  }
}

describe("generated bad requests at every door (REST, tRPC over HTTP, tRPC over WebSocket)", () => {
  let server: ServerProc;
  let serverPid: number;
  let database: { url: string; drop(): Promise<void> } | undefined;
  let api: RestClient;
  let fx: Fixtures;
  let stranger: RegisteredUser;
  let operations: Operation[];
  let restCases: Case[];
  let procedures: Procedure[];
  let inputs: RpcInput[];
  let secrets: Secret[];
  const tally = new Tally();
  const failures = new FailureLog();
  /** Cases that delete or revoke what the others rely on: sent last, every door. */
  const deferred = {
    rest: [] as Case[],
    http: [] as (HttpRpcCase & { auth: Auth; bogus: string })[],
    ws: [] as WsCase[],
  };
  const timings: string[] = [];
  let tablePrinted = false;

  async function mintToken(): Promise<string> {
    const minted = await api.post(
      "/api/v1/tokens",
      { name: "fuzz-logout", abilities: ["*"] },
      { token: fx.owner.token },
    );
    if (minted.status !== 201) throw new Error(`token: ${minted.status} ${JSON.stringify(minted.body)}`);
    return minted.body.access_token;
  }

  async function authorization(
    testCase: { auth: Auth; bogus: string },
    revokesOwnToken: boolean,
  ): Promise<Record<string, string>> {
    if (testCase.auth === "none") return {};
    if (testCase.auth === "bogus") return { Authorization: testCase.bogus };
    return { Authorization: `Bearer ${revokesOwnToken ? await mintToken() : fx.owner.token}` };
  }

  /**
   * Auth for each of `count` cases, drawn from the seed: mostly the real user (`userShare` in
   * 100), then nobody, then a bogus token.
   */
  function authPicks(seed: number, count: number, userShare = 70) {
    const noneShare = userShare + Math.round((100 - userShare) * (2 / 3));
    return fc
      .sample(fc.tuple(fc.integer({ min: 0, max: 99 }), fc.nat()), { seed, numRuns: Math.max(1, count) })
      .map(([roll, which]) => ({
        auth: (roll < userShare ? "user" : roll < noneShare ? "none" : "bogus") as Auth,
        bogus: BOGUS_AUTHORIZATIONS[which % BOGUS_AUTHORIZATIONS.length]!,
      }));
  }

  function expectServerAlive() {
    expect(server.proc().alive(), `the server process exited:\n${server.proc().tail(40)}`).toBe(true);
    expect(server.proc().pid).toBe(serverPid);
  }

  /** Before the last phase nothing may have signed the owner out: the doors after it would only see 401s. */
  async function expectOwnerSignedIn() {
    const me = await api.get("/api/v1/me", { token: fx.owner.token });
    expect(me.status, "the owner's token still works").toBe(200);
  }

  async function timed(label: string, work: () => Promise<void>) {
    const started = Date.now();
    await work();
    timings.push(`${label} ${((Date.now() - started) / 1000).toFixed(1)}s`);
  }

  beforeAll(async () => {
    database = process.env.DATABASE_URL ? await createDatabase(process.env.DATABASE_URL) : undefined;
    const appKey = randomBytes(32).toString("base64url");
    server = await startServer("generated-requests", {
      APP_KEY: appKey,
      HOST: "127.0.0.1",
      LOG_LEVEL: process.env.FAULTS_LOG_LEVEL ?? "error",
      // Push never leaves the machine (a closed port), as in test/helpers/server.ts.
      PUSH_EXPO_URL: "http://127.0.0.1:9/--/api/v2/push/send",
      ...(database && { DATABASE_URL: database.url }),
      ...(process.env.REDIS_URL && {
        REDIS_URL: process.env.REDIS_URL,
        REDIS_PREFIX: `faults-${randomBytes(4).toString("hex")}`,
      }),
    });
    serverPid = server.proc().pid;
    api = restClient(server.url);
    const expect2xx = (what: string, response: { status: number; body: any }) => {
      if (response.status >= 300) throw new Error(`${what}: ${response.status} ${JSON.stringify(response.body)}`);
      return response.body;
    };
    const as = (user: RegisteredUser) => ({ token: user.token });
    const upload = async (user: RegisteredUser, name: string, content: string) => {
      const form = new FormData();
      form.append("file", new Blob([content], { type: "text/plain" }), name);
      return expect2xx("upload", await api.post("/api/v1/files", form, as(user))).data.id as string;
    };

    // The owner's places.
    const owner = await registerUser(api);
    const other = await registerUser(api, { email: uniqueEmail("other") });
    const { workspaceId, channelId } = await createWorkspaceWithGeneral(api, owner);
    const extra = expect2xx(
      "channel",
      await api.post(`/api/v1/workspaces/${workspaceId}/channels`, { name: "fuzz extra" }, as(owner)),
    );
    const invite = expect2xx("invite", await api.post(`/api/v1/workspaces/${workspaceId}/invites`, {}, as(owner)));
    expect2xx("accept", await api.post(`/api/v1/invites/${invite.data.token}/accept`, undefined, as(other)));
    const members = expect2xx("members", await api.get(`/api/v1/workspaces/${workspaceId}/members`, as(owner)));
    const pat = expect2xx("token", await api.post("/api/v1/tokens", { name: "fuzz", abilities: ["read"] }, as(owner)));
    const conversation = expect2xx(
      "conversation",
      await api.post("/api/v1/direct-conversations", { participant_user_id: other.id }, as(owner)),
    );
    const [channelAttachmentId, directAttachmentId] = [
      await upload(owner, "fuzz.txt", "fuzz attachment"),
      await upload(owner, "fuzz.txt", "fuzz attachment"),
    ];
    const channelMessage = expect2xx(
      "message",
      await api.post(
        `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
        { content: "hello", attachment_ids: [channelAttachmentId] },
        as(owner),
      ),
    );
    const directMessage = expect2xx(
      "direct message",
      await api.post(
        `/api/v1/direct-conversations/${conversation.data.id}/messages`,
        { content: "hi", attachment_ids: [directAttachmentId] },
        as(owner),
      ),
    );
    const room = expect2xx("room", await api.post("/api/v1/external/rooms", { name: "fuzz room" }, as(owner)));
    const roomMessage = expect2xx(
      "room message",
      await api.post(`/api/v1/external/rooms/${room.data.room_id}/messages`, { content: "hey" }, as(owner)),
    );

    // A stranger's private places, each holding the marker word.
    const marker = `zqmarker${randomBytes(6).toString("hex")}`;
    stranger = await registerUser(api, { email: uniqueEmail("stranger") });
    const confidant = await registerUser(api, { email: uniqueEmail("confidant") });
    const privateWorkspace = expect2xx(
      "private workspace",
      await api.post("/api/v1/workspaces", { name: `Hidden ${marker}`, visibility: "private" }, as(stranger)),
    );
    const privateChannels = expect2xx(
      "private channels",
      await api.get(`/api/v1/workspaces/${privateWorkspace.data.id}/channels`, as(stranger)),
    );
    const hiddenGeneral = (privateChannels.data as { id: string; slug: string }[]).find((c) => c.slug === "general")!;
    const hiddenAttachment = await upload(stranger, `${marker}.txt`, `contents ${marker}`);
    const hiddenMessage = expect2xx(
      "hidden message",
      await api.post(
        `/api/v1/workspaces/${privateWorkspace.data.id}/channels/${hiddenGeneral.id}/messages`,
        { content: `private ${marker}`, attachment_ids: [hiddenAttachment] },
        as(stranger),
      ),
    );
    const hiddenInvite = expect2xx(
      "hidden invite",
      await api.post(`/api/v1/workspaces/${privateWorkspace.data.id}/invites`, {}, as(stranger)),
    );
    const hiddenMembers = expect2xx(
      "hidden members",
      await api.get(`/api/v1/workspaces/${privateWorkspace.data.id}/members`, as(stranger)),
    );
    const shared = expect2xx(
      "shared workspace",
      await api.post("/api/v1/workspaces", { name: "Shared fuzz", visibility: "public" }, as(stranger)),
    );
    expect2xx("join shared", await api.post(`/api/v1/workspaces/${shared.data.id}/join`, {}, as(owner)));
    const privateChannel = expect2xx(
      "private channel",
      await api.post(
        `/api/v1/workspaces/${shared.data.id}/channels`,
        { name: `secret ${marker}`, visibility: "private" },
        as(stranger),
      ),
    );
    const privateChannelMessage = expect2xx(
      "private channel message",
      await api.post(
        `/api/v1/workspaces/${shared.data.id}/channels/${privateChannel.data.id}/messages`,
        { content: `whisper ${marker}` },
        as(stranger),
      ),
    );
    const hiddenConversation = expect2xx(
      "hidden conversation",
      await api.post("/api/v1/direct-conversations", { participant_user_id: confidant.id }, as(stranger)),
    );
    const hiddenDirectAttachment = await upload(stranger, `${marker}-dm.txt`, `contents ${marker}`);
    const hiddenDirectMessage = expect2xx(
      "hidden direct message",
      await api.post(
        `/api/v1/direct-conversations/${hiddenConversation.data.id}/messages`,
        { content: `between us ${marker}`, attachment_ids: [hiddenDirectAttachment] },
        as(stranger),
      ),
    );
    const hiddenRoom = expect2xx(
      "hidden room",
      await api.post("/api/v1/external/rooms", { name: `den ${marker}` }, as(stranger)),
    );
    const hiddenRoomMessage = expect2xx(
      "hidden room message",
      await api.post(
        `/api/v1/external/rooms/${hiddenRoom.data.room_id}/messages`,
        { content: `in the den ${marker}` },
        as(stranger),
      ),
    );
    const strangerPat = expect2xx(
      "stranger token",
      await api.post("/api/v1/tokens", { name: "stranger", abilities: ["*"] }, as(stranger)),
    );
    // The premise: the owner sees the shared workspace, not the private channel in it.
    const seen = await api.get(`/api/v1/workspaces/${shared.data.id}/channels`, as(owner));
    expect(seen.status).toBe(200);
    expect(JSON.stringify(seen.body)).not.toContain(marker);

    fx = {
      owner,
      other,
      workspaceId,
      channelId,
      extraChannelId: extra.data.id,
      memberId: (members.data as { id: string; user_id: number }[]).find((member) => member.user_id === other.id)!.id,
      inviteId: invite.data.id,
      inviteToken: invite.data.token,
      patId: pat.data.id,
      conversationId: conversation.data.id,
      channelMessageId: channelMessage.data.id,
      directMessageId: directMessage.data.id,
      channelAttachmentId,
      directAttachmentId,
      roomId: room.data.room_id,
      roomMessageId: roomMessage.data.id,
      marker,
      foreign: {
        workspaceId: privateWorkspace.data.id,
        channelId: hiddenGeneral.id,
        channelMessageId: hiddenMessage.data.id,
        channelAttachmentId: hiddenAttachment,
        memberId: (hiddenMembers.data as { id: string; user_id: number }[]).find((m) => m.user_id === stranger.id)!.id,
        inviteId: hiddenInvite.data.id,
        sharedWorkspaceId: shared.data.id,
        privateChannelId: privateChannel.data.id,
        privateChannelMessageId: privateChannelMessage.data.id,
        conversationId: hiddenConversation.data.id,
        directMessageId: hiddenDirectMessage.data.id,
        directAttachmentId: hiddenDirectAttachment,
        roomId: hiddenRoom.data.room_id,
        roomMessageId: hiddenRoomMessage.data.id,
        patId: strangerPat.data.id,
      },
    };
    secrets = [
      { label: "APP_KEY", value: appKey },
      { label: "the stranger's token", value: stranger.token },
      { label: "the stranger's personal access token", value: strangerPat.access_token },
      { label: "the confidant's token", value: confidant.token },
      { label: "the stranger's private words", value: marker },
      { label: "the users' password", value: DEFAULT_PASSWORD },
      { label: "the server's data folder", value: faultDir() },
      ...(database ? [{ label: "the database's name", value: new URL(database.url).pathname.slice(1) }] : []),
    ];

    const document = await api.get<OpenApiDocument>("/api/v1/openapi.json");
    operations = operationsOf(document.body);
    const random = randomPools(SEED, operations.length * RANDOM_CASES_PER_OPERATION);
    const built = operations.flatMap((op) => buildCases(op, fx, random));
    const drafts = [...built, ...undocumentedCases(operations, built)];
    const picks = authPicks(SEED + 1, drafts.length);
    restCases = drafts.map((draft, i): Case => ({
      ...draft,
      ...picks[i]!,
      ...(draft.mutation === "baseline" && { auth: "user" as Auth }),
    }));

    procedures = proceduresOf(operations);
    const restBaselines = new Map(
      built
        .filter((testCase) => testCase.mutation === "baseline")
        .map((testCase) => [testCase.op.name, testCase as Case]),
    );
    inputs = rpcInputs(procedures, restBaselines, fx, SEED + 4);
    console.log(
      `generated requests: seed ${SEED} (FAULTS_SEED to change), ${operations.length} operations, ${procedures.length} procedures, ` +
        `${restCases.length} REST cases, ${inputs.length} tRPC inputs, database ${database ? "PostgreSQL" : "PGlite"}, ` +
        `redis ${process.env.REDIS_URL ? "yes" : "no"}, server pid ${serverPid}`,
    );
  });

  afterAll(async () => {
    if (tally.total() && !tablePrinted) console.log(`generated requests per door (seed ${SEED}):\n${tally.render()}`);
    if (timings.length) console.log(`generated requests, time per door: ${timings.join(", ")}`);
    if (failures.byKey.size) {
      const file = path.join(tmpdir(), "generated-requests-failures.json");
      writeFileSync(file, JSON.stringify([...failures.byKey.values()], null, 2));
      console.log(`distinct failures (${failures.byKey.size}; also in ${file}):\n${failures.render()}`);
      console.log(`server log (last lines):\n${server?.proc().tail(60)}`);
    }
    await stopAll();
    await database?.drop();
  });

  /** Records a REST answer: its problem, and a 2xx for a stranger's place. */
  async function sendRest(testCase: Case) {
    const headers = await authorization(testCase, REVOKES_OWN_TOKEN.has(testCase.op.name));
    const outcome = await send(
      server.url,
      testCase.op.method,
      testCase.url,
      headers,
      testCase.body,
      testCase.lyingLength,
    );
    tally.sent("REST /api/v1");
    if (outcome.status !== undefined && outcome.status < 300) tally.accepted("REST /api/v1");
    let problem = restProblem(outcome, testCase.lyingLength ?? false, secrets) as
      { kind: string; detail: string } | undefined;
    if (!problem && testCase.foreign && outcome.status !== undefined && outcome.status < 300)
      problem = { kind: "foreign", detail: "a stranger's place answered 2xx" };
    if (!problem) return;
    const kind = problem.kind === "no-response" ? "no-answer" : problem.kind;
    tally.problem("REST /api/v1", kind);
    failures.add({
      kind: `REST ${kind}`,
      method: testCase.op.method,
      path: testCase.op.path,
      mutation: testCase.mutation,
      status: String(outcome.status ?? "-"),
      detail: problem.kind === "5xx" ? "" : problem.detail,
      auth: testCase.auth,
      sent: describeSent(testCase),
      got: outcome.error ?? excerpt(outcome.text, 200),
    });
  }

  const HTTP_DOOR: Record<HttpRpcCase["door"], Door> = {
    get: "tRPC HTTP GET (queries)",
    post: "tRPC HTTP POST (mutations)",
    batch: "tRPC HTTP batched",
    "other-method": "tRPC HTTP other methods",
  };

  async function sendHttpRpc(rpcCase: HttpRpcCase & { auth: Auth; bogus: string }) {
    const headers = await authorization(rpcCase, rpcCase.revokesOwnToken);
    const bytes = rpcCase.body?.();
    const body: Body =
      bytes === undefined ? { kind: "none" } : { kind: "raw", bytes, contentType: rpcCase.contentType };
    const outcome = await send(server.url, rpcCase.method, rpcCase.url, headers, body);
    const door = HTTP_DOOR[rpcCase.door];
    tally.sent(door);
    if (outcome.status !== undefined && outcome.status < 300) tally.accepted(door);
    let problem: { kind: string; detail: string } | undefined;
    if (outcome.status === undefined) problem = { kind: "no-answer", detail: outcome.error ?? "no answer" };
    else if (outcome.status >= 500) problem = { kind: "5xx", detail: "" };
    else if (/INTERNAL_SERVER_ERROR/.test(outcome.text)) problem = { kind: "5xx", detail: "INTERNAL_SERVER_ERROR" };
    else {
      const leak = leakIn(outcome.text, secrets);
      if (leak) problem = { kind: "leak", detail: `the answer leaks ${leak}` };
      else if (rpcCase.foreign && outcome.status < 300)
        problem = { kind: "foreign", detail: "a stranger's place answered 2xx" };
    }
    if (!problem) return;
    tally.problem(door, problem.kind);
    const sentBody =
      bytes === undefined ? "" : ` ${excerpt(typeof bytes === "string" ? bytes : bytes.toString("latin1"), 120)}`;
    failures.add({
      kind: `tRPC HTTP ${problem.kind}`,
      method: rpcCase.method,
      path: `/trpc/${rpcCase.procedure}`,
      mutation: rpcCase.label,
      status: String(outcome.status ?? "-"),
      detail: problem.detail,
      auth: rpcCase.auth,
      sent: `${rpcCase.method} ${excerpt(rpcCase.url, 160)}${sentBody}`,
      got: outcome.error ?? excerpt(outcome.text, 200),
    });
  }

  function wsDoor(testCase: WsCase): Door {
    switch (testCase.kind) {
      case "call":
        return "WS calls (query/mutation)";
      case "subscription":
        return testCase.foreign ? "WS subscriptions, stranger's places" : "WS subscriptions";
      case "batch":
        return "WS batch frames";
      case "malformed":
        return "WS malformed frames";
      case "params":
        return "WS connection params";
      case "oversized":
        return "WS frames over 1 MiB";
    }
  }

  function wsFailure(testCase: WsCase, kind: string, detail: string, got: string) {
    const door = wsDoor(testCase);
    tally.problem(door, kind);
    const frame = testCase.frame(1);
    failures.add({
      kind: `WS ${kind}`,
      method: testCase.kind,
      path: testCase.procedure,
      mutation: testCase.label,
      status: "-",
      detail,
      auth: testCase.auth,
      sent: excerpt(typeof frame === "string" ? frame : `(binary) ${frame.toString("latin1")}`, 160),
      got: excerpt(got, 200),
    });
  }

  /** Sends one WebSocket case on `lane` (or a socket of its own) and judges what comes back. */
  async function sendWs(testCase: WsCase, lane: () => Promise<WsLane>) {
    tally.sent(wsDoor(testCase));
    if (testCase.kind === "params" || testCase.kind === "oversized") {
      const frames =
        testCase.kind === "params"
          ? [testCase.frame(1), clientFrames.request(1, "query", "me.get")]
          : [clientFrames.connectionParams({ token: fx.owner.token }), testCase.frame(1)];
      // A refused connection is answered `id: null` (then closed); one that is let in, anonymous, answers the request.
      const answered = (texts: string[]) =>
        texts.some((text) => /^\{"id":(null|1)\b/.test(text) && !/"type":"started"/.test(text));
      const outcome = await oneShotSocket(server.url, frames, {
        ...(testCase.kind === "params" && { until: answered }),
        timeoutMs: WS_TIMEOUT_MS,
      });
      for (const text of outcome.texts) {
        const problem = frameProblem(text, secrets);
        if (problem) wsFailure(testCase, problem.kind, problem.detail, text);
      }
      if (outcome.error) wsFailure(testCase, "no-answer", `the socket did not open: ${outcome.error}`, "");
      else if (testCase.kind === "params" && outcome.texts.length === 0)
        wsFailure(testCase, "no-answer", `no frame (close ${outcome.closeCode})`, "");
      else if (testCase.kind === "oversized" && outcome.closeCode !== 1009)
        wsFailure(testCase, "close", `closed with ${outcome.closeCode}, not 1009`, outcome.texts.join(" "));
      return;
    }
    const socket = await lane();
    if (testCase.serial) {
      const outcome = await socket.serial(testCase, WS_TIMEOUT_MS);
      if (outcome.text === undefined) {
        wsFailure(
          testCase,
          "no-answer",
          outcome.closed === undefined ? "no answer" : `socket closed ${outcome.closed}`,
          "",
        );
        return;
      }
      if (/"result":/.test(outcome.text)) tally.accepted(wsDoor(testCase));
      const problem = frameProblem(outcome.text, secrets);
      if (problem) wsFailure(testCase, problem.kind, problem.detail, outcome.text);
      else if (testCase.foreign && !/"error"/.test(outcome.text))
        wsFailure(testCase, "foreign", "a stranger's place answered without an error", outcome.text);
      return;
    }
    const outcome = await socket.request(testCase, WS_TIMEOUT_MS);
    if (outcome.started > 0 || outcome.frames.some((text) => /"result":\{"type":"data"/.test(text)))
      tally.accepted(wsDoor(testCase));
    for (const text of outcome.frames) {
      const problem = frameProblem(text, secrets);
      if (problem) wsFailure(testCase, problem.kind, problem.detail, text);
    }
    if (outcome.closed !== undefined) wsFailure(testCase, "no-answer", `socket closed ${outcome.closed}`, "");
    else if (outcome.timedOut)
      wsFailure(testCase, "no-answer", `no answer in ${WS_TIMEOUT_MS} ms`, outcome.frames.join(" "));
    else if (testCase.foreign) {
      if (outcome.data > 0) wsFailure(testCase, "foreign", "data from a stranger's place", outcome.frames.join(" "));
      else if (outcome.started > 0 || outcome.errors === 0)
        wsFailure(testCase, "foreign", "a stranger's place answered without an error", outcome.frames.join(" "));
    }
  }

  /** Signed-in sockets (and one anonymous, one with a bogus token), reopened if the server closes one. */
  async function openLanes() {
    const tokens: (string | undefined)[] = [
      ...Array.from({ length: WS_LANES }, () => fx.owner.token),
      undefined,
      "not-a-token",
    ];
    const lanes = await Promise.all(tokens.map((token) => WsLane.open(server.url, token, secrets)));
    const reopening = new Map<number, Promise<WsLane>>();
    const get = (index: number) => async () => {
      const lane = lanes[index]!;
      if (lane.open) return lane;
      let opening = reopening.get(index);
      if (!opening) {
        opening = WsLane.open(server.url, tokens[index], secrets).then((fresh) => {
          lanes[index] = fresh;
          reopening.delete(index);
          return fresh;
        });
        reopening.set(index, opening);
      }
      return opening;
    };
    return { lanes, get, user: WS_LANES, none: WS_LANES, bogus: WS_LANES + 1 };
  }

  /** The stranger writes in each private place while the sockets run: a subscription that got in would see it. */
  function strangerChatter() {
    let running = true;
    const f = fx.foreign;
    const places = [
      `/api/v1/workspaces/${f.workspaceId}/channels/${f.channelId}/messages`,
      `/api/v1/workspaces/${f.sharedWorkspaceId}/channels/${f.privateChannelId}/messages`,
      `/api/v1/direct-conversations/${f.conversationId}/messages`,
      `/api/v1/external/rooms/${f.roomId}/messages`,
    ];
    const loop = (async () => {
      for (let n = 0; running; n++) {
        await Promise.all(
          places.map((place) =>
            api.post(place, { content: `still private ${fx.marker} ${n}` }, { token: stranger.token }),
          ),
        );
        await sleep(250);
      }
    })();
    return async () => {
      running = false;
      await loop;
    };
  }

  it("covers every operation of the document and every procedure of the router", () => {
    const covered = new Set(restCases.map((testCase) => `${testCase.op.method} ${testCase.op.path}`));
    expect(operations.length).toBeGreaterThan(40);
    for (const op of operations) expect(covered.has(`${op.method} ${op.path}`)).toBe(true);
    expect(procedures.length).toBeGreaterThan(50);
    const withInputs = new Set(inputs.map((input) => input.procedure.path));
    for (const procedure of procedures) expect(withInputs.has(procedure.path), procedure.path).toBe(true);
    // Every live procedure gets a stranger's places, where it has any.
    const foreign = new Set(inputs.filter((input) => input.foreign).map((input) => input.procedure.path));
    for (const path of ["messages.onChannel", "direct.onConversation", "rooms.onRoom"])
      expect(foreign.has(path)).toBe(true);
  });

  it("REST: no 5xx, every 4xx the documented error body, no leak, no stranger's place", async () => {
    const before = failures.byKey.size;
    const isDestructive = (testCase: Case) => DESTRUCTIVE(testCase.op);
    deferred.rest = restCases.filter(isDestructive);
    await timed("REST", () =>
      runPool(
        restCases.filter((testCase) => !isDestructive(testCase)),
        CONCURRENCY,
        sendRest,
      ),
    );
    expectServerAlive();
    await expectOwnerSignedIn();
    expect(failures.byKey.size - before, "distinct failing REST requests (listed after the run)").toBe(0);
  });

  it("tRPC over HTTP: GET queries, POST mutations, batches; no 5xx, no INTERNAL_SERVER_ERROR, no leak", async () => {
    const before = failures.byKey.size;
    const cases: HttpRpcCase[] = [
      ...httpSingleCases(inputs, SEED + 9, HTTP_INPUT_SHARE),
      ...httpRawCases(procedures),
      ...httpUnknownProcedureCases(unknownProcedureNames(procedures)),
      ...httpBatchCases(inputs, procedures, SEED + 5),
    ];
    // A sample of the REST cases' inputs, through each procedure's own door (raw bodies included).
    const withProcedure = restCases.filter((testCase) => testCase.op.procedure);
    for (const index of fc.sample(fc.nat({ max: withProcedure.length - 1 }), {
      seed: SEED + 2,
      numRuns: TRPC_REST_SAMPLE,
    })) {
      const testCase = withProcedure[index]!;
      const procedure = testCase.op.procedure!;
      const base = {
        procedure: procedure.path,
        label: `rest:${testCase.mutation}`,
        destructive: DESTRUCTIVE(testCase.op),
        revokesOwnToken: REVOKES_OWN_TOKEN.has(procedure.path),
      };
      const body = serialize(testCase.trpcInput);
      if (procedure.type === "query") {
        const url = `/trpc/${procedure.path}?input=${enc(body)}`;
        if (url.length < 12_000) cases.push({ ...base, door: "get", method: "GET", url });
      } else {
        const contentType = testCase.body.kind === "raw" ? testCase.body.contentType : "application/json";
        cases.push({
          ...base,
          door: "post",
          method: "POST",
          url: `/trpc/${procedure.path}`,
          body: () => body,
          contentType,
        });
      }
    }
    const picks = authPicks(SEED + 3, cases.length);
    const withAuth = cases.map((rpcCase, i) => ({ ...rpcCase, ...picks[i]! }));
    deferred.http = withAuth.filter((rpcCase) => rpcCase.destructive || rpcCase.revokesOwnToken);
    await timed("tRPC HTTP", () =>
      runPool(
        withAuth.filter((rpcCase) => !rpcCase.destructive && !rpcCase.revokesOwnToken),
        CONCURRENCY,
        sendHttpRpc,
      ),
    );
    expectServerAlive();
    await expectOwnerSignedIn();
    expect(failures.byKey.size - before, "distinct failing tRPC HTTP requests (listed after the run)").toBe(0);
  });

  it("tRPC over WebSocket: calls, subscriptions (a stranger's places: an error frame, never data), batches, malformed frames", async () => {
    const before = failures.byKey.size;
    const inputCases = wsInputCases(inputs);
    const calls = [...inputCases, ...wsMethodCases(procedures, inputs, unknownProcedureNames(procedures))];
    const batches = wsBatchCases(calls, SEED + 6);
    const malformed = [...wsMalformedCases(procedures, inputs, SEED + 7), ...wsOversizedCases(procedures, inputs)];
    const params = wsParamsCases(BOGUS_AUTHORIZATIONS.map((value) => value.replace(/^\S+\s?/, "")));
    // Who sends each call: mostly the owner's sockets; a share the anonymous and the bogus one.
    const picks = authPicks(SEED + 8, calls.length, 90);
    const all: WsCase[] = [
      ...calls.map((testCase, i) =>
        testCase.foreign || testCase.serial ? testCase : { ...testCase, auth: picks[i]!.auth },
      ),
      ...batches,
      ...malformed,
      ...params,
    ];
    deferred.ws = all.filter((testCase) => testCase.destructive || testCase.revokesOwnToken);
    const now = all.filter((testCase) => !testCase.destructive && !testCase.revokesOwnToken);
    // A stranger's places, from every signed-in socket.
    const foreignSubscriptions = now.filter((testCase) => testCase.foreign && testCase.kind === "subscription");
    const { lanes, get, none, bogus } = await openLanes();
    const perLane: WsCase[][] = lanes.map(() => []);
    let next = 0;
    for (const testCase of now) {
      if (testCase.kind === "params" || testCase.kind === "oversized") continue;
      if (testCase.foreign && testCase.kind === "subscription") continue;
      const index = testCase.auth === "none" ? none : testCase.auth === "bogus" ? bogus : next++ % WS_LANES;
      perLane[index]!.push(testCase);
    }
    for (let index = 0; index < WS_LANES; index++) perLane[index]!.push(...foreignSubscriptions);
    const alone = now.filter((testCase) => testCase.kind === "params" || testCase.kind === "oversized");
    const stopChatter = strangerChatter();
    try {
      await timed("WebSocket", async () => {
        await Promise.all([
          ...perLane.map((cases, index) => runPool(cases, WS_WINDOW, (testCase) => sendWs(testCase, get(index)))),
          runPool(alone, 4, (testCase) => sendWs(testCase, get(0))),
        ]);
      });
      // Whatever a stranger's subscription that got in would still receive.
      await sleep(1_000);
    } finally {
      await stopChatter();
    }
    for (const lane of lanes) {
      for (const { text, problem } of lane.unexpected) {
        tally.problem("WS calls (query/mutation)", problem.kind);
        failures.add({
          kind: `WS ${problem.kind}`,
          method: "frame",
          path: "(no request of its own)",
          mutation: "-",
          status: "-",
          detail: problem.detail,
          auth: "-",
          sent: "-",
          got: excerpt(text, 200),
        });
      }
      if (lane.foreignData) {
        tally.problem("WS subscriptions, stranger's places", "foreign");
        failures.add({
          kind: "WS foreign",
          method: "subscription",
          path: "(a stranger's place)",
          mutation: "-",
          status: "-",
          detail: `${lane.foreignData} events of a stranger's place delivered`,
          auth: "user",
          sent: "-",
          got: "-",
        });
      }
      lane.close();
    }
    expectServerAlive();
    await expectOwnerSignedIn();
    expect(foreignSubscriptions.length * WS_LANES).toBeGreaterThan(100);
    expect(failures.byKey.size - before, "distinct failing WebSocket frames (listed after the run)").toBe(0);
  });

  it("last, what deletes or revokes: REST, tRPC over HTTP, tRPC over WebSocket", async () => {
    const before = failures.byKey.size;
    await timed("deleting and revoking", async () => {
      await runPool(deferred.rest, CONCURRENCY, sendRest);
      await runPool(deferred.http, CONCURRENCY, sendHttpRpc);
      const shared = await WsLane.open(server.url, fx.owner.token, secrets);
      await runPool(deferred.ws, 8, async (testCase) => {
        if (!testCase.revokesOwnToken) return sendWs(testCase, async () => shared);
        // Each revoking request on a socket signed in with a token of its own.
        const own = await WsLane.open(server.url, await mintToken(), secrets);
        try {
          await sendWs(testCase, async () => own);
        } finally {
          own.close();
        }
      });
      shared.close();
    });
    expectServerAlive();
    expect(failures.byKey.size - before, "distinct failing requests (listed after the run)").toBe(0);
  });

  it(`sent at least ${MIN_TOTAL_REQUESTS.toLocaleString("en")} requests, with no 5xx, no leak, and the server up throughout`, async () => {
    console.log(`generated requests per door (seed ${SEED}):\n${tally.render()}`);
    tablePrinted = true;
    expectServerAlive();
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    expect(tally.problems("5xx"), "answers at or above 500 / INTERNAL_SERVER_ERROR").toBe(0);
    expect(tally.problems("leak"), "answers that leak").toBe(0);
    expect(tally.problems("foreign"), "a stranger's places answered").toBe(0);
    expect(tally.problems(), "problems of any kind").toBe(0);
    expect(tally.total()).toBeGreaterThanOrEqual(MIN_TOTAL_REQUESTS);
  });
});
