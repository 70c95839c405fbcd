// Translation for every reader (docs/translation.md): a message is translated by the
// translation worker into each language of those who may read it, here through a real
// LibreTranslate client talking to a fake on 127.0.0.1 that answers `[<target>] <text>`
// (test/helpers/translation.ts). The reader sees the translation for their language on every
// door: REST, typed RPC, and live events (message.created pending, then translation.ready).
import { randomBytes } from "node:crypto";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { jobOutbox, messageTranslations, streamEvents, translationCache } from "../db/schema/index.ts";
import { startWorkers } from "../server/app.ts";
import { loadConfig } from "../server/config.ts";
import { translationJobs } from "../server/services/translation/jobs.ts";
import { createTranslationProvider } from "../server/services/translation/providers/index.ts";
import { translateMessages } from "../server/services/translation/translate-message.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { collect, world, type Feed } from "./helpers/live.ts";
import { startTestServer, useTranslatingServer, type TestServer } from "./helpers/server.ts";
import { startFakeDeepL, startFakeLibreTranslate, type FakeTranslator } from "./helpers/translation.ts";
import { statementsOf } from "./helpers/statements.ts";
import { until } from "./helpers/wait.ts";

let fake: FakeTranslator;
let server: TestServer;
let api: RestClient;
const live = world(
  () => server,
  () => api,
);

const translating = useTranslatingServer();
beforeAll(() => ({ fake, server, api } = translating));
beforeEach(() => fake.recover());

const unique = (text: string) => `${text} ${randomBytes(4).toString("hex")}`;

/** The requests to the provider that carried `text`. */
const requestsFor = (text: string) => fake.requests.filter((request) => request.texts.some((t) => t.includes(text)));

type Team = { owner: RegisteredUser; reader: RegisteredUser; workspaceId: string; channelId: string };

/** A public workspace of an English owner and a reader of `language` (their user language), in #general. */
async function team(language = "ja", on: RestClient = api): Promise<Team> {
  const api = on;
  const [owner, reader] = await Promise.all([
    registerUser(api, { name: "Owen", preferred_language: "en" }),
    registerUser(api, { name: "Rika", preferred_language: language }),
  ]);
  const created = await api.post(
    "/api/v1/workspaces",
    { name: unique("Team"), visibility: "public" },
    { token: owner.token },
  );
  const workspaceId = created.body.data.id as string;
  expect((await api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: reader.token })).status).toBe(200);
  const channels = await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
  const channelId = (channels.body.data as { id: string; slug: string }[]).find((c) => c.slug === "general")!.id;
  return { owner, reader, workspaceId, channelId };
}

async function post(t: Team, author: RegisteredUser, body: Record<string, unknown>) {
  const response = await api.post(`/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`, body, {
    token: author.token,
  });
  expect(response.status).toBe(201);
  return response.body.data as { id: string; translation: unknown };
}

async function readAs(t: Team, reader: RegisteredUser, messageId: string) {
  const response = await api.get(`/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`, {
    token: reader.token,
  });
  expect(response.status).toBe(200);
  return (
    response.body.data as {
      id: string;
      translation: { status: string; content: string | null; language: string } | null;
    }[]
  ).find((message) => message.id === messageId)!;
}

/** Reads until the reader's translation of the message has settled (done or failed). */
function settled(t: Team, reader: RegisteredUser, messageId: string) {
  return until(async () => {
    const message = await readAs(t, reader, messageId);
    return message.translation && ["done", "failed"].includes(message.translation.status) ? message : undefined;
  }, `the translation of ${messageId}`);
}

async function memberIdOf(t: Team, user: RegisteredUser): Promise<string> {
  const response = await api.get(`/api/v1/workspaces/${t.workspaceId}/members`, { token: user.token });
  return (response.body.data as { id: string; user_id: number }[]).find((member) => member.user_id === user.id)!.id;
}

/** The first translation.ready a new subscription of `reader` to the team's channel replays after `lastEventId`. */
function replayedTranslation(t: Team, reader: RegisteredUser, lastEventId: string) {
  const replay = collect((handlers) =>
    live
      .chat(reader.token)
      .messages.onChannel.subscribe({ workspace_id: t.workspaceId, channel_id: t.channelId, lastEventId }, handlers),
  );
  return until(
    () => replay.received.find((r) => r.event.type === "translation.ready"),
    "the replayed translation.ready",
  );
}

/** The stored translation.ready events of a message. */
async function storedTranslationEvents(messageId: string) {
  return (await server.app.deps.db.select().from(streamEvents)).filter((row) => {
    const payload = row.payload as { type: string; data: { message_id?: string } };
    return payload.type === "translation.ready" && payload.data.message_id === messageId;
  });
}

const translationRows = (messageId: string) =>
  server.app.deps.db.select().from(messageTranslations).where(eq(messageTranslations.messageId, messageId));

describe("a channel message", () => {
  it("reaches a ja reader translated over REST and typed RPC; its author reads it as written", async () => {
    const t = await team("ja");
    const text = unique("Good morning everyone");
    const posted = await post(t, t.owner, { content: text });
    expect(posted.translation).toEqual({ language: "en", content: null, status: "not_needed" });

    const read = await settled(t, t.reader, posted.id);
    expect(read.translation).toEqual({ language: "ja", content: `[ja] ${text}`, status: "done" });
    const rpc = await live
      .chat(t.reader.token)
      .messages.list.query({ workspace_id: t.workspaceId, channel_id: t.channelId });
    expect(rpc.data.find((message) => message.id === posted.id)!.translation).toEqual(read.translation);
    // One request, into Japanese only (nobody reads anything else), from English.
    expect(requestsFor(text)).toHaveLength(1);
    expect(requestsFor(text)[0]).toMatchObject({ target: "ja", source: "en" });
    expect(await translationRows(posted.id)).toEqual([
      expect.objectContaining({ language: "ja", status: "done", content: `[ja] ${text}` }),
    ]);
  });

  it("is live: message.created says pending to a ja subscriber, then translation.ready brings the text; an en subscriber gets neither", async () => {
    const t = await team("ja");
    const jaFeed = await live.attachedChannelFeed(t.reader, t.owner, t.workspaceId, t.channelId);
    const enFeed = await live.attachedChannelFeed(t.owner, t.reader, t.workspaceId, t.channelId);
    const text = unique("Deploy finished");
    const posted = await post(t, t.owner, { content: text });

    const ready = await until(
      () => jaFeed.received.find((r) => r.event.type === "translation.ready" && r.event.data.message_id === posted.id),
      "translation.ready",
    );
    expect(ready.event).toMatchObject({
      type: "translation.ready",
      workspace_id: t.workspaceId,
      channel_id: t.channelId,
      data: { message_id: posted.id, language: "ja", status: "done", content: `[ja] ${text}` },
    });
    const created = jaFeed.messages().find((m) => m.messageId === posted.id)!;
    expect(created.event.data.message.translation).toEqual({ language: "ja", content: null, status: "pending" });
    await until(() => enFeed.messages().find((m) => m.messageId === posted.id), "the en subscriber's message");
    expect(enFeed.messages().find((m) => m.messageId === posted.id)!.event.data.message.translation).toEqual({
      language: "en",
      content: null,
      status: "not_needed",
    });
    expect(enFeed.received.some((r) => r.event.type === "translation.ready")).toBe(false);

    // Resumable like every event: from just before it, a new subscription receives it again.
    const again = await replayedTranslation(t, t.reader, created.id);
    expect(again.id).toBe(ready.id);
  });

  it("costs its job three statements: the message, the cache, then results, events and cache in one", async () => {
    const t = await team("ja");
    const mark = statementsOf(server).total();
    const posted = await post(t, t.owner, { content: unique("Counted") });
    // The consumer's job (its pending rows come with it); a read before them would ask for one of its own.
    await until(async () => ((await translationRows(posted.id)).length > 0 ? true : undefined), "the pending rows");
    expect((await settled(t, t.reader, posted.id)).translation).toMatchObject({ status: "done" });
    // Its job is the consumer's batch (only this message), named by the position of its event.
    const jobScopes = new Set(
      statementsOf(server)
        .since(mark)
        .statements.map((statement) => statement.scope)
        .filter((scope) => scope.startsWith("job translate-")),
    );
    expect([...jobScopes]).toHaveLength(1);
    const [jobScope] = jobScopes;
    expect(jobScope).toMatch(/^job translate-p\d+$/);
    const statements = statementsOf(server).inScope(jobScope!, mark);
    expect(statements.complete).toBe(true);
    expect(statements.statements.map((statement) => statement.text.trim().split(/\s+/)[0])).toEqual([
      "select",
      "select",
      "with",
    ]);
  });

  it("uses the member's language in the workspace over the user's", async () => {
    const t = await team("ja");
    const memberId = await memberIdOf(t, t.reader);
    const updated = await api.put(
      `/api/v1/workspaces/${t.workspaceId}/members/${memberId}`,
      { role: "member", preferred_language: "th" },
      { token: t.reader.token },
    );
    expect(updated.status).toBe(200);
    const text = unique("Lunch at noon");
    const posted = await post(t, t.owner, { content: text });
    const read = await settled(t, t.reader, posted.id);
    expect(read.translation).toEqual({ language: "th", content: `[th] ${text}`, status: "done" });
    expect(requestsFor(text).map((request) => request.target)).toEqual(["th"]);
  });

  it("with skip_translation says skipped to every reader and calls nobody", async () => {
    const t = await team("ja");
    const text = unique("Leave as is");
    const posted = await post(t, t.owner, { content: text, skip_translation: true });
    expect(posted.translation).toEqual({ language: "en", content: null, status: "skipped" });
    expect((await readAs(t, t.reader, posted.id)).translation).toEqual({
      language: "ja",
      content: null,
      status: "skipped",
    });
    expect(await translationRows(posted.id)).toEqual([]);
    expect(requestsFor(text)).toEqual([]);
  });

  it("costs no job and no provider call when every reader shares the author's language", async () => {
    const t = await team("en");
    const text = unique("All English here");
    const posted = await post(t, t.owner, { content: text });
    expect((await readAs(t, t.reader, posted.id)).translation).toEqual({
      language: "en",
      content: null,
      status: "not_needed",
    });
    expect(await translationRows(posted.id)).toEqual([]);
    const jobs = await server.app.deps.db
      .select()
      .from(jobOutbox)
      .where(eq(jobOutbox.jobId, `translate-${posted.id}`));
    expect(jobs).toEqual([]);
    expect(requestsFor(text)).toEqual([]);
  });

  it("translates a thread reply, and each language of the readers once", async () => {
    const t = await team("ja");
    const zh = await registerUser(api, { preferred_language: "zh-CN" });
    await api.post(`/api/v1/workspaces/${t.workspaceId}/join`, {}, { token: zh.token });
    const parent = await post(t, t.owner, { content: unique("Thread start") });
    const text = unique("A reply");
    await post(t, t.owner, { content: text, parent_message_id: parent.id });
    const thread = async (reader: RegisteredUser) => {
      const response = await api.get(
        `/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages?parent_message_id=${parent.id}`,
        { token: reader.token },
      );
      return response.body.data[0] as { id: string; translation: { status: string; content: string | null } };
    };
    // Each language is settled on its own: wait for both.
    await until(async () => ((await thread(zh)).translation.status === "done" ? true : undefined), "zh reply");
    await until(async () => ((await thread(t.reader)).translation.status === "done" ? true : undefined), "ja reply");
    expect((await thread(zh)).translation).toMatchObject({ status: "done", content: `[zh-CN] ${text}` });
    expect((await thread(t.reader)).translation).toMatchObject({ status: "done", content: `[ja] ${text}` });
    expect(
      requestsFor(text)
        .map((request) => request.target)
        .sort(),
    ).toEqual(["ja", "zh"].sort());
  });

  it("keeps code, links and @mentions as written and never sends them", async () => {
    const t = await team("ja");
    const word = unique("please check");
    const content = `@owen ${word} https://example.test/build/42 and run \`npm test\`\n\`\`\`\nconst answer = 42;\n\`\`\`\nThanks!`;
    const posted = await post(t, t.owner, { content });
    const read = await settled(t, t.reader, posted.id);
    expect(read.translation!.content).toBe(
      `@owen [ja] ${word} https://example.test/build/42 [ja] and run \`npm test\`\n\`\`\`\nconst answer = 42;\n\`\`\`\n[ja] Thanks!`,
    );
    const sent = requestsFor(word).flatMap((request) => request.texts);
    expect(sent).toEqual(expect.arrayContaining([word, "and run", "Thanks!"]));
    expect(sent.join("\n")).not.toMatch(/@owen|example\.test|npm test|answer/);
    // Only a link: nothing to translate.
    const link = await post(t, t.owner, { content: "https://example.test/only-a-link" });
    expect((await readAs(t, t.reader, link.id)).translation).toMatchObject({ status: "not_needed" });
  });

  it("sends identical text into the same language once (the cache)", async () => {
    const t = await team("ja");
    const text = unique("Standup in five minutes");
    const first = await post(t, t.owner, { content: text });
    await settled(t, t.reader, first.id);
    const second = await post(t, t.owner, { content: text });
    const read = await settled(t, t.reader, second.id);
    expect(read.translation).toMatchObject({ status: "done", content: `[ja] ${text}` });
    expect(requestsFor(text)).toHaveLength(1);
    expect(await server.app.deps.db.select().from(translationCache)).not.toHaveLength(0);
  });
});

describe("a reader's language", () => {
  it("applies to the next messages when changed; older ones are translated when read", async () => {
    const t = await team("ja");
    const before = unique("Before the change");
    const old = await post(t, t.owner, { content: before });
    await settled(t, t.reader, old.id);

    expect((await api.patch("/api/v1/me", { preferred_language: "id" }, { token: t.reader.token })).status).toBe(200);
    const after = unique("After the change");
    const next = await post(t, t.owner, { content: after });
    expect((await settled(t, t.reader, next.id)).translation).toEqual({
      language: "id",
      content: `[id] ${after}`,
      status: "done",
    });
    expect(requestsFor(after).map((request) => request.target)).toEqual(["id"]);

    // The older message had no Indonesian translation: reading it asked for one.
    const older = await settled(t, t.reader, old.id);
    expect(older.translation).toEqual({ language: "id", content: `[id] ${before}`, status: "done" });
    expect(requestsFor(before).map((request) => request.target)).toEqual(["ja", "id"]);
  });

  it("announces a message's languages stored together in one event: each live reader gets theirs, on replay too, and search finds each", async () => {
    const t = await team("ja");
    const zh = await registerUser(api, { name: "Zhen", preferred_language: "zh-CN" });
    expect((await api.post(`/api/v1/workspaces/${t.workspaceId}/join`, {}, { token: zh.token })).status).toBe(200);
    const jaFeed = await live.attachedChannelFeed(t.reader, t.owner, t.workspaceId, t.channelId);
    const zhFeed = await live.attachedChannelFeed(zh, t.owner, t.workspaceId, t.channelId);
    const enFeed = await live.attachedChannelFeed(t.owner, t.reader, t.workspaceId, t.channelId);
    const word = unique("Standup").replace(" ", "");
    const text = `${word} moved to ten`;
    const posted = await post(t, t.owner, { content: text });

    const readyOf = (feed: Feed) =>
      until(
        () => feed.received.find((r) => r.event.type === "translation.ready" && r.event.data.message_id === posted.id),
        "translation.ready",
      );
    const [ja, zhReady] = await Promise.all([readyOf(jaFeed), readyOf(zhFeed)]);
    expect(ja.event).toMatchObject({
      type: "translation.ready",
      channel_id: t.channelId,
      data: { message_id: posted.id, language: "ja", status: "done", content: `[ja] ${text}` },
    });
    expect(zhReady.event).toMatchObject({
      type: "translation.ready",
      channel_id: t.channelId,
      data: { message_id: posted.id, language: "zh-CN", status: "done", content: `[zh-CN] ${text}` },
    });
    // One event (one position) for both languages, translated in one job.
    expect(zhReady.id).toBe(ja.id);
    expect(Object.keys(zhReady.event.data).sort()).toEqual(["content", "language", "message_id", "status"]);
    const stored = await storedTranslationEvents(posted.id);
    expect(stored).toHaveLength(1);
    expect(String(stored[0]!.position)).toBe(ja.id);
    expect(
      requestsFor(text)
        .map((request) => request.target)
        .sort(),
    ).toEqual(["ja", "zh"]);
    await until(() => enFeed.messages().find((m) => m.messageId === posted.id), "the en subscriber's message");
    expect(enFeed.received.some((r) => r.event.type === "translation.ready")).toBe(false);

    // A replay shows each reader their own language of the same event.
    const created = zhFeed.messages().find((m) => m.messageId === posted.id)!;
    const again = await replayedTranslation(t, zh, created.id);
    expect(again).toMatchObject({ id: ja.id, event: { data: { language: "zh-CN", content: `[zh-CN] ${text}` } } });

    // The search index took in both translations from the one event.
    await server.app.deps.relay.flush();
    for (const [reader, tagText] of [
      [t.reader, "[ja]"],
      [zh, "[zh-cn]"],
    ] as const) {
      const hits = await until(async () => {
        const response = await api.get(`/api/v1/search/messages?q=${encodeURIComponent(`${tagText} ${word}`)}`, {
          token: reader.token,
        });
        expect(response.status).toBe(200);
        const data = response.body.data as { id: string; matched_in: string }[];
        return data.length > 0 ? data : undefined;
      }, `the ${tagText} translation in the search index`);
      expect(hits).toMatchObject([{ id: posted.id, matched_in: "translation" }]);
    }
  });

  it("is followed by a live subscription: after a change, translation.ready comes in the new language", async () => {
    const t = await team("ja");
    const feed: Feed = await live.attachedChannelFeed(t.reader, t.owner, t.workspaceId, t.channelId);
    expect((await api.patch("/api/v1/me", { preferred_language: "th" }, { token: t.reader.token })).status).toBe(200);
    const text = unique("Now in Thai");
    const posted = await post(t, t.owner, { content: text });
    const ready = await until(
      () => feed.received.find((r) => r.event.type === "translation.ready" && r.event.data.message_id === posted.id),
      "translation.ready in th",
    );
    expect(ready.event.data).toMatchObject({ language: "th", content: `[th] ${text}` });
    expect(feed.messages().find((m) => m.messageId === posted.id)!.event.data.message.translation).toMatchObject({
      language: "th",
      status: "pending",
    });
  });
});

describe("a direct message", () => {
  it("is translated for the other participant, on REST and live", async () => {
    const [en, ja] = await Promise.all([
      registerUser(api, { preferred_language: "en" }),
      registerUser(api, { preferred_language: "ja" }),
    ]);
    const conversationId = await live.openConversation(en, ja);
    const feed = collect((handlers) =>
      live.chat(ja.token).direct.onConversation.subscribe({ conversation_id: conversationId }, handlers),
    );
    await until(() => (feed.isStarted() ? true : undefined), "the conversation feed");
    const text = unique("See you tomorrow");
    const posted = await live.postDirect(en, conversationId, text);
    const ready = await until(
      () => feed.received.find((r) => r.event.type === "translation.ready"),
      "translation.ready on the conversation",
    );
    expect(ready.event).toMatchObject({
      conversation_id: conversationId,
      data: { message_id: posted.id, language: "ja", status: "done", content: `[ja] ${text}` },
    });
    const page = await api.get(`/api/v1/direct-conversations/${conversationId}/messages`, { token: ja.token });
    expect(page.body.data[0].translation).toEqual({ language: "ja", content: `[ja] ${text}`, status: "done" });
    const mine = await api.get(`/api/v1/direct-conversations/${conversationId}/messages`, { token: en.token });
    expect(mine.body.data[0].translation).toEqual({ language: "en", content: null, status: "not_needed" });
  });
});

describe("when the provider fails", () => {
  it("delays translations through an outage and loses none", async () => {
    const t = await team("ja");
    fake.fail(503);
    const texts = [unique("Outage one"), unique("Outage two"), unique("Outage three")];
    const posted = [];
    for (const text of texts) posted.push(await post(t, t.owner, { content: text }));
    await until(() => (texts.every((text) => requestsFor(text).length >= 1) ? true : undefined), "first tries");
    for (const message of posted)
      expect((await readAs(t, t.reader, message.id)).translation).toMatchObject({ status: "pending" });

    fake.recover();
    // The retries wait a backoff on the server's clock.
    server.clock.advance(60_000);
    for (const [index, message] of posted.entries()) {
      const read = await settled(t, t.reader, message.id);
      expect(read.translation).toEqual({ language: "ja", content: `[ja] ${texts[index]}`, status: "done" });
    }
  });

  it("waits out a 429 for its Retry-After", async () => {
    const t = await team("ja");
    fake.fail(429, { retryAfter: 120, times: 1 });
    const text = unique("Rate limited");
    const posted = await post(t, t.owner, { content: text });
    await until(() => (requestsFor(text).length === 1 ? true : undefined), "the refused try");
    // The retry is due two minutes after the refusal was handled: wait for it to be written
    // before moving the clock (a retry written after the move would be due two minutes later).
    await until(
      async () =>
        (
          await server.app.deps.db
            .select()
            .from(jobOutbox)
            .where(eq(jobOutbox.jobId, `translate-${posted.id}-r2`))
        )[0],
      "the retry waiting in the outbox",
    );
    // A minute later it has not tried again: it was told two.
    server.clock.advance(60_000);
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(requestsFor(text)).toHaveLength(1);
    server.clock.advance(61_000);
    const read = await settled(t, t.reader, posted.id);
    expect(read.translation).toMatchObject({ status: "done", content: `[ja] ${text}` });
    expect(requestsFor(text)).toHaveLength(2);
  });

  it("says failed, live too, when the provider refuses for good (a 400)", async () => {
    const t = await team("ja");
    const feed = await live.attachedChannelFeed(t.reader, t.owner, t.workspaceId, t.channelId);
    fake.fail(400, { times: 1 });
    const text = unique("Refused");
    const posted = await post(t, t.owner, { content: text });
    const read = await settled(t, t.reader, posted.id);
    expect(read.translation).toEqual({ language: "ja", content: null, status: "failed" });
    const ready = await until(
      () => feed.received.find((r) => r.event.type === "translation.ready" && r.event.data.message_id === posted.id),
      "the failed translation.ready",
    );
    expect(ready.event.data).toMatchObject({ status: "failed", content: null });
    expect(requestsFor(text)).toHaveLength(1);
    const row = await server.app.deps.db
      .select()
      .from(messageTranslations)
      .where(and(eq(messageTranslations.messageId, posted.id), eq(messageTranslations.language, "ja")));
    expect(row[0]!.status).toBe("failed");
  });
});

describe("reading and delivery", () => {
  it("serves the reader's translation over SSE too", async () => {
    const t = await team("ja");
    const feed = await live.attachedChannelFeed(t.reader, t.owner, t.workspaceId, t.channelId, { sse: true });
    const text = unique("Through SSE");
    const posted = await post(t, t.owner, { content: text });
    const ready = await until(
      () => feed.received.find((r) => r.event.type === "translation.ready" && r.event.data.message_id === posted.id),
      "translation.ready over SSE",
    );
    expect(ready.event.data).toMatchObject({ language: "ja", status: "done", content: `[ja] ${text}` });
  });

  it("translates a private channel's message for its members' languages only", async () => {
    const t = await team("en");
    const outsider = await registerUser(api, { preferred_language: "th" });
    await api.post(`/api/v1/workspaces/${t.workspaceId}/join`, {}, { token: outsider.token });
    const channel = await api.post(
      `/api/v1/workspaces/${t.workspaceId}/channels`,
      { name: unique("secret"), visibility: "private" },
      { token: t.owner.token },
    );
    expect(channel.status).toBe(201);
    const text = unique("Private words");
    const posted = await api.post(
      `/api/v1/workspaces/${t.workspaceId}/channels/${channel.body.data.id}/messages`,
      { content: text },
      { token: t.owner.token },
    );
    expect(posted.status).toBe(201);
    // The only other language in the workspace (th) belongs to someone who cannot read it.
    expect(await translationRows(posted.body.data.id)).toEqual([]);
    expect(requestsFor(text)).toEqual([]);
  });

  it("stores and announces a translation once when its job runs twice (a retried job doubles nothing)", async () => {
    const t = await team("ja");
    const text = unique("Exactly once");
    const posted = await post(t, t.owner, { content: text });
    await settled(t, t.reader, posted.id);
    const provider = createTranslationProvider(server.config.translation)!;
    await translateMessages(server.app.deps, provider, [
      translationJobs.message.payload.parse({ messageId: posted.id }),
    ]);
    expect(await storedTranslationEvents(posted.id)).toHaveLength(1);
    expect(requestsFor(text)).toHaveLength(1);
  });
});

describe("two jobs of one message side by side", () => {
  it("ask the provider once: the later batch waits for the one working on the message, then finds it done", async () => {
    const t = await team("ja");
    const text = unique("Side by side");
    const posted = await post(t, t.owner, { content: text });
    await settled(t, t.reader, posted.id);
    // A language owed without a job yet (as a reader's read writes it), then two jobs at once.
    const now = new Date();
    await server.app.deps.db
      .insert(messageTranslations)
      .values({ messageId: posted.id, language: "zh-CN", status: "pending", createdAt: now, updatedAt: now });
    const provider = createTranslationProvider(server.config.translation)!;
    const job = translationJobs.message.payload.parse({ messageId: posted.id, language: "zh-CN" });
    await Promise.all([
      translateMessages(server.app.deps, provider, [job]),
      translateMessages(server.app.deps, provider, [job]),
    ]);
    expect(requestsFor(text).filter((request) => request.target === "zh")).toHaveLength(1);
    const [row] = await server.app.deps.db
      .select()
      .from(messageTranslations)
      .where(and(eq(messageTranslations.messageId, posted.id), eq(messageTranslations.language, "zh-CN")));
    expect(row).toMatchObject({ status: "done", content: `[zh-CN] ${text}` });
  });
});

describe("bot posts (inbound webhooks)", () => {
  it("translates a webhook's post, whose language the provider detects, for a ja reader", async () => {
    const t = await team("ja");
    const created = await api.post(
      `/api/v1/workspaces/${t.workspaceId}/webhooks`,
      { name: "CI", default_channel_id: t.channelId },
      { token: t.owner.token },
    );
    expect(created.status).toBe(201);
    const text = unique("Deploy finished");
    const posted = await fetch(created.body.data.url as string, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Service-Webhook-Secret": created.body.data.secret },
      body: JSON.stringify({ content: text }),
    });
    expect(posted.status).toBe(201);
    const { data } = (await posted.json()) as { data: { id: string; translation: unknown } };
    // A bot has no reader's view of its own post.
    expect(data.translation).toBeNull();
    const read = await settled(t, t.reader, data.id);
    expect(read.translation).toEqual({ language: "ja", status: "done", content: `[ja] ${text}` });
    // Sent for detection (no source), once for ja; the English owner's copy the provider
    // detected as English is not_needed.
    expect(requestsFor(text).map((request) => [request.target, request.source])).toEqual(
      expect.arrayContaining([["ja", null]]),
    );
    const ownerView = await until(async () => {
      const message = await readAs(t, t.owner, data.id);
      return message.translation?.status === "pending" ? undefined : message;
    }, "the owner's view to settle");
    expect(ownerView.translation).toEqual({ language: "en", status: "not_needed", content: null });
  });
});

describe("a temporary room's message", () => {
  it("reaches a ja member translated (their own language: a room has no workspace)", async () => {
    const [host, guest] = await Promise.all([
      registerUser(api, { name: "Hal", preferred_language: "en" }),
      registerUser(api, { name: "Jun", preferred_language: "ja" }),
    ]);
    const room = await api.post("/api/v1/external/rooms", { name: "Meetup" }, { token: host.token });
    const roomId: string = room.body.data.room_id;
    await api.post(`/api/v1/external/rooms/${roomId}/join`, {}, { token: guest.token });
    const text = unique("See you at the venue");
    const posted = await api.post(
      `/api/v1/external/rooms/${roomId}/messages`,
      { content: text },
      { token: host.token },
    );
    expect(posted.status).toBe(201);
    const read = await until(async () => {
      const page = await api.get(`/api/v1/external/rooms/${roomId}/messages`, { token: guest.token });
      return page.body.data[0]?.translation?.status === "done" ? page.body.data[0] : undefined;
    }, "the room message's translation");
    expect(read.translation).toEqual({ language: "ja", content: `[ja] ${text}`, status: "done" });
    expect(requestsFor(text)).toHaveLength(1);
  });
});

describe("jobs arriving together", () => {
  let slow: FakeTranslator;
  let slowServer: TestServer;
  let slowApi: RestClient;
  beforeAll(async () => {
    slow = await startFakeLibreTranslate({ delayMs: 400 });
    slowServer = await startTestServer({ TRANSLATION_PROVIDER: "libretranslate", TRANSLATION_URL: slow.url });
    slowApi = restClient(slowServer.url);
  });
  afterAll(async () => {
    await slowServer?.close();
    await slow?.stop();
  });

  it("share provider requests: messages that wait go in one request, a text they share once in it", async () => {
    const t = await team("ja", slowApi);
    const texts = Array.from({ length: 7 }, (_, index) => unique(`Burst ${index}`));
    texts.push(texts[6]!); // the same text twice: translated once
    const posted = await Promise.all(
      texts.map(async (content) => {
        const response = await slowApi.post(
          `/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`,
          { content },
          { token: t.owner.token },
        );
        expect(response.status).toBe(201);
        return response.body.data.id as string;
      }),
    );
    const read = await until(async () => {
      const page = await slowApi.get(`/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`, {
        token: t.reader.token,
      });
      const ours = (page.body.data as { id: string; content: string; translation: { status: string } }[]).filter(
        (message) => posted.includes(message.id),
      );
      return ours.length === texts.length && ours.every((message) => message.translation.status === "done")
        ? ours
        : undefined;
    }, "every translation of the burst");
    for (const message of read)
      expect(message.translation).toEqual({ language: "ja", content: `[ja] ${message.content}`, status: "done" });

    const requests = slow.requests.filter((request) => request.texts.some((text) => texts.includes(text)));
    const sent = requests.flatMap((request) => request.texts);
    // Every text went, none twice in one request, none more often than messages carry it (the
    // two messages sharing a text share its request when they are in one batch).
    expect(new Set(sent)).toEqual(new Set(texts));
    for (const request of requests) expect(new Set(request.texts).size).toBe(request.texts.length);
    expect(sent.length).toBeLessThanOrEqual(texts.length);
    expect(requests.length).toBeLessThan(7);
    expect(Math.max(...requests.map((request) => request.texts.length))).toBeGreaterThan(1);
  });
});

describe("with DeepL", () => {
  let deepl: FakeTranslator;
  let deeplServer: TestServer;
  let deeplApi: RestClient;
  beforeAll(async () => {
    deepl = await startFakeDeepL({ apiKey: "deepl-test-key" });
    deeplServer = await startTestServer({
      TRANSLATION_PROVIDER: "deepl",
      TRANSLATION_URL: deepl.url,
      TRANSLATION_API_KEY: "deepl-test-key",
    });
    deeplApi = restClient(deeplServer.url);
  });
  afterAll(async () => {
    await deeplServer?.close();
    await deepl?.stop();
  });

  it("translates through the official client for a zh-CN reader", async () => {
    const t = await team("zh-CN", deeplApi);
    const text = unique("Release notes are ready");
    const response = await deeplApi.post(
      `/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`,
      { content: text },
      { token: t.owner.token },
    );
    expect(response.status).toBe(201);
    const read = await until(async () => {
      const page = await deeplApi.get(`/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`, {
        token: t.reader.token,
      });
      const message = page.body.data[0];
      return message.translation.status === "done" ? message : undefined;
    }, "the DeepL translation");
    expect(read.translation).toEqual({ language: "zh-CN", content: `[zh-CN] ${text}`, status: "done" });
    expect(deepl.requests).toHaveLength(1);
    expect(deepl.requests[0]).toMatchObject({ texts: [text], apiKey: "deepl-test-key" });
  });
});

describe.runIf(process.env.REDIS_URL)("a server with WORKERS=off", () => {
  it("only enqueues; `npm run worker` (startWorkers) translates", async () => {
    const quiet = await startTestServer({
      TRANSLATION_PROVIDER: "libretranslate",
      TRANSLATION_URL: fake.url,
      WORKERS: "off",
    });
    const quietApi = restClient(quiet.url);
    try {
      const t = await team("ja", quietApi);
      const text = unique("Queued for the worker");
      const posted = await quietApi.post(
        `/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`,
        { content: text },
        { token: t.owner.token },
      );
      expect(posted.status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(requestsFor(text)).toEqual([]);
      const workers = await startWorkers(loadConfig({ ...quiet.env, PORT: "0" }));
      try {
        await until(async () => {
          const page = await quietApi.get(`/api/v1/workspaces/${t.workspaceId}/channels/${t.channelId}/messages`, {
            token: t.reader.token,
          });
          return page.body.data[0].translation.status === "done" ? true : undefined;
        }, "the worker's translation");
      } finally {
        await workers.close();
      }
      expect(requestsFor(text)).toHaveLength(1);
    } finally {
      await quiet.close();
    }
  });
});
