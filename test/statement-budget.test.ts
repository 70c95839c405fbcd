// Statement budgets, counted at the database driver (db/statement-count.ts): how many statements
// a post runs in its own request scope (each kind of post, with a token used just before and with
// one never used), and how many the whole process runs while nobody uses it. Then the counter's
// own checks: it sees a transaction's BEGIN and COMMIT, a reserved connection's statements, and
// gives each statement to its scope when scopes run at once.
//
// The idle window takes 90 s (30 s of warm-up, then 60 s counted) on a server of its own: it runs
// concurrently with the rest of the file. STATEMENT_BUDGET_WARMUP_MS and STATEMENT_BUDGET_WINDOW_MS
// shorten it when debugging (the budget scales with the window).
import WebSocket from "ws";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf } from "../db/client.ts";
import { BACKGROUND_SCOPE, detached, statementScope } from "../db/statement-count.ts";
import { clientFrames, trpcSocketUrl } from "../server/http/trpc-ws-protocol.ts";
import { RunLoop } from "../server/run-loop.ts";
import type { ApiResponse } from "./helpers/api.ts";
import { RawSocket } from "./helpers/raw-socket.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { startTestServer, useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";
import {
  countIdleStatements,
  countRequestStatements,
  describeStatements,
  measureRequest,
  newRequestId,
  statementsOf,
  type CountedStatements,
} from "./helpers/statements.ts";

const POST_BUDGET = 2;
/**
 * A token used just before is served from the process's memory (server/services/accounts/
 * credential-watch.ts): the post's own statement only.
 */
const CACHED_POST_BUDGET = 1;
const WEBHOOK_POST_BUDGET = 4;
/** An edit, a reaction and taking it back: the token check and one statement. */
const CHANGE_BUDGET = 2;
/** A delete may be a transaction (BEGIN, its statement, COMMIT) after the token check. */
const DELETE_BUDGET = 4;
const IDLE_BUDGET_PER_MINUTE = 12;
/** A read position (POST …/read, …/unread) and GET /api/v1/unread: the token check and one statement. */
const READ_BUDGET = 2;
/** The channel list with its counts: the token check, the workspace membership, the list. */
const LIST_BUDGET = 3;
const MANY_CHANNELS = 12;
/**
 * A search: the token check, the readable places, the newest rows checked (a wider window when
 * the term is frequent), the index's older candidates (when the page is not full yet), and the
 * page's records (messages, their files).
 */
const SEARCH_BUDGET = 7;

const WARMUP_MS = Number(process.env.STATEMENT_BUDGET_WARMUP_MS ?? 30_000);
const WINDOW_MS = Number(process.env.STATEMENT_BUDGET_WINDOW_MS ?? 60_000);
const IDLE_BUDGET = Math.ceil((IDLE_BUDGET_PER_MINUTE * WINDOW_MS) / 60_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function report(what: string, counted: CountedStatements, budget: number): string {
  return `${what} ran ${counted.count} statements (budget ${budget}):\n${describeStatements(counted)}`;
}

describe.concurrent("an idle server", () => {
  it(
    `runs at most ${IDLE_BUDGET} statements in ${WINDOW_MS / 1000} s, all scopes, after ${WARMUP_MS / 1000} s of warm-up`,
    { timeout: WARMUP_MS + WINDOW_MS + 60_000 },
    async () => {
      const server = await startTestServer();
      try {
        await sleep(WARMUP_MS);
        const idle = await countIdleStatements(server, WINDOW_MS);
        expect(idle.count, report(`an idle server, in ${WINDOW_MS / 1000} s,`, idle, IDLE_BUDGET)).toBeLessThanOrEqual(
          IDLE_BUDGET,
        );
      } finally {
        await server.close();
      }
    },
  );
});

// Concurrent with the idle server only: the tests inside run one after another.
describe.concurrent("requests", () => {
  describe.sequential("on one server", () => {
    const ctx = useTestServer();

    async function login(user: RegisteredUser): Promise<string> {
      const response = await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password });
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      return response.body.access_token;
    }

    /** One kind of post, ready to send: `post(token, headers)` posts once more. */
    type Poster = {
      user: RegisteredUser;
      post(token: string, headers: Record<string, string>): Promise<ApiResponse>;
    };

    async function channelPoster(): Promise<Poster & { workspaceId: string; channelId: string }> {
      const user = await registerUser(ctx.api, { name: "Poster" });
      const { workspaceId, channelId } = await createWorkspaceWithGeneral(ctx.api, user);
      const path = `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`;
      return {
        user,
        workspaceId,
        channelId,
        post: (token, headers) => ctx.api.post(path, { content: "Budget check" }, { token, headers }),
      };
    }

    const posters: Record<string, () => Promise<Poster>> = {
      "a channel post": channelPoster,
      "a thread reply": async () => {
        const channel = await channelPoster();
        const parent = await channel.post(channel.user.token, {});
        expect(parent.status, JSON.stringify(parent.body)).toBe(201);
        const path = `/api/v1/workspaces/${channel.workspaceId}/channels/${channel.channelId}/messages`;
        const body = { content: "Budget reply", parent_message_id: parent.body.data.id };
        return { user: channel.user, post: (token, headers) => ctx.api.post(path, body, { token, headers }) };
      },
      "a direct message": async () => {
        const [user, other] = await Promise.all([
          registerUser(ctx.api, { name: "Dora" }),
          registerUser(ctx.api, { name: "Dan" }),
        ]);
        const opened = await ctx.api.post(
          "/api/v1/direct-conversations",
          { participant_user_id: other.id },
          { token: user.token },
        );
        expect([200, 201], JSON.stringify(opened.body)).toContain(opened.status);
        const path = `/api/v1/direct-conversations/${opened.body.data.id}/messages`;
        return { user, post: (token, headers) => ctx.api.post(path, { content: "Budget DM" }, { token, headers }) };
      },
      "a temporary-room message": async () => {
        const user = await registerUser(ctx.api, { name: "Rhea" });
        const created = await ctx.api.post("/api/v1/external/rooms", { name: "Budget room" }, { token: user.token });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        const path = `/api/v1/external/rooms/${created.body.data.room_id}/messages`;
        return { user, post: (token, headers) => ctx.api.post(path, { content: "Budget talk" }, { token, headers }) };
      },
    };

    async function expectPostWithin(what: string, poster: Poster, token: string, budget: number) {
      const measured = await measureRequest(ctx.server, (headers) => poster.post(token, headers), "post");
      expect(measured.response.status, JSON.stringify(measured.response.body)).toBe(201);
      expect(measured.complete).toBe(true);
      expect(measured.count, report(`${what} (request ${measured.requestId})`, measured, budget)).toBeLessThanOrEqual(
        budget,
      );
    }

    describe.each(Object.keys(posters))("%s", (kind) => {
      it(`runs at most ${CACHED_POST_BUDGET} statement in its request with a token used just before`, async () => {
        const poster = await posters[kind]!();
        // The same post just before: the token, and everything else the post reads, is warm.
        expect((await poster.post(poster.user.token, {})).status).toBe(201);
        await expectPostWithin(`${kind} with a cached token`, poster, poster.user.token, CACHED_POST_BUDGET);
      });

      it(`runs at most ${POST_BUDGET} statements in its request with a token never used before`, async () => {
        const poster = await posters[kind]!();
        // Warm the post itself with the user's other token: only the new token is cold.
        expect((await poster.post(poster.user.token, {})).status).toBe(201);
        const fresh = await login(poster.user);
        await expectPostWithin(`${kind} with a fresh token`, poster, fresh, POST_BUDGET);
      });
    });

    describe("changes to a posted message", () => {
      /** A channel post of the poster's, and its path. */
      async function postedMessage() {
        const channel = await channelPoster();
        const posted = await channel.post(channel.user.token, {});
        expect(posted.status, JSON.stringify(posted.body)).toBe(201);
        const path = `/api/v1/workspaces/${channel.workspaceId}/channels/${channel.channelId}/messages/${posted.body.data.id}`;
        return { token: channel.user.token, path, channel };
      }

      async function expectWithin(
        what: string,
        send: (headers: Record<string, string>) => Promise<ApiResponse>,
        status: number,
        budget: number,
      ) {
        const measured = await measureRequest(ctx.server, send, what);
        expect(measured.response.status, JSON.stringify(measured.response.body)).toBe(status);
        expect(measured.complete).toBe(true);
        // At least the token check: a count of 0 would mean the request was not seen.
        expect(measured.count, `${what}: no statement counted under ${measured.requestId}`).toBeGreaterThan(0);
        expect(measured.count, report(`${what} (request ${measured.requestId})`, measured, budget)).toBeLessThanOrEqual(
          budget,
        );
        return measured.response;
      }

      it(`an edit runs at most ${CHANGE_BUDGET} statements in its request`, async () => {
        const { token, path } = await postedMessage();
        // Warm: the same statement once before.
        expect((await ctx.api.patch(path, { content: "First edit" }, { token })).status).toBe(200);
        await expectWithin(
          "an edit",
          (headers) => ctx.api.patch(path, { content: "Second edit" }, { token, headers }),
          200,
          CHANGE_BUDGET,
        );
      });

      it(`a reaction and taking it back run at most ${CHANGE_BUDGET} statements each`, async () => {
        const { token, path } = await postedMessage();
        expect((await ctx.api.put(`${path}/reactions/wave`, undefined, { token })).status).toBe(200);
        expect((await ctx.api.delete(`${path}/reactions/wave`, { token })).status).toBe(204);
        await expectWithin(
          "a reaction",
          (headers) => ctx.api.put(`${path}/reactions/tada`, undefined, { token, headers }),
          200,
          CHANGE_BUDGET,
        );
        await expectWithin(
          "taking a reaction back",
          (headers) => ctx.api.delete(`${path}/reactions/tada`, { token, headers }),
          204,
          CHANGE_BUDGET,
        );
      });

      it(`a delete runs at most ${DELETE_BUDGET} statements in its request`, async () => {
        const first = await postedMessage();
        expect((await ctx.api.delete(first.path, { token: first.token })).status).toBe(204);
        const { token, path } = await postedMessage();
        await expectWithin("a delete", (headers) => ctx.api.delete(path, { token, headers }), 204, DELETE_BUDGET);
      });

      it(`a read position moves in at most ${READ_BUDGET} statements, forward and back`, async () => {
        const { channel, path } = await postedMessage();
        const messageId = path.split("/").at(-1)!;
        const base = `/api/v1/workspaces/${channel.workspaceId}/channels/${channel.channelId}`;
        const token = channel.user.token;
        expect((await ctx.api.post(`${base}/unread`, { message_id: messageId }, { token })).status).toBe(200);
        await expectWithin(
          "marking read",
          (headers) => ctx.api.post(`${base}/read`, { message_id: messageId }, { token, headers }),
          200,
          READ_BUDGET,
        );
        await expectWithin(
          "marking unread",
          (headers) => ctx.api.post(`${base}/unread`, { message_id: messageId }, { token, headers }),
          200,
          READ_BUDGET,
        );
      });

      it(`the channel list with every count, and GET /api/v1/unread, take as many statements for ${MANY_CHANNELS} channels as for one`, async () => {
        const { channel } = await postedMessage();
        const token = channel.user.token;
        const list = `/api/v1/workspaces/${channel.workspaceId}/channels`;
        for (let index = 0; index < MANY_CHANNELS; index++) {
          const created = await ctx.api.post(list, { name: `Budget ${index}` }, { token });
          expect(created.status).toBe(201);
          const posted = await channel.post(token, {});
          expect(posted.status).toBe(201);
        }
        await expectWithin("the channel list", (headers) => ctx.api.get(list, { token, headers }), 200, LIST_BUDGET);
        await expectWithin(
          "everything unread",
          (headers) => ctx.api.get("/api/v1/unread", { token, headers }),
          200,
          READ_BUDGET,
        );
      });

      it(`a search takes at most ${SEARCH_BUDGET} statements, however many channels the caller reads`, async () => {
        const { channel } = await postedMessage();
        const token = channel.user.token;
        const list = `/api/v1/workspaces/${channel.workspaceId}/channels`;
        for (let index = 0; index < MANY_CHANNELS; index++) {
          const created = await ctx.api.post(list, { name: `Search budget ${index}` }, { token });
          expect(created.status).toBe(201);
          const path = `${list}/${created.body.data.id}/messages`;
          expect((await ctx.api.post(path, { content: `needle ${index}` }, { token })).status).toBe(201);
        }
        await ctx.server.app.deps.relay.flush();
        const search = (q: string) => (headers: Record<string, string>) =>
          ctx.api.get(`/api/v1/search/messages?q=${encodeURIComponent(q)}&limit=5`, { token, headers });
        const found = await expectWithin("a search with a full page", search("needle"), 200, SEARCH_BUDGET);
        expect(found.body.data).toHaveLength(5);
        const none = await expectWithin("a search with no hit", search("haystack"), 200, SEARCH_BUDGET);
        expect(none.body.data).toEqual([]);
      });

      it(`a post with a client_message_id runs at most ${POST_BUDGET} statements; a repeat of it reads once more`, async () => {
        const { channel } = await postedMessage();
        const path = `/api/v1/workspaces/${channel.workspaceId}/channels/${channel.channelId}/messages`;
        const token = channel.user.token;
        const send = (id: string) => (headers: Record<string, string>) =>
          ctx.api.post(path, { content: "Exactly once", client_message_id: id }, { token, headers });
        expect((await send("budget-warm")({})).status).toBe(201);
        await expectWithin("a post with a client_message_id", send("budget-1"), 201, POST_BUDGET);
        // A repeat: the post's statement, then one read of the first message (history's page of one).
        await expectWithin("a repeated post", send("budget-1"), 200, POST_BUDGET + 3);
      });
    });

    it(`a webhook post runs at most ${WEBHOOK_POST_BUDGET} statements in its request`, async () => {
      const owner = await registerUser(ctx.api, { name: "Olga" });
      const { workspaceId, channelId } = await createWorkspaceWithGeneral(ctx.api, owner);
      const created = await ctx.api.post(
        `/api/v1/workspaces/${workspaceId}/webhooks`,
        { name: "CI", default_channel_id: channelId, bot_name: "CI bot" },
        { token: owner.token },
      );
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const hook = created.body.data as { id: string; secret: string };
      const post = (headers: Record<string, string>) =>
        ctx.api.post(
          `/webhooks/${hook.id}/messages`,
          { content: "Build 42 passed" },
          {
            headers: { "X-Service-Webhook-Secret": hook.secret, ...headers },
          },
        );
      expect((await post({})).status).toBe(201);
      const measured = await measureRequest(ctx.server, post, "webhook");
      expect(measured.response.status, JSON.stringify(measured.response.body)).toBe(201);
      expect(measured.complete).toBe(true);
      expect(
        measured.count,
        report(`a webhook post (request ${measured.requestId})`, measured, WEBHOOK_POST_BUDGET),
      ).toBeLessThanOrEqual(WEBHOOK_POST_BUDGET);
    });

    describe("the counter", () => {
      const database = () => ctx.server.app.database;
      const textsIn = (scope: string, mark: number) =>
        database()
          .statements.inScope(scope, mark)
          .statements.map((statement) => statement.text)
          // What a new postgres.js connection runs first, whoever opened it.
          .filter((text) => !text.includes("pg_catalog.pg_type"));

      it("sees a transaction's BEGIN and COMMIT (and ROLLBACK), in the scope that ran it", async () => {
        const { db, statements } = database();
        const mark = statements.total();
        await statementScope("counter-commit", () =>
          db.transaction(async (tx) => {
            await tx.execute(sql`select 1 as committed_one`);
          }),
        );
        await statementScope("counter-rollback", () =>
          db
            .transaction(async (tx) => {
              await tx.execute(sql`select 2 as rolled_back`);
              throw new Error("roll back");
            })
            .catch(() => {}),
        );
        expect(textsIn("counter-commit", mark)).toEqual([
          expect.stringMatching(/^begin/i),
          expect.stringContaining("committed_one"),
          expect.stringMatching(/^commit/i),
        ]);
        expect(textsIn("counter-rollback", mark)).toEqual([
          expect.stringMatching(/^begin/i),
          expect.stringContaining("rolled_back"),
          expect.stringMatching(/^rollback/i),
        ]);
        expect(statements.total() - mark).toBeGreaterThanOrEqual(6);
      });

      it("sees the statements of a reserved connection (DatabaseHandle.session())", async () => {
        const { statements } = database();
        const mark = statements.total();
        await statementScope("counter-session", async () => {
          const session = await database().session();
          try {
            // Two at once on one connection: the second waits for the first's answer.
            await Promise.all([
              session.query("select $1::int as reserved_one", [1]),
              session.query("select $1::int as reserved_two", [2]),
            ]);
            await session.query("select 3 as reserved_three", []);
          } finally {
            session.release();
          }
        });
        expect(textsIn("counter-session", mark)).toEqual([
          expect.stringContaining("reserved_one"),
          expect.stringContaining("reserved_two"),
          expect.stringContaining("reserved_three"),
        ]);
      });

      it("gives each statement to its own scope when two scopes run at once (more queries than connections)", async () => {
        const { db, statements } = database();
        const mark = statements.total();
        // A distinct text each, with a parameter: never prepared before, so each holds its
        // connection until answered, and the later ones wait for a free connection.
        const burst = (label: string) =>
          statementScope(label, () =>
            Promise.all(
              Array.from({ length: 15 }, (_, index) =>
                db.execute(sql`select ${label}::text as scope, ${sql.raw(String(index))} as n`),
              ),
            ),
          );
        const [first, second] = await Promise.all([burst("counter-a"), burst("counter-b")]);
        expect(first.flatMap((result) => rowsOf<{ scope: string }>(result).map((row) => row.scope))).toEqual(
          Array(15).fill("counter-a"),
        );
        expect(second).toHaveLength(15);
        for (const label of ["counter-a", "counter-b"]) {
          const texts = textsIn(label, mark);
          expect(texts, label).toHaveLength(15);
          expect(
            texts.every((text) => text.includes("as scope")),
            label,
          ).toBe(true);
        }
        // The parameters are not kept, so check the split by the texts' numbers instead.
        const numbers = (label: string) =>
          textsIn(label, mark)
            .map((text) => Number(/as scope, (\d+) as n/.exec(text)?.[1]))
            .sort((a, b) => a - b);
        expect(numbers("counter-a")).toEqual(Array.from({ length: 15 }, (_, index) => index));
        expect(numbers("counter-b")).toEqual(Array.from({ length: 15 }, (_, index) => index));
      });

      it("leaves detached work and RunLoop runs to the background, even when a scope woke them", async () => {
        const { db, statements } = database();
        const mark = statements.total();
        await statementScope("counter-waker", async () => {
          await db.execute(sql`select 'in scope' as waker`);
          // A drizzle query runs when awaited: await it inside the detached function.
          await detached(async () => {
            await db.execute(sql`select 'detached' as waker`);
          });
          const loop = new RunLoop(
            async () => {
              await db.execute(sql`select 'run loop' as waker`);
              return false;
            },
            () => true,
          );
          loop.request();
          await loop.idle();
        });
        expect(textsIn("counter-waker", mark)).toEqual([expect.stringContaining("'in scope'")]);
        const background = textsIn(BACKGROUND_SCOPE, mark).filter((text) => text.includes("as waker"));
        expect(background).toEqual([expect.stringContaining("'detached'"), expect.stringContaining("'run loop'")]);
      });

      it("counts an HTTP request's statements under its X-Request-Id", async () => {
        const user = await registerUser(ctx.api, { name: "Hugo" });
        const { workspaceId } = await createWorkspaceWithGeneral(ctx.api, user);
        const measured = await measureRequest(ctx.server, (headers) =>
          ctx.api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: user.token, headers }),
        );
        expect(measured.response.status).toBe(200);
        expect(measured.count).toBeGreaterThanOrEqual(1);
        expect(measured.statements.every((statement) => statement.scope === measured.requestId)).toBe(true);
      });

      it("counts a WebSocket frame's statements under the connection's request id", async () => {
        const user = await registerUser(ctx.api, { name: "Wanda" });
        await createWorkspaceWithGeneral(ctx.api, user);
        const requestId = newRequestId("socket");
        const mark = statementsOf(ctx.server).total();
        const socket = new WebSocket(trpcSocketUrl(ctx.server.url), { headers: { "X-Request-Id": requestId } });
        try {
          const answer = new Promise<unknown>((resolve, reject) => {
            socket.on("message", (data) => {
              const text = data.toString();
              if (text.startsWith("{") && (JSON.parse(text) as { id?: unknown }).id === 1) resolve(JSON.parse(text));
            });
            socket.once("error", reject);
          });
          await new Promise((resolve, reject) => {
            socket.once("open", resolve);
            socket.once("error", reject);
          });
          socket.send(clientFrames.connectionParams({ token: user.token }));
          socket.send(clientFrames.request(1, "query", "workspaces.list"));
          expect(await answer).toMatchObject({ result: { type: "data" } });
        } finally {
          socket.close();
        }
        const counted = await countRequestStatements(ctx.server, requestId, { mark });
        expect(counted.count, describeStatements(counted)).toBeGreaterThanOrEqual(1);
      });
    });
  });
});

// Presence (docs/presence.md, the contract's "Cost"): opening and closing live connections costs
// PostgreSQL no statement. Who is connected lives in memory (or Redis), last_seen_at is written in
// batches at most once a minute, and a live connection's sign-in is remembered for a few seconds
// after it closes (server/services/accounts/credential-watch.ts), so that after one warm-up
// connection (its token lookup) the next ones, each opened once the one before has closed, run no
// statement at all. Each connection's sign-in and close are seen through the server's live state
// (memory or Redis: no statement) before the next one opens. The whole process is counted; the
// idle server's own timers (the relay's poll every 15 s, the outbox and maintenance every minute,
// the batched last-seen write) may fall into a window of a second or two, so a window that saw
// statements is measured again, up to 3 times: a cost of the connections shows in every window.
describe.concurrent("live connections", () => {
  describe.sequential("on a server of their own", () => {
    const ctx = useTestServer();
    const ATTEMPTS = 3;

    /** Waits (polling every 2 ms) until the server's live state says the user is connected, or not. */
    async function liveIs(userId: number, connected: boolean): Promise<void> {
      const deadline = Date.now() + 5_000;
      for (;;) {
        const live = (await ctx.server.app.deps.presence.liveStateOf([userId])).get(userId);
        if (live?.connected === connected) return;
        if (Date.now() > deadline)
          throw new Error(`user ${userId} did not become ${connected ? "connected" : "disconnected"}`);
        await sleep(2);
      }
    }

    /** One signed-in WebSocket: opened, counted by the server as the user's live connection, closed, and let go. */
    async function connectAndClose(user: RegisteredUser): Promise<void> {
      const raw = await RawSocket.signedIn(ctx.server.url, user.token);
      try {
        await liveIs(user.id, true);
      } finally {
        raw.socket.close();
      }
      await liveIs(user.id, false);
    }

    /** Waits until the process has run no statement for `quietMs` (at most `maxMs`). */
    async function quiet(quietMs: number, maxMs = 3_000): Promise<void> {
      const counter = statementsOf(ctx.server);
      const deadline = Date.now() + maxMs;
      let seen = counter.total();
      let since = Date.now();
      while (Date.now() - since < quietMs && Date.now() < deadline) {
        await sleep(25);
        if (counter.total() !== seen) [seen, since] = [counter.total(), Date.now()];
      }
    }

    /** Every statement the whole process ran during `work` and 200 ms after it. */
    async function countWhile(work: () => Promise<void>): Promise<CountedStatements> {
      const counter = statementsOf(ctx.server);
      const mark = counter.total();
      await work();
      await sleep(200);
      return counter.since(mark);
    }

    it("100 signed-in WebSocket connections, opened and closed one after another, cost PostgreSQL no statement", async () => {
      const user = await registerUser(ctx.api, { name: "Connie" });
      const attempts: CountedStatements[] = [];
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        // Warm-up: this connection's sign-in looks the token up (and may note its use, written a
        // second later); its sign-in is then remembered for the reconnects.
        await connectAndClose(user);
        await quiet(1_200);
        const counted = await countWhile(async () => {
          for (let index = 0; index < 100; index++) await connectAndClose(user);
        });
        attempts.push(counted);
        if (counted.count === 0) break;
      }
      expect(
        attempts.at(-1)!.count,
        attempts
          .map((counted, index) => report(`attempt ${index + 1}: 100 connects and disconnects`, counted, 0))
          .join("\n"),
      ).toBe(0);
      // The connections were real: the user was seen, and reads offline only after the grace window.
      const answer = await ctx.api.get(`/api/v1/presence?user_ids=${user.id}`, { token: user.token });
      expect(answer.status).toBe(200);
      expect(answer.body.data).toEqual([expect.objectContaining({ user_id: user.id, status: "online" })]);
    });

    it("an SSE subscription's open and close run what the same subscription runs on a signed-in WebSocket, and nothing else", async () => {
      const user = await registerUser(ctx.api, { name: "Sasha" });
      expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(200);
      await quiet(1_200);

      // What a new PostgreSQL connection of the pool runs first, whoever opened it, is left aside,
      // and so is the token's lookup: the socket's request always looks it up, the SSE request
      // may find the sign-in in the process's memory.
      const work = (counted: CountedStatements): CountedStatements => {
        const statements = counted.statements.filter(
          (statement) =>
            !statement.text.includes("pg_catalog.pg_type") && !/^select "access_tokens"\./.test(statement.text),
        );
        return { ...counted, statements, count: counted.count - (counted.statements.length - statements.length) };
      };

      // The baseline: events.onUser started and stopped on a WebSocket already signed in (and
      // counted as the user's live connection): its request's token lookup and the
      // subscription's own reads, under the connection's request id.
      const socketId = newRequestId("presence-ws");
      const socket = new WebSocket(trpcSocketUrl(ctx.server.url), { headers: { "X-Request-Id": socketId } });
      const frames: { id?: unknown; result?: { type?: string } }[] = [];
      socket.on("message", (data) => {
        const text = data.toString();
        if (text.startsWith("{")) frames.push(JSON.parse(text));
      });
      await new Promise((resolve, reject) => {
        socket.once("open", resolve);
        socket.once("error", reject);
      });
      let baseline: number;
      try {
        socket.send(clientFrames.connectionParams({ token: user.token }));
        await liveIs(user.id, true);
        const mark = statementsOf(ctx.server).total();
        socket.send(clientFrames.request(1, "subscription", "events.onUser"));
        await until(() => frames.find((frame) => frame.id === 1 && frame.result?.type === "started"), "started");
        socket.send(clientFrames.stop(1));
        const counted = await countRequestStatements(ctx.server, socketId, { mark, settleMs: 200 });
        expect(counted.count, "the subscription's request runs at least its token lookup").toBeGreaterThanOrEqual(1);
        baseline = work(counted).count;
      } finally {
        socket.close();
      }
      await liveIs(user.id, false);

      const attempts: { whole: CountedStatements; inScope: number }[] = [];
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        await quiet(1_200);
        const requestId = newRequestId("presence-sse");
        let inScope = 0;
        const whole = await countWhile(async () => {
          const mark = statementsOf(ctx.server).total();
          const controller = new AbortController();
          const response = await fetch(`${ctx.server.url}/trpc/events.onUser`, {
            headers: { Accept: "text/event-stream", Authorization: `Bearer ${user.token}`, "X-Request-Id": requestId },
            signal: controller.signal,
          });
          expect(response.status).toBe(200);
          await liveIs(user.id, true);
          controller.abort();
          await response.body?.cancel().catch(() => {});
          await liveIs(user.id, false);
          inScope = work(await countRequestStatements(ctx.server, requestId, { mark, settleMs: 200 })).count;
        });
        attempts.push({ whole: work(whole), inScope });
        if (inScope === baseline && work(whole).count === baseline) break;
      }
      const last = attempts.at(-1)!;
      const described = attempts
        .map(({ whole }, index) =>
          report(`attempt ${index + 1}: an SSE subscription opened and closed`, whole, baseline),
        )
        .join("\n");
      // The request ran what the same subscription runs on a socket, and nothing ran outside it.
      expect(last.inScope, described).toBe(baseline);
      expect(last.whole.count, described).toBe(baseline);
    });
  });
});
