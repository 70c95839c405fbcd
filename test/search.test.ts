// Message search (contract: "Search"): GET /api/v1/search/messages and the typed client's
// search.messages. Every language the service speaks (words inside sentences written without
// spaces, one-character words, Unicode case), every term in one text, the caller's own stored
// translation (matched_in), the filters and their 404s, paging, the input rules, who may read
// what (private channels, leaving, removal, direct conversations, rooms until they expire), edits
// and deletes, pathological queries, the two-second freshness promise, the backfill of messages
// that existed before the index, a long history (older than what the first step scans), and
// an edit racing a slow translation (the old text's translation must not be found afterwards).
import { randomBytes } from "node:crypto";
import { eq, inArray, sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { consumerBackfills, jobOutbox, messages, messageSearch, rooms } from "../db/schema/index.ts";
import { newId } from "../server/ids.ts";
import { backfillSearchStep } from "../server/services/search/backfill.ts";
import { restClient, type ApiResponse, type RestClient } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { world } from "./helpers/live.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { startTestServer, useTestServer, useTranslatingServer, type TestServer } from "./helpers/server.ts";
import { startFakeLibreTranslate } from "./helpers/translation.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

const SEARCH = "/api/v1/search/messages";
const VALIDATION_MESSAGE = "The given data was invalid.";
const HOUR = 3600_000;

type Message = {
  id: string;
  content: string;
  workspace_id: string | null;
  channel_id: string | null;
  conversation_id: string | null;
  room_id: string | null;
  parent_message_id: string | null;
  deleted_at: string | null;
  translation: { language: string; content: string | null; status: string } | null;
  [key: string]: unknown;
};
type Hit = Message & { matched_in: "content" | "translation" };
type Page = { data: Hit[]; meta: { next_cursor: string | null } };
type Params = Record<string, string | number | undefined>;

const tag = () => randomBytes(4).toString("hex");

function expectStatus(response: ApiResponse, status: number, what = ""): void {
  expect(response.status, `${what} ${JSON.stringify(response.body)}`).toBe(status);
}

function searchPath(params: Params): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) query.append(key, String(value));
  return `${SEARCH}?${query.toString()}`;
}

function searchOn(api: RestClient, user: RegisteredUser, params: Params): Promise<ApiResponse<Page>> {
  return api.get<Page>(searchPath(params), { token: user.token });
}

/** A search that must answer 200 with a well-formed page: the page. */
async function pageOn(api: RestClient, user: RegisteredUser, params: Params): Promise<Page> {
  const response = await searchOn(api, user, params);
  expectStatus(response, 200, `search ${JSON.stringify(params)}`);
  expect(Object.keys(response.body).sort()).toEqual(["data", "meta"]);
  expect(Object.keys(response.body.meta)).toEqual(["next_cursor"]);
  for (const hit of response.body.data) expect(["content", "translation"]).toContain(hit.matched_in);
  return response.body;
}

const search = (user: RegisteredUser, params: Params) => searchOn(ctx.api, user, params);
const page = (user: RegisteredUser, params: Params) => pageOn(ctx.api, user, params);

/** The ids a search finds (one page of up to 100), newest first. */
async function found(user: RegisteredUser, q: string, filters: Params = {}): Promise<string[]> {
  const result = await page(user, { q, limit: 100, ...filters });
  expect(result.meta.next_cursor).toBeNull();
  return result.data.map((hit) => hit.id);
}

/** The search index takes in what was committed: positions the events and runs the consumers. */
const flush = () => ctx.server.app.deps.relay.flush();

const channelBase = (workspaceId: string, channelId: string) =>
  `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`;
const directBase = (conversationId: string) => `/api/v1/direct-conversations/${conversationId}/messages`;
const roomBase = (roomId: string) => `/api/v1/external/rooms/${roomId}/messages`;

async function postAt(
  base: string,
  user: RegisteredUser,
  content: string,
  extra: Record<string, unknown> = {},
  api: RestClient = ctx.api,
): Promise<Message> {
  const response = await api.post(base, { content, ...extra }, { token: user.token });
  expectStatus(response, 201, `post to ${base}`);
  return response.body.data as Message;
}

/** Posts each text in turn (so that their ids are in this order), then flushes the index. */
async function postAll(base: string, user: RegisteredUser, contents: string[]): Promise<Message[]> {
  const posted: Message[] = [];
  for (const content of contents) posted.push(await postAt(base, user, content));
  await flush();
  return posted;
}

const newest = (posted: { id: string }[]) => posted.map((message) => message.id).reverse();

/** A public workspace of `owner` with `member` in it, and its #general (both in it). */
async function team(languages: { owner?: string; member?: string } = {}) {
  const [owner, member] = await Promise.all([
    registerUser(ctx.api, { name: "Olive Owner", preferred_language: languages.owner ?? "en" }),
    registerUser(ctx.api, { name: "Mia Member", preferred_language: languages.member ?? "en" }),
  ]);
  const created = await ctx.api.post(
    "/api/v1/workspaces",
    { name: `Search ${tag()}`, visibility: "public" },
    { token: owner.token },
  );
  expectStatus(created, 201, "workspace");
  const workspaceId = created.body.data.id as string;
  expectStatus(await ctx.api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: member.token }), 200, "join");
  const channels = await ctx.api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
  const general = (channels.body.data as { id: string; slug: string }[]).find((c) => c.slug === "general")!;
  return { owner, member, workspaceId, generalId: general.id, base: channelBase(workspaceId, general.id) };
}

async function createChannel(owner: RegisteredUser, workspaceId: string, visibility: "public" | "private") {
  const response = await ctx.api.post(
    `/api/v1/workspaces/${workspaceId}/channels`,
    { name: `${visibility} ${tag()}`, visibility },
    { token: owner.token },
  );
  expectStatus(response, 201, "channel");
  return response.body.data.id as string;
}

async function addToChannel(adder: RegisteredUser, workspaceId: string, channelId: string, user: RegisteredUser) {
  const response = await ctx.api.post(
    `/api/v1/workspaces/${workspaceId}/channels/${channelId}/members`,
    { user_id: user.id },
    { token: adder.token },
  );
  expectStatus(response, 201, "add to channel");
}

async function memberIdOf(api: RestClient, workspaceId: string, user: RegisteredUser): Promise<string> {
  const response = await api.get(`/api/v1/workspaces/${workspaceId}/members`, { token: user.token });
  expectStatus(response, 200, "members");
  return (response.body.data as { id: string; user_id: number }[]).find((member) => member.user_id === user.id)!.id;
}

async function createRoom(owner: RegisteredUser, guests: RegisteredUser[], durationHours = 24): Promise<string> {
  const created = await ctx.api.post(
    "/api/v1/external/rooms",
    { name: `Room ${tag()}`, duration_hours: durationHours },
    { token: owner.token },
  );
  expectStatus(created, 201, "room");
  const roomId = created.body.data.room_id as string;
  for (const guest of guests) {
    expectStatus(await ctx.api.post(`/api/v1/external/rooms/${roomId}/join`, {}, { token: guest.token }), 200, "join");
  }
  return roomId;
}

function expect422(response: ApiResponse, field: string, what = ""): void {
  expectStatus(response, 422, what);
  expect(response.body).toEqual({ message: VALIDATION_MESSAGE, errors: { [field]: [expect.any(String)] } });
}

function expect404(response: ApiResponse, message: string, what = ""): void {
  expectStatus(response, 404, what);
  expect(response.body).toEqual({ message });
}

const resetBackfill = () =>
  ctx.server.app.deps.db.execute(
    sql`update consumer_backfills set before = null, finished_at = null where name = 'search'`,
  );

async function backfillToTheEnd(batch?: number): Promise<number> {
  let steps = 0;
  for (;;) {
    steps += 1;
    if (steps > 10_000) throw new Error("the backfill never ends");
    if ((await backfillSearchStep(ctx.server.app.deps.db, batch)) === "done") return steps;
  }
}

// ---------------------------------------------------------------------------------------------

describe("the backfill", () => {
  it("indexes, in steps that resume where the last one stopped, messages whose index rows are missing; never a deleted one or a tombstone", async () => {
    const { owner, member, base, generalId } = await team();
    const word = `backfilled${tag()}`;
    const posted = await postAll(
      base,
      owner,
      [1, 2, 3, 4, 5].map((n) => `${word} number ${n}`),
    );
    // A deleted message, and a thread parent deleted while it has a reply (a tombstone).
    const gone = await postAt(base, owner, `${word} deleted`);
    const parent = await postAt(base, owner, `${word} parent`);
    const reply = await postAt(base, member, `${word} reply`, { parent_message_id: parent.id });
    expectStatus(await ctx.api.delete(`${base}/${gone.id}`, { token: owner.token }), 204, "delete");
    expectStatus(await ctx.api.delete(`${base}/${parent.id}`, { token: owner.token }), 204, "delete the parent");
    await flush();
    const expected = [reply.id, ...newest(posted)];
    expect(await found(member, word)).toEqual(expected);

    // As if they had been posted before the index existed.
    const db = ctx.server.app.deps.db;
    const ids = [...posted, gone, parent, reply].map((message) => message.id);
    await db.delete(messageSearch).where(inArray(messageSearch.messageId, ids));
    await resetBackfill();
    expect(await found(member, word)).toEqual([]);
    expect(await found(member, word, { channel_id: generalId })).toEqual([]);

    // Two messages a step: it must resume several times to reach them all.
    const total = Number(
      (
        await db
          .select({ count: sql<number>`count(*)` })
          .from(messages)
          .where(sql`deleted_at is null`)
      )[0]!.count,
    );
    const steps = await backfillToTheEnd(2);
    expect(steps).toBe(Math.floor(total / 2) + 1);
    const [state] = await db.select().from(consumerBackfills).where(eq(consumerBackfills.name, "search"));
    expect(state!.finishedAt).not.toBeNull();
    // It reached the oldest message there is.
    const [oldest] = await db
      .select({ id: sql<string>`min(id)` })
      .from(messages)
      .where(sql`deleted_at is null`);
    expect(state!.before).toBe(oldest!.id);

    expect(await found(member, word)).toEqual(expected);
    expect(await found(owner, `${word} parent`)).toEqual([]);
    expect(await found(owner, `${word} deleted`)).toEqual([]);
    const rows = await db.select().from(messageSearch).where(inArray(messageSearch.messageId, ids));
    expect(rows.map((row) => row.messageId).sort()).toEqual([...expected].sort());
    // Done: another step does nothing.
    expect(await backfillSearchStep(db, 2)).toBe("done");
  });
});

// ---------------------------------------------------------------------------------------------

describe("words in every language", () => {
  type Case = { language: string; contents: string[]; hits: [string, number[]][]; misses: string[] };
  const cases: Case[] = [
    {
      language: "en",
      contents: ["Deploying the new category page tomorrow", "Un été chaud", "The dog barked"],
      hits: [
        ["deploy", [0]],
        ["DEPLOY", [0]],
        ["Deploying", [0]],
        ["cat", [0]],
        ["CATEGORY", [0]],
        ["d", [2, 1, 0]],
        ["ÉTÉ", [1]],
        ["été", [1]],
        ["Été", [1]],
        ["dog", [2]],
      ],
      misses: ["ete", "cats", "deployment", "tomorrows", "EtE"],
    },
    {
      language: "zh-CN",
      contents: ["我们明天去北京开会", "上海的天气很好"],
      hits: [
        ["北京", [0]],
        ["京", [0]],
        ["明天", [0]],
        ["开会", [0]],
        ["我们明天去北京开会", [0]],
        ["上海", [1]],
        ["天", [1, 0]],
      ],
      misses: ["广州", "京北", "会议", "北京上海"],
    },
    {
      language: "ja",
      contents: ["東京で会議があります", "大阪に行きます"],
      hits: [
        ["会議", [0]],
        ["東京", [0]],
        ["議", [0]],
        ["あります", [0]],
        ["大阪", [1]],
        ["ま", [1, 0]],
      ],
      misses: ["京都", "会議室", "名古屋"],
    },
    {
      language: "th",
      contents: ["ฉันชอบกินข้าวผัด", "วันนี้อากาศดี"],
      hits: [
        ["ข้าว", [0]],
        ["ข้าวผัด", [0]],
        ["ชอบกิน", [0]],
        ["อากาศ", [1]],
      ],
      misses: ["ก๋วยเตี๋ยว", "ผัดไทย", "ฝน"],
    },
    {
      language: "id",
      contents: ["Rapat besok pagi di kantor pusat", "Selamat malam semuanya"],
      hits: [
        ["besok", [0]],
        ["KANTOR", [0]],
        ["kan", [0]],
        ["malam", [1]],
        ["Selamat", [1]],
        ["at", [1, 0]],
      ],
      misses: ["siang", "kantornya", "rapatan"],
    },
  ];

  for (const { language, contents, hits, misses } of cases) {
    it(`${language}: finds a word anywhere in a message, whatever its case, and nothing that is not there`, async () => {
      const { owner, member, base } = await team({ owner: language, member: language });
      const posted = await postAll(base, owner, contents);
      for (const [q, indexes] of hits) {
        const result = await page(member, { q });
        expect(
          result.data.map((hit) => hit.id),
          q,
        ).toEqual(indexes.map((index) => posted[index]!.id));
        expect(result.meta.next_cursor).toBeNull();
        for (const hit of result.data) {
          expect(hit.matched_in).toBe("content");
          expect(hit.content).toBe(contents[posted.findIndex((message) => message.id === hit.id)]);
        }
      }
      for (const q of misses) expect(await found(member, q), q).toEqual([]);
    });
  }

  it("answers each hit as the message record the history shows the caller, with matched_in; the same over the typed client", async () => {
    const { owner, member, workspaceId, generalId, base } = await team();
    const word = `record${tag()}`;
    const posted = await postAt(base, owner, `Here is the ${word} you asked for`);
    const reply = await postAt(base, member, `A reply about the ${word}`, { parent_message_id: posted.id });
    await flush();
    const history = await ctx.api.get(base, { token: member.token });
    expectStatus(history, 200, "history");
    const parentInHistory = (history.body.data as Message[]).find((message) => message.id === posted.id)!;
    const thread = await ctx.api.get(`${base}?parent_message_id=${posted.id}`, { token: member.token });
    const replyInThread = (thread.body.data as Message[]).find((message) => message.id === reply.id)!;

    const rest = await page(member, { q: word });
    expect(rest).toEqual({
      data: [
        { ...replyInThread, matched_in: "content" },
        { ...parentInHistory, matched_in: "content" },
      ],
      meta: { next_cursor: null },
    });
    expect(rest.data[1]).toMatchObject({
      id: posted.id,
      workspace_id: workspaceId,
      channel_id: generalId,
      conversation_id: null,
      room_id: null,
      author: { type: "user", id: owner.id, name: owner.name },
      reply_count: 1,
      translation: null,
    });

    const client = live.chat(member.token);
    expect(await client.search.messages.query({ q: word })).toEqual(rest);
    expect(await client.search.messages.query({ q: `REPLY ${word.toUpperCase()}` })).toEqual({
      data: [rest.data[0]],
      meta: { next_cursor: null },
    });
    const none = await client.search.messages.query({ q: `${word} nowhere` });
    expect(none).toEqual({ data: [], meta: { next_cursor: null } });
  });
});

// ---------------------------------------------------------------------------------------------

describe("terms", () => {
  it("finds a message only when every term is in it, in any order; whitespace of any kind separates terms", async () => {
    const { owner, member, base } = await team();
    const posted = await postAll(base, owner, [
      "the quarterly budget review is on friday",
      "the budget is approved",
      "review the slides",
      "北京开会",
    ]);
    const [both, budget, review, beijing] = posted;
    expect(await found(member, "budget review")).toEqual([both!.id]);
    expect(await found(member, "review budget")).toEqual([both!.id]);
    expect(await found(member, "  Review\tBUDGET\n")).toEqual([both!.id]);
    expect(await found(member, "budget budget")).toEqual([budget!.id, both!.id]);
    expect(await found(member, "budget")).toEqual([budget!.id, both!.id]);
    expect(await found(member, "review")).toEqual([review!.id, both!.id]);
    // A term absent: no hit, even though the other terms are there.
    expect(await found(member, "budget review monday")).toEqual([]);
    // Terms found in two different messages are not one hit.
    expect(await found(member, "approved slides")).toEqual([]);
    // The terms are separated, not one phrase: "budget friday" is not a substring anywhere.
    expect(await found(member, "friday budget")).toEqual([both!.id]);
    // An ideographic space (U+3000) separates terms too.
    expect(await found(member, "开会\u3000北京")).toEqual([beijing!.id]);
    expect(await found(member, "北京\u3000上海")).toEqual([]);

    const client = live.chat(member.token);
    const rpc = await client.search.messages.query({ q: "review budget" });
    expect(rpc.data.map((hit) => hit.id)).toEqual([both!.id]);
    expect((await client.search.messages.query({ q: "budget monday" })).data).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("pathological queries", () => {
  /** A search that must answer 200 within two seconds, as a client on this machine measures it. */
  async function quick(user: RegisteredUser, q: string): Promise<string[]> {
    const started = performance.now();
    const response = await search(user, { q, limit: 100 });
    const elapsed = performance.now() - started;
    expectStatus(response, 200, `q ${JSON.stringify(q)}`);
    expect(elapsed, `q ${JSON.stringify(q)} took ${elapsed} ms`).toBeLessThan(2_000);
    return response.body.data.map((hit) => hit.id);
  }

  it("takes % _ \\ * quotes, emoji and operators literally, with exactly the right results", async () => {
    const { owner, member, base } = await team();
    const posted = await postAll(base, owner, [
      "Discount 100% today",
      "rename it to snake_case please",
      "the file is in a\\b now",
      `she typed '" by mistake`,
      "this is *important*",
      "party 🎉 time",
      "I like c++ and C# a lot",
      "plain words only",
      "one 50 percent",
    ]);
    const [percent, underscore, backslash, quotes, star, party, plus] = posted.map((message) => message.id);
    const expected: [string, string[]][] = [
      ["%", [percent!]],
      ["100%", [percent!]],
      ["0%", [percent!]],
      ["%%%", []],
      ["%%", []],
      ["100%%", []],
      ["_", [underscore!]],
      ["snake_case", [underscore!]],
      ["snake_", [underscore!]],
      ["e_c", [underscore!]],
      ["__", []],
      ["\\", [backslash!]],
      ["a\\b", [backslash!]],
      ["\\\\", []],
      ["a\\\\b", []],
      [`'"`, [quotes!]],
      [`"`, [quotes!]],
      [`''`, []],
      [`"'`, []],
      ["*", [star!]],
      ["*important*", [star!]],
      ["**", []],
      ["🎉", [party!]],
      ["PARTY 🎉", [party!]],
      ["🎊", []],
      ["c++", [plus!]],
      ["+", [plus!]],
      ["C#", [plus!]],
      ["#", [plus!]],
      [".*", []],
      ["(", []],
      ["[a-z]", []],
      ["'; drop table messages; --", []],
      ["NOT", []],
      ["OR", [posted[7]!.id, star!]],
      ["-plain", []],
      ["plain", [posted[7]!.id]],
      ["|", []],
      ["&", []],
      ["!", []],
    ];
    for (const [q, ids] of expected) expect(await quick(member, q), `q ${JSON.stringify(q)}`).toEqual(ids);
    // Nothing was harmed.
    expect(await found(member, "plain words only")).toEqual([posted[7]!.id]);
  });

  it("answers 100 one-character terms and one term of 200 characters", async () => {
    const { owner, member, base } = await team();
    const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
    const long = Array.from({ length: 200 }, (_, i) => alphabet[(i * 7) % alphabet.length]).join("");
    const posted = await postAll(base, owner, [`all of ${alphabet} here`, `the long one: ${long}!`, "abc only"]);
    const [every, longOne] = posted;

    const hundred = Array.from({ length: 100 }, (_, i) => alphabet[i % alphabet.length]).join(" ");
    expect([...hundred]).toHaveLength(199);
    // The long message holds every character too.
    expect(await quick(member, hundred)).toEqual([longOne!.id, every!.id]);
    const hundredWithAMiss = `${hundred.slice(0, -1)}~`;
    expect(await quick(member, hundredWithAMiss)).toEqual([]);
    const abc = Array.from({ length: 100 }, (_, i) => "abc"[i % 3]).join(" ");
    expect(await quick(member, abc)).toEqual([posted[2]!.id, longOne!.id, every!.id]);

    expect([...long]).toHaveLength(200);
    expect(await quick(member, long)).toEqual([longOne!.id]);
    expect(await quick(member, long.toUpperCase())).toEqual([longOne!.id]);
    expect(await quick(member, `${long.slice(0, -1)}~`)).toEqual([]);
    const emoji = "🎉".repeat(200);
    expect(await quick(member, emoji)).toEqual([]);
    const hanzi = "京".repeat(200);
    expect(await quick(member, hanzi)).toEqual([]);

    const client = live.chat(member.token);
    expect((await client.search.messages.query({ q: long, limit: 100 })).data.map((hit) => hit.id)).toEqual([
      longOne!.id,
    ]);
    expect((await client.search.messages.query({ q: hundred })).data.map((hit) => hit.id)).toEqual([
      longOne!.id,
      every!.id,
    ]);
  });

  it("never answers a 5xx to a percent sign sent without encoding; reads a stray % as itself", async () => {
    const { owner, member, base } = await team();
    const [percent] = await postAll(base, owner, ["Discount 100% today", "nothing here"]);
    for (const raw of ["%", "100%", "%%%", "%zz", "%E0%A4%A", "%00", "%%25"]) {
      const response = await ctx.api.get(`${SEARCH}?q=${raw}`, { token: member.token });
      expect(response.status, `raw q=${raw}: ${JSON.stringify(response.body)}`).toBeLessThan(500);
    }
    // A stray % is read as itself, and finds exactly what has it; a NUL is refused as everywhere.
    for (const raw of ["%", "100%"]) {
      const response = await ctx.api.get(`${SEARCH}?q=${raw}`, { token: member.token });
      expectStatus(response, 200, `raw q=${raw}`);
      expect((response.body as Page).data.map((hit) => hit.id)).toEqual([percent!.id]);
    }
    expect422(await ctx.api.get(`${SEARCH}?q=%00`, { token: member.token }), "q", "NUL");
  });
});

// ---------------------------------------------------------------------------------------------

describe("filters", () => {
  it("narrow to a workspace, a channel (its thread replies included), a conversation, a room and an author", async () => {
    const { owner, member, workspaceId, generalId, base } = await team();
    const word = `filter${tag()}`;
    const otherChannel = await createChannel(owner, workspaceId, "public");
    const privateChannel = await createChannel(owner, workspaceId, "private");
    await addToChannel(owner, workspaceId, privateChannel, member);
    const elsewhere = await team();
    expectStatus(
      await ctx.api.post(`/api/v1/workspaces/${elsewhere.workspaceId}/join`, {}, { token: member.token }),
      200,
      "join a second workspace",
    );
    const friend = await registerUser(ctx.api, { name: "Fred Friend" });
    const conversation = await live.openConversation(member, friend);
    const roomId = await createRoom(owner, [member]);

    const inGeneral = await postAt(base, owner, `${word} in general`);
    const reply = await postAt(base, member, `${word} a reply`, { parent_message_id: inGeneral.id });
    const inOther = await postAt(channelBase(workspaceId, otherChannel), owner, `${word} in another channel`);
    const inPrivate = await postAt(channelBase(workspaceId, privateChannel), member, `${word} in private`);
    const inElsewhere = await postAt(elsewhere.base, elsewhere.owner, `${word} in the second workspace`);
    const direct = await postAt(directBase(conversation), friend, `${word} directly`);
    const inRoom = await postAt(roomBase(roomId), owner, `${word} in the room`);
    await flush();

    const all = [inRoom, direct, inElsewhere, inPrivate, inOther, reply, inGeneral].map((message) => message.id);
    expect(await found(member, word)).toEqual(all);
    expect(await found(member, word, { workspace_id: workspaceId })).toEqual(
      [inPrivate, inOther, reply, inGeneral].map((message) => message.id),
    );
    expect(await found(member, word, { workspace_id: elsewhere.workspaceId })).toEqual([inElsewhere.id]);
    expect(await found(member, word, { channel_id: generalId })).toEqual([reply.id, inGeneral.id]);
    expect(await found(member, word, { channel_id: generalId, workspace_id: workspaceId })).toEqual([
      reply.id,
      inGeneral.id,
    ]);
    // A public channel the member never joined is theirs to search.
    expect(await found(member, word, { channel_id: otherChannel })).toEqual([inOther.id]);
    expect(await found(member, word, { channel_id: privateChannel })).toEqual([inPrivate.id]);
    expect(await found(member, word, { conversation_id: conversation })).toEqual([direct.id]);
    expect(await found(member, word, { room_id: roomId })).toEqual([inRoom.id]);
    expect(await found(member, word, { author_id: owner.id })).toEqual(
      [inRoom, inOther, inGeneral].map((message) => message.id),
    );
    expect(await found(member, word, { author_id: member.id })).toEqual([inPrivate.id, reply.id]);
    expect(await found(member, word, { author_id: member.id, channel_id: generalId })).toEqual([reply.id]);
    expect(await found(member, word, { author_id: friend.id, conversation_id: conversation })).toEqual([direct.id]);
    expect(await found(member, word, { author_id: friend.id, workspace_id: workspaceId })).toEqual([]);
    expect(await found(member, word, { author_id: 2_147_483_647 })).toEqual([]);
    // A place the caller reads where nothing matches: an empty page, not a 404.
    expect(await found(member, `${word} nowhere`, { channel_id: otherChannel })).toEqual([]);
    expect(await found(member, word, { channel_id: otherChannel, author_id: member.id })).toEqual([]);

    const client = live.chat(member.token);
    const rpc = await client.search.messages.query({ q: word, channel_id: generalId });
    expect(rpc.data.map((hit) => hit.id)).toEqual([reply.id, inGeneral.id]);
    expect(
      (await client.search.messages.query({ q: word, author_id: owner.id, room_id: roomId })).data.map((h) => h.id),
    ).toEqual([inRoom.id]);
  });

  it("answers 404 for a workspace, channel, conversation or room the caller cannot read or that does not exist", async () => {
    const { owner, member, workspaceId, generalId, base } = await team();
    const word = `hidden${tag()}`;
    const privateChannel = await createChannel(owner, workspaceId, "private");
    const [strangerA, strangerB] = await Promise.all([
      registerUser(ctx.api, { name: "Sam Stranger" }),
      registerUser(ctx.api, { name: "Tess Stranger" }),
    ]);
    const outside = await team();
    const theirConversation = await live.openConversation(strangerA, strangerB);
    const theirRoom = await createRoom(strangerA, [strangerB]);
    await postAt(base, owner, `${word} general`);
    await postAt(channelBase(workspaceId, privateChannel), owner, `${word} private`);
    await postAt(outside.base, outside.owner, `${word} outside`);
    await postAt(directBase(theirConversation), strangerA, `${word} direct`);
    await postAt(roomBase(theirRoom), strangerB, `${word} room`);
    await flush();

    const WORKSPACE = "Workspace not found.";
    const CHANNEL = "Channel not found.";
    const CONVERSATION = "Conversation not found.";
    const ROOM = "Room not found.";
    const refused: [Params, string][] = [
      [{ workspace_id: outside.workspaceId }, WORKSPACE],
      [{ workspace_id: newId("workspace") }, WORKSPACE],
      [{ workspace_id: "nope" }, WORKSPACE],
      [{ channel_id: privateChannel }, CHANNEL],
      [{ channel_id: outside.generalId }, CHANNEL],
      [{ channel_id: newId("channel") }, CHANNEL],
      [{ channel_id: generalId, workspace_id: outside.workspaceId }, CHANNEL],
      [{ conversation_id: theirConversation }, CONVERSATION],
      [{ conversation_id: newId("conversation") }, CONVERSATION],
      [{ room_id: theirRoom }, ROOM],
      [{ room_id: newId("room") }, ROOM],
    ];
    for (const [filters, message] of refused) {
      expect404(await search(member, { q: word, ...filters }), message, JSON.stringify(filters));
    }
    // What the caller may read is still found.
    expect((await found(member, word)).length).toBe(1);

    const client = live.chat(member.token);
    for (const [input, message] of [
      [{ channel_id: privateChannel }, CHANNEL],
      [{ workspace_id: outside.workspaceId }, WORKSPACE],
      [{ conversation_id: theirConversation }, CONVERSATION],
      [{ room_id: theirRoom }, ROOM],
    ] as const) {
      const error = await rejectionOf(client.search.messages.query({ q: word, ...input }));
      expect(error.data?.code).toBe("NOT_FOUND");
      expect(error.message).toBe(message);
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe("paging", () => {
  it("pages newest first by limit; next_cursor as before gives the next page without overlap, null on the last", async () => {
    const { owner, member, base } = await team();
    const word = `page${tag()}`;
    const posted = await postAll(
      base,
      owner,
      Array.from({ length: 7 }, (_, i) => `${word} number ${i}`),
    );
    await postAt(base, owner, "an unrelated message in between");
    await flush();
    const all = newest(posted);

    const first = await page(member, { q: word, limit: 3 });
    expect(first.data.map((hit) => hit.id)).toEqual(all.slice(0, 3));
    expect(first.meta.next_cursor).toBe(all[2]);
    const second = await page(member, { q: word, limit: 3, before: first.meta.next_cursor! });
    expect(second.data.map((hit) => hit.id)).toEqual(all.slice(3, 6));
    expect(second.meta.next_cursor).toBe(all[5]);
    const third = await page(member, { q: word, limit: 3, before: second.meta.next_cursor! });
    expect(third.data.map((hit) => hit.id)).toEqual(all.slice(6));
    expect(third.meta.next_cursor).toBeNull();

    // A page that ends exactly at the last hit says so.
    const exact = await page(member, { q: word, limit: 7 });
    expect(exact.data.map((hit) => hit.id)).toEqual(all);
    expect(exact.meta.next_cursor).toBeNull();
    const ofOne = await page(member, { q: word, limit: 1, before: all[5] });
    expect(ofOne).toMatchObject({ data: [{ id: all[6] }], meta: { next_cursor: null } });
    // The default page is 20.
    const many = await postAll(
      base,
      owner,
      Array.from({ length: 16 }, (_, i) => `${word} more ${i}`),
    );
    const everything = [...newest(many), ...all];
    const byDefault = await page(member, { q: word });
    expect(byDefault.data.map((hit) => hit.id)).toEqual(everything.slice(0, 20));
    expect(byDefault.meta.next_cursor).toBe(everything[19]);
    expect((await page(member, { q: word, limit: 100 })).data.map((hit) => hit.id)).toEqual(everything);

    // The typed client pages the same way.
    const client = live.chat(member.token);
    const rpcFirst = await client.search.messages.query({ q: word, limit: 20 });
    expect(rpcFirst.data.map((hit) => hit.id)).toEqual(everything.slice(0, 20));
    const rpcNext = await client.search.messages.query({ q: word, limit: 20, before: rpcFirst.meta.next_cursor! });
    expect(rpcNext).toMatchObject({ meta: { next_cursor: null } });
    expect(rpcNext.data.map((hit) => hit.id)).toEqual(everything.slice(20));
  });

  it("refuses a limit out of 1..100 (422 limit) and a before that is not a message id (422 before)", async () => {
    const { owner, member, base } = await team();
    const word = `limits${tag()}`;
    await postAll(base, owner, [`${word} one`]);
    for (const limit of ["0", "101", "-1", "1.5", "ten"]) {
      expect422(await search(member, { q: word, limit }), "limit", `limit ${limit}`);
    }
    for (const before of ["nope", "msg_", newId("channel"), `${newId("message")}x`]) {
      expect422(await search(member, { q: word, before }), "before", `before ${before}`);
    }
    expect422(await search(member, { q: word, author_id: "abc" }), "author_id", "author_id");
    expect((await page(member, { q: word, limit: 1 })).data).toHaveLength(1);
    expect((await page(member, { q: word, limit: 100 })).data).toHaveLength(1);

    const client = live.chat(member.token);
    for (const input of [{ limit: 0 }, { limit: 101 }]) {
      const error = await rejectionOf(client.search.messages.query({ q: word, ...input }));
      expect(error.data).toMatchObject({ code: "UNPROCESSABLE_CONTENT", httpStatus: 422 });
      expect(Object.keys(error.data.errors)).toEqual(["limit"]);
    }
    const badCursor = await rejectionOf(client.search.messages.query({ q: word, before: "nope" }));
    expect(Object.keys(badCursor.data.errors)).toEqual(["before"]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("q", () => {
  it("is required: missing, empty, only whitespace or over 200 code points is 422 q; 200 code points is fine", async () => {
    const { owner, member, base } = await team();
    const [party] = await postAll(base, owner, [`${"🎉".repeat(3)} party`]);
    expect422(await ctx.api.get(SEARCH, { token: member.token }), "q", "missing");
    expect422(await ctx.api.get(`${SEARCH}?limit=5`, { token: member.token }), "q", "missing with a limit");
    for (const q of ["", " ", "   ", "\t\n", "\u3000", "x".repeat(201), "🎉".repeat(201), `${"京".repeat(200)} `]) {
      expect422(await search(member, { q }), "q", `q ${JSON.stringify(q).slice(0, 20)}`);
    }
    // 200 code points, however many UTF-16 units.
    expect("🎉".repeat(200)).toHaveLength(400);
    expect(await found(member, "🎉".repeat(200))).toEqual([]);
    expect(await found(member, "x".repeat(200))).toEqual([]);
    expect(await found(member, `${"🎉".repeat(3)} ${"a".repeat(196)}`)).toEqual([]);
    expect(await found(member, `${"🎉".repeat(3)} ${"p".repeat(1)}`)).toEqual([party!.id]);
    // Signed in only.
    expect((await ctx.api.get(`${SEARCH}?q=party`)).status).toBe(401);

    const client = live.chat(member.token);
    for (const q of ["", "   ", "🎉".repeat(201)]) {
      const error = await rejectionOf(client.search.messages.query({ q }));
      expect(error.data).toMatchObject({ code: "UNPROCESSABLE_CONTENT", httpStatus: 422 });
      expect(Object.keys(error.data.errors)).toEqual(["q"]);
    }
    expect((await client.search.messages.query({ q: "🎉".repeat(200) })).data).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("who finds what", () => {
  it("searches a private channel only for its members, and stops when a member leaves it", async () => {
    const { owner, member, workspaceId } = await team();
    const outsider = await registerUser(ctx.api, { name: "Otto Outsider" });
    expectStatus(await ctx.api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: outsider.token }), 200);
    const secret = await createChannel(owner, workspaceId, "private");
    await addToChannel(owner, workspaceId, secret, member);
    const word = `secret${tag()}`;
    const [posted] = await postAll(channelBase(workspaceId, secret), owner, [`${word} plans`]);

    expect(await found(member, word)).toEqual([posted!.id]);
    expect(await found(owner, word)).toEqual([posted!.id]);
    expect(await found(outsider, word)).toEqual([]);
    expect(await found(outsider, word, { workspace_id: workspaceId })).toEqual([]);
    expect((await live.chat(outsider.token).search.messages.query({ q: word })).data).toEqual([]);

    // The member leaves the private channel: its messages are no longer theirs to find.
    expectStatus(
      await ctx.api.delete(`/api/v1/workspaces/${workspaceId}/channels/${secret}/members/${member.id}`, {
        token: member.token,
      }),
      204,
      "leave",
    );
    expect(await found(member, word)).toEqual([]);
    expect404(await search(member, { q: word, channel_id: secret }), "Channel not found.");
    expect((await live.chat(member.token).search.messages.query({ q: word })).data).toEqual([]);
    expect(await found(owner, word)).toEqual([posted!.id]);
  });

  it("stops finding a workspace's messages for a member removed from it, and for one who leaves it", async () => {
    const { owner, member, workspaceId, base } = await team();
    const leaver = await registerUser(ctx.api, { name: "Lea Leaver" });
    expectStatus(await ctx.api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: leaver.token }), 200);
    const secret = await createChannel(owner, workspaceId, "private");
    await addToChannel(owner, workspaceId, secret, member);
    await addToChannel(owner, workspaceId, secret, leaver);
    const word = `team${tag()}`;
    const publicOne = await postAt(base, owner, `${word} public`);
    const privateOne = await postAt(channelBase(workspaceId, secret), owner, `${word} private`);
    await flush();
    const both = [privateOne.id, publicOne.id];
    expect(await found(member, word)).toEqual(both);
    expect(await found(leaver, word)).toEqual(both);

    // Removed by the owner.
    const memberId = await memberIdOf(ctx.api, workspaceId, member);
    expectStatus(
      await ctx.api.delete(`/api/v1/workspaces/${workspaceId}/members/${memberId}`, { token: owner.token }),
      204,
      "remove",
    );
    expect(await found(member, word)).toEqual([]);
    expect404(await search(member, { q: word, workspace_id: workspaceId }), "Workspace not found.");
    expect404(await search(member, { q: word, channel_id: secret }), "Channel not found.");

    // Leaving of one's own accord.
    const leaverId = await memberIdOf(ctx.api, workspaceId, leaver);
    expectStatus(
      await ctx.api.delete(`/api/v1/workspaces/${workspaceId}/members/${leaverId}`, { token: leaver.token }),
      204,
      "leave",
    );
    expect(await found(leaver, word)).toEqual([]);
    expect404(await search(leaver, { q: word, workspace_id: workspaceId }), "Workspace not found.");
    expect((await live.chat(leaver.token).search.messages.query({ q: word })).data).toEqual([]);

    // A message posted afterwards is not theirs either; the owner still finds everything.
    const later = await postAt(base, owner, `${word} later`);
    await flush();
    expect(await found(leaver, word)).toEqual([]);
    expect(await found(owner, word)).toEqual([later.id, ...both]);
  });

  it("stops finding a channel's messages for non-members once it is made private, and for everyone once it is deleted", async () => {
    const { owner, member, workspaceId } = await team();
    const channelId = await createChannel(owner, workspaceId, "public");
    const word = `shut${tag()}`;
    const [posted] = await postAll(channelBase(workspaceId, channelId), owner, [`${word} announcement`]);
    // Public: every member of the workspace finds it, joined or not.
    expect(await found(member, word)).toEqual([posted!.id]);
    expect(await found(member, word, { channel_id: channelId })).toEqual([posted!.id]);

    const updated = await ctx.api.put(
      `/api/v1/workspaces/${workspaceId}/channels/${channelId}`,
      { visibility: "private" },
      { token: owner.token },
    );
    expectStatus(updated, 200, "make private");
    expect(await found(member, word)).toEqual([]);
    expect404(await search(member, { q: word, channel_id: channelId }), "Channel not found.");
    expect(await found(owner, word)).toEqual([posted!.id]);

    expectStatus(
      await ctx.api.delete(`/api/v1/workspaces/${workspaceId}/channels/${channelId}`, { token: owner.token }),
      204,
      "delete the channel",
    );
    expect(await found(owner, word)).toEqual([]);
    expect404(await search(owner, { q: word, channel_id: channelId }), "Channel not found.");
  });

  it("finds a direct conversation's messages only for its two participants", async () => {
    const [ana, ben, cleo] = await Promise.all([
      registerUser(ctx.api, { name: "Ana" }),
      registerUser(ctx.api, { name: "Ben" }),
      registerUser(ctx.api, { name: "Cleo" }),
    ]);
    const conversation = await live.openConversation(ana, ben);
    const word = `whisper${tag()}`;
    const posted = await postAll(directBase(conversation), ana, [`${word} just between us`]);
    expect(await found(ana, word)).toEqual([posted[0]!.id]);
    expect(await found(ben, word)).toEqual([posted[0]!.id]);
    expect(await found(cleo, word)).toEqual([]);
    expect((await live.chat(cleo.token).search.messages.query({ q: word })).data).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("edits and deletes", () => {
  it("finds an edited message by its new text, not its old; a deleted one no more", async () => {
    const { owner, member, base } = await team();
    const word = `edit${tag()}`;
    const [edited, deleted, kept] = await postAll(base, owner, [
      `${word} the old wording`,
      `${word} soon deleted`,
      `${word} kept as is`,
    ]);
    expect(await found(member, word)).toEqual([kept!.id, deleted!.id, edited!.id]);

    expectStatus(
      await ctx.api.patch(`${base}/${edited!.id}`, { content: `${word} the brand new text` }, { token: owner.token }),
      200,
      "edit",
    );
    expectStatus(await ctx.api.delete(`${base}/${deleted!.id}`, { token: owner.token }), 204, "delete");
    await flush();
    expect(await found(member, `${word} brand`)).toEqual([edited!.id]);
    expect(await found(member, `${word} old`)).toEqual([]);
    expect(await found(member, "wording")).toEqual([]);
    expect(await found(member, "deleted")).toEqual([]);
    const hits = await page(member, { q: word });
    expect(hits.data.map((hit) => hit.id)).toEqual([kept!.id, edited!.id]);
    expect(hits.data[1]).toMatchObject({ content: `${word} the brand new text`, edited_at: expect.any(String) });

    // An edit that takes a term out, in a thread reply.
    const reply = await postAt(base, member, `${word} reply alpha`, { parent_message_id: kept!.id });
    await flush();
    expect(await found(owner, "alpha")).toEqual([reply.id]);
    expectStatus(
      await ctx.api.patch(`${base}/${reply.id}`, { content: `${word} reply beta` }, { token: member.token }),
      200,
      "edit the reply",
    );
    await flush();
    expect(await found(owner, "alpha")).toEqual([]);
    expect(await found(owner, "beta")).toEqual([reply.id]);
  });

  it("never returns a tombstone: a thread parent deleted while it has replies", async () => {
    const { owner, member, base, generalId } = await team();
    const word = `tomb${tag()}`;
    const parent = await postAt(base, owner, `${word} parent`);
    const reply = await postAt(base, member, `${word} reply`, { parent_message_id: parent.id });
    await flush();
    expect(await found(member, word)).toEqual([reply.id, parent.id]);
    expectStatus(await ctx.api.delete(`${base}/${parent.id}`, { token: owner.token }), 204, "delete the parent");
    await flush();
    // The tombstone is still in the history, not in search.
    const history = await ctx.api.get(base, { token: member.token });
    expect((history.body.data as Message[]).find((message) => message.id === parent.id)).toMatchObject({
      deleted_at: expect.any(String),
    });
    expect(await found(member, word)).toEqual([reply.id]);
    expect(await found(member, "parent")).toEqual([]);
    expect(await found(member, word, { channel_id: generalId })).toEqual([reply.id]);
    expect((await live.chat(owner.token).search.messages.query({ q: word })).data.map((hit) => hit.id)).toEqual([
      reply.id,
    ]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("freshness", () => {
  it("finds a new message, and an edited one by its new text, within two seconds of the answer (no flush)", async () => {
    const { owner, member, base } = await team();
    const word = `fresh${tag()}`;

    async function foundWithinTwoSeconds(q: string, id: string, answeredAt: number) {
      await until(
        async () => ((await found(member, q)).includes(id) ? true : undefined),
        `"${q}" to find ${id}`,
        3_000,
      );
      const elapsed = performance.now() - answeredAt;
      expect(elapsed, `found after ${Math.round(elapsed)} ms`).toBeLessThan(2_000);
    }

    const response = await ctx.api.post(base, { content: `${word} just posted` }, { token: owner.token });
    const postedAt = performance.now();
    expectStatus(response, 201, "post");
    const id = response.body.data.id as string;
    await foundWithinTwoSeconds(word, id, postedAt);

    const edit = await ctx.api.patch(`${base}/${id}`, { content: `${word} edited later` }, { token: owner.token });
    const editedAt = performance.now();
    expectStatus(edit, 200, "edit");
    await foundWithinTwoSeconds(`${word} edited`, id, editedAt);
    expect(await found(member, `${word} just`)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("a long history", () => {
  it("finds rare terms older than the newest 2,000 index rows, and pages through thousands of hits without a gap", async () => {
    const { owner, member, workspaceId, generalId, base } = await team();
    const db = ctx.server.app.deps.db;
    // 2,500 messages written long ago (before the index existed), then indexed by the backfill.
    const start = ctx.server.clock.now().getTime() - 30 * 24 * HOUR;
    const old: { id: string; content: string }[] = [];
    const rare: Record<number, string> = {
      3: "a needle in the hay",
      10: "PIÑATA and hay",
      20: "ฉันชอบกินข้าวผัด hay",
      30: "我们明天去北京开会 hay",
      40: "Another NEEDLE, hay",
      50: "Discount 100% off hay",
      60: "snake_case hay",
      70: "a\\b path hay",
      80: `quote '" hay`,
      90: "party 🎉 hay",
      100: '{x,y} "NULL" hay',
    };
    for (let i = 0; i < 2_500; i += 1) old.push({ id: newId("message", start + i), content: rare[i] ?? `hay ${i}` });
    for (let i = 0; i < old.length; i += 500) {
      await db.insert(messages).values(
        old.slice(i, i + 500).map((message) => ({
          id: message.id,
          workspaceId,
          channelId: generalId,
          authorUserId: owner.id,
          content: message.content,
          language: "en" as const,
        })),
      );
    }
    await resetBackfill();
    await backfillToTheEnd();
    const recent = await postAll(base, owner, ["hay today", "needle today"]);

    const oldIds = (...indexes: number[]) => indexes.map((index) => old[index]!.id);
    expect(await found(member, "needle")).toEqual([recent[1]!.id, ...oldIds(40, 3)]);
    expect(await found(member, "needle", { before: recent[1]!.id })).toEqual(oldIds(40, 3));
    expect(await found(member, "NEEDLE hay")).toEqual(oldIds(40, 3));
    expect(await found(member, "ñ")).toEqual(oldIds(10));
    expect(await found(member, "piñata")).toEqual(oldIds(10));
    expect(await found(member, "ข้าว")).toEqual(oldIds(20));
    expect(await found(member, "京")).toEqual(oldIds(30));
    expect(await found(member, "hay 1234")).toEqual(oldIds(1234));
    // Characters with a meaning to LIKE, to array literals or to SQL, found through the index too.
    expect(await found(member, "%")).toEqual(oldIds(50));
    expect(await found(member, "100%")).toEqual(oldIds(50));
    expect(await found(member, "%%%")).toEqual([]);
    expect(await found(member, "_")).toEqual(oldIds(60));
    expect(await found(member, "\\")).toEqual(oldIds(70));
    expect(await found(member, "a\\b")).toEqual(oldIds(70));
    expect(await found(member, `'"`)).toEqual(oldIds(80));
    expect(await found(member, "🎉")).toEqual(oldIds(90));
    expect(await found(member, "{x,y}")).toEqual(oldIds(100));
    expect(await found(member, '"null"')).toEqual(oldIds(100));
    expect(await found(member, ",")).toEqual(oldIds(100, 40));
    const hundred = Array.from({ length: 100 }, (_, i) => "needl"[i % 5]).join(" ");
    expect(await found(member, hundred)).toEqual([recent[1]!.id, ...oldIds(40, 3)]);
    expect(await found(member, "needle", { author_id: owner.id, channel_id: generalId })).toEqual([
      recent[1]!.id,
      ...oldIds(40, 3),
    ]);
    expect(await found(member, "needle", { author_id: member.id })).toEqual([]);
    const deep = await page(member, { q: "needle", limit: 2 });
    expect(deep.data.map((hit) => hit.id)).toEqual([recent[1]!.id, old[40]!.id]);
    expect(deep.meta.next_cursor).toBe(old[40]!.id);
    expect(await found(member, "needle", { before: deep.meta.next_cursor! })).toEqual(oldIds(3));

    // Every "hay", 100 a page, newest first, none twice and none missed.
    const expected = [recent[0]!.id, ...old.map((message) => message.id).reverse()];
    const seen: string[] = [];
    let before: string | undefined;
    for (let pages = 0; pages < 40; pages += 1) {
      const result = await page(member, { q: "hay", limit: 100, before });
      seen.push(...result.data.map((hit) => hit.id));
      if (result.meta.next_cursor === null) break;
      expect(result.data).toHaveLength(100);
      before = result.meta.next_cursor;
    }
    expect(seen.length).toBe(expected.length);
    expect(seen).toEqual(expected);
  });
});

// ---------------------------------------------------------------------------------------------
// Last: these move the server's clock.

describe("temporary rooms", () => {
  it("are searched by their participants until expires_at passes, at once, even before the room is closed; never by others", async () => {
    const [host, guest, stranger] = await Promise.all([
      registerUser(ctx.api, { name: "Hana Host" }),
      registerUser(ctx.api, { name: "Gil Guest" }),
      registerUser(ctx.api, { name: "Sid Stranger" }),
    ]);
    const roomId = await createRoom(host, [guest], 1);
    const word = `room${tag()}`;
    const posted = await postAll(roomBase(roomId), host, [`${word} welcome`]);
    const reply = await postAt(roomBase(roomId), guest, `${word} thanks`);
    await flush();
    const both = [reply.id, posted[0]!.id];
    for (const user of [host, guest]) {
      expect(await found(user, word)).toEqual(both);
      expect(await found(user, word, { room_id: roomId })).toEqual(both);
    }
    expect((await live.chat(guest.token).search.messages.query({ q: word, room_id: roomId })).data).toHaveLength(2);
    expect(await found(stranger, word)).toEqual([]);
    expect404(await search(stranger, { q: word, room_id: roomId }), "Room not found.");

    // The closing job is lost, so that the room outlives its expiry for a while.
    const db = ctx.server.app.deps.db;
    await db.delete(jobOutbox).where(sql`${jobOutbox.jobId} like ${`room-%-${roomId}-%`}`);
    ctx.server.clock.advance(HOUR - 1_000);
    expect(await found(guest, word)).toEqual(both);
    ctx.server.clock.advance(1_000);
    expect(await found(host, word)).toEqual([]);
    expect(await found(guest, word)).toEqual([]);
    expect404(await search(guest, { q: word, room_id: roomId }), "Room not found.");
    const error = await rejectionOf(live.chat(guest.token).search.messages.query({ q: word, room_id: roomId }));
    expect(error.data?.code).toBe("NOT_FOUND");
    // It was not closed yet: its messages are still stored.
    expect(await db.select({ id: rooms.id }).from(rooms).where(eq(rooms.id, roomId))).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------
// With translation on: a second server, its provider a fake that answers `[<target>] <text>`.

describe("the caller's own translation", () => {
  let server: TestServer;
  let api: RestClient;
  const translated = world(
    () => server,
    () => api,
  );

  const translating = useTranslatingServer();
  beforeAll(() => ({ server, api } = translating));

  const flushThere = () => server.app.deps.relay.flush();
  const foundThere = async (user: RegisteredUser, q: string, filters: Params = {}) =>
    (await pageOn(api, user, { q, limit: 100, ...filters })).data;

  /** Reads until the reader's translation of the message is done, then lets the index take it in. */
  async function translatedFor(reader: RegisteredUser, base: string, messageId: string, language: string) {
    const message = await until(async () => {
      const response = await api.get(base, { token: reader.token });
      const found = (response.body.data as Message[]).find((m) => m.id === messageId);
      return found?.translation?.status === "done" ? found : undefined;
    }, `the ${language} translation of ${messageId}`);
    expect(message.translation!.language).toBe(language);
    await flushThere();
    return message;
  }

  async function translatingTeam(readerLanguage: string) {
    const [author, reader, english] = await Promise.all([
      registerUser(api, { name: "Ed Author", preferred_language: "en" }),
      registerUser(api, { name: "Rika Reader", preferred_language: readerLanguage }),
      registerUser(api, { name: "Eve English", preferred_language: "en" }),
    ]);
    const created = await api.post(
      "/api/v1/workspaces",
      { name: `Translated ${tag()}`, visibility: "public" },
      { token: author.token },
    );
    expectStatus(created, 201, "workspace");
    const workspaceId = created.body.data.id as string;
    for (const user of [reader, english]) {
      expectStatus(await api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: user.token }), 200, "join");
    }
    const channels = await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: author.token });
    const generalId = (channels.body.data as { id: string; slug: string }[]).find((c) => c.slug === "general")!.id;
    return { author, reader, english, workspaceId, generalId, base: channelBase(workspaceId, generalId) };
  }

  it("finds an English message by a word only in the reader's Japanese translation (matched_in translation); content wins when both have it; an English reader does not find it", async () => {
    const t = await translatingTeam("ja");
    const word = `budget${tag()}`;
    const posted = await postAt(t.base, t.author, `The ${word} review is tomorrow`, {}, api);
    const message = await translatedFor(t.reader, t.base, posted.id, "ja");
    expect(message.translation!.content).toBe(`[ja] The ${word} review is tomorrow`);

    // "[ja]" is only in the Japanese translation.
    const onlyTranslation = await foundThere(t.reader, "[ja]");
    expect(onlyTranslation.map((hit) => hit.id)).toEqual([posted.id]);
    expect(onlyTranslation[0]).toMatchObject({
      id: posted.id,
      content: `The ${word} review is tomorrow`,
      matched_in: "translation",
      translation: { language: "ja", status: "done", content: `[ja] The ${word} review is tomorrow` },
    });
    expect(await foundThere(t.reader, `[JA] ${word.toUpperCase()}`)).toMatchObject([
      { id: posted.id, matched_in: "translation" },
    ]);
    // In both the content and the translation: content.
    expect(await foundThere(t.reader, `${word} review`)).toMatchObject([{ id: posted.id, matched_in: "content" }]);
    expect(await foundThere(t.reader, "[ja] nowhere")).toEqual([]);
    // The English reader (and the author) read it as written: no translation of theirs has "[ja]".
    expect(await foundThere(t.english, "[ja]")).toEqual([]);
    expect(await foundThere(t.author, "[ja]")).toEqual([]);
    expect(await foundThere(t.english, word)).toMatchObject([{ id: posted.id, matched_in: "content" }]);

    const readerClient = translated.chat(t.reader.token);
    const rpc = await readerClient.search.messages.query({ q: "[ja] review", channel_id: t.generalId });
    expect(rpc.data).toMatchObject([{ id: posted.id, matched_in: "translation" }]);
    expect((await translated.chat(t.english.token).search.messages.query({ q: "[ja]" })).data).toEqual([]);

    // An edit drops the old translation from the index, and the new one is found once it is stored.
    const edit = await api.patch(
      `${t.base}/${posted.id}`,
      { content: `The ${word} meeting moved` },
      { token: t.author.token },
    );
    expectStatus(edit, 200, "edit");
    await flushThere();
    expect(await foundThere(t.reader, "[ja] review")).toEqual([]);
    await until(async () => {
      const response = await api.get(t.base, { token: t.reader.token });
      const found = (response.body.data as Message[]).find((m) => m.id === posted.id);
      return found?.translation?.status === "done" && found.translation.content?.includes("meeting") ? true : undefined;
    }, "the new translation");
    await flushThere();
    expect(await foundThere(t.reader, "[ja] meeting")).toMatchObject([{ id: posted.id, matched_in: "translation" }]);
    expect(await foundThere(t.reader, "[ja] review")).toEqual([]);

    // A direct conversation is read in the reader's own language too.
    const conversation = await translated.openConversation(t.author, t.reader);
    const direct = await postAt(directBase(conversation), t.author, `${word} see you at lunch`, {}, api);
    await translatedFor(t.reader, directBase(conversation), direct.id, "ja");
    expect(await foundThere(t.reader, "[ja] lunch")).toMatchObject([{ id: direct.id, matched_in: "translation" }]);
    expect(await foundThere(t.reader, "[ja] lunch", { conversation_id: conversation })).toMatchObject([
      { id: direct.id, matched_in: "translation", conversation_id: conversation },
    ]);
    expect(await foundThere(t.author, "[ja] lunch")).toEqual([]);
    expect(await foundThere(t.author, "lunch")).toMatchObject([{ id: direct.id, matched_in: "content" }]);
  });

  it("never finds an edited message by its old text through a translation of the old text that finished after the edit", async () => {
    // A provider slow enough that the edit lands while the first translation is on its way.
    const slow = await startFakeLibreTranslate({ delayMs: 1_000 });
    const slowServer = await startTestServer({ TRANSLATION_PROVIDER: "libretranslate", TRANSLATION_URL: slow.url });
    try {
      const slowApi = restClient(slowServer.url);
      const [author, reader] = await Promise.all([
        registerUser(slowApi, { name: "Ed Author", preferred_language: "en" }),
        registerUser(slowApi, { name: "Rika Reader", preferred_language: "ja" }),
      ]);
      const created = await slowApi.post(
        "/api/v1/workspaces",
        { name: `Slow ${tag()}`, visibility: "public" },
        { token: author.token },
      );
      const workspaceId = created.body.data.id as string;
      expectStatus(await slowApi.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: reader.token }), 200);
      const channels = await slowApi.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: author.token });
      const generalId = (channels.body.data as { id: string; slug: string }[]).find((c) => c.slug === "general")!.id;
      const base = channelBase(workspaceId, generalId);
      const word = `race${tag()}`;
      const posted = await postAt(base, author, `${word} the old wording`, {}, slowApi);
      await until(
        () => (slow.requests.some((r) => r.texts.some((t) => t.includes("old wording"))) ? true : undefined),
        "the first translation request",
      );
      expectStatus(
        await slowApi.patch(`${base}/${posted.id}`, { content: `${word} the new text` }, { token: author.token }),
        200,
        "edit",
      );
      // The first translation (of the old text) answers about a second after it was asked for;
      // one of the new text may follow. Then everything has settled.
      await until(
        async () => {
          const response = await slowApi.get(base, { token: reader.token });
          const message = (response.body.data as Message[]).find((m) => m.id === posted.id);
          return message?.translation?.status === "done" ? message : undefined;
        },
        "a translation",
        15_000,
      );
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await slowServer.app.deps.relay.flush();

      const old = await pageOn(slowApi, reader, { q: "[ja] wording" });
      expect(
        old.data.map((hit) => ({
          content: hit.content,
          translation: hit.translation?.content,
          matched: hit.matched_in,
        })),
        "the old text's translation is found",
      ).toEqual([]);
      const fresh = await pageOn(slowApi, reader, { q: "[ja] new" });
      expect(fresh.data.map((hit) => [hit.id, hit.matched_in])).toEqual([[posted.id, "translation"]]);
      // The cause, as the history shows it: the stored translation is of the text before the edit.
      const history = await slowApi.get(base, { token: reader.token });
      expect((history.body.data as Message[]).find((m) => m.id === posted.id)!.translation).toEqual({
        language: "ja",
        status: "done",
        content: `[ja] ${word} the new text`,
      });
    } finally {
      await slowServer.close();
      await slow.stop();
    }
  });

  it("uses the reader's language in each workspace (their member preferred_language, else their own)", async () => {
    // The reader is English, but Japanese in the first workspace.
    const first = await translatingTeam("en");
    const second = await translatingTeam("ja");
    const reader = first.reader;
    expectStatus(
      await api.post(`/api/v1/workspaces/${second.workspaceId}/join`, {}, { token: reader.token }),
      200,
      "join the second workspace",
    );
    const memberId = await memberIdOf(api, first.workspaceId, reader);
    expectStatus(
      await api.put(
        `/api/v1/workspaces/${first.workspaceId}/members/${memberId}`,
        { role: "member", preferred_language: "ja" },
        { token: reader.token },
      ),
      200,
      "set the member language",
    );
    const word = `lang${tag()}`;
    const inFirst = await postAt(first.base, first.author, `${word} first workspace news`, {}, api);
    const inSecond = await postAt(second.base, second.author, `${word} second workspace news`, {}, api);
    await translatedFor(reader, first.base, inFirst.id, "ja");
    // The second workspace's Japanese reader gets a Japanese translation; ours reads English there.
    await translatedFor(second.reader, second.base, inSecond.id, "ja");

    expect(await foundThere(reader, "[ja]")).toMatchObject([{ id: inFirst.id, matched_in: "translation" }]);
    expect(await foundThere(reader, "[ja] news")).toMatchObject([{ id: inFirst.id, matched_in: "translation" }]);
    expect(await foundThere(reader, "[ja]", { workspace_id: second.workspaceId })).toEqual([]);
    expect(await foundThere(reader, word)).toMatchObject([
      { id: inSecond.id, matched_in: "content" },
      { id: inFirst.id, matched_in: "content" },
    ]);
    expect(await foundThere(second.reader, "[ja]")).toMatchObject([{ id: inSecond.id, matched_in: "translation" }]);

    // Back to English in the first workspace: the Japanese translation is no longer theirs.
    expectStatus(
      await api.put(
        `/api/v1/workspaces/${first.workspaceId}/members/${memberId}`,
        { role: "member", preferred_language: null },
        { token: reader.token },
      ),
      200,
      "unset the member language",
    );
    expect(await foundThere(reader, "[ja]")).toEqual([]);
  });
});
