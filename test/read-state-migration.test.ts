// Issue 27: "every membership that exists when this feature arrives starts at its newest message"
// (docs/unread.md, "Where a position starts"; migration 0017_read_state). A database is built at
// migration 0016 (the release before read state: drizzle's migrator over a copy of db/migrations
// whose journal ends at 0016_message_lifecycle), filled through SQL with what that release wrote
// (users, a workspace, channels and their members, top-level messages, a reply that is the newest
// message of #general, a thread parent deleted to a tombstone, a mention, direct conversations
// with and without messages), and then opened by this server, which runs 0017 and later. Every
// count starts at 0, every position at its place's newest live message (a reply included: 0017
// takes the greater of the newest top-level message and the newest reply), a conversation's at its
// last_message_id, and a place without messages at null. A message by someone else afterwards
// counts 1. Runs against PostgreSQL when DATABASE_URL is set, PGlite (a data folder) otherwise.
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { MIGRATIONS_FOLDER, rowsOf } from "../db/client.ts";
import { newId } from "../server/ids.ts";
import { hashPassword } from "../server/services/accounts/passwords.ts";
import { restClient, type ApiResponse, type RestClient } from "./helpers/api.ts";
import { DEFAULT_PASSWORD, uniqueEmail } from "./helpers/factories.ts";
import { startTestServer, type SeedTarget, type TestServer } from "./helpers/server.ts";

/** The last migration before read state. */
const BEFORE_READ_STATE = "0016_message_lifecycle";

type Journal = { entries: { idx: number; tag: string; when: number }[] };

/** A copy of db/migrations whose journal ends at `lastTag`: drizzle's migrator applies only those. */
async function migrationsUpTo(lastTag: string): Promise<string> {
  const folder = await mkdtemp(path.join(tmpdir(), "chat-migrations-"));
  await cp(MIGRATIONS_FOLDER, folder, { recursive: true });
  const journalFile = path.join(folder, "meta", "_journal.json");
  const journal = JSON.parse(await readFile(journalFile, "utf8")) as Journal;
  const last = journal.entries.findIndex((entry) => entry.tag === lastTag);
  if (last === -1) throw new Error(`no migration ${lastTag}`);
  journal.entries = journal.entries.slice(0, last + 1);
  await writeFile(journalFile, JSON.stringify(journal, null, 2));
  return folder;
}

type SqlClient = { query<Row>(text: string, params?: unknown[]): Promise<Row[]>; close(): Promise<void> };

/** The target database, migrated with drizzle's migrator over `migrationsFolder` only. */
async function openAt(target: SeedTarget, migrationsFolder: string): Promise<SqlClient> {
  if ("databaseUrl" in target) {
    const { default: postgres } = await import("postgres");
    const { drizzle } = await import("drizzle-orm/postgres-js");
    const { migrate } = await import("drizzle-orm/postgres-js/migrator");
    const client = postgres(target.databaseUrl, { max: 1, onnotice: () => {} });
    await migrate(drizzle(client), { migrationsFolder });
    return {
      query: async <Row>(text: string, params: unknown[] = []) =>
        (await client.unsafe(text, params as never[])) as unknown as Row[],
      close: () => client.end({ timeout: 5 }),
    };
  }
  const { PGlite } = await import("@electric-sql/pglite");
  const { drizzle } = await import("drizzle-orm/pglite");
  const { migrate } = await import("drizzle-orm/pglite/migrator");
  // Where the server opens PGlite for DATA_DIR (db/client.ts).
  const client = await PGlite.create(path.join(target.dataDir, "pglite"));
  await migrate(drizzle(client), { migrationsFolder });
  return {
    query: async <Row>(text: string, params: unknown[] = []) => (await client.query<Row>(text, params)).rows,
    close: () => client.close(),
  };
}

type Person = { key: "ada" | "bob" | "cy"; id: number; email: string; token: string };

/** What was written before the upgrade, and what each place's position must start at. */
const seeded = {
  workspaceId: "",
  people: {} as Record<Person["key"], Person>,
  channels: {} as Record<
    "general" | "random" | "secret" | "quiet",
    { id: string; members: Person["key"][]; newest: string | null }
  >,
  conversations: {} as Record<"adaBob" | "bobCy", { id: string; between: Person["key"][]; newest: string | null }>,
  /** Messages of #general, in posting order, for the checks below. */
  general: {} as { mention: string; parent: string; reply: string; newestTopLevel: string },
  random: {} as { tombstone: string; newestTopLevel: string },
};

/** Fills a database at 0016 the way that release wrote rows (see db/migrations/0000..0016). */
async function seedBeforeReadState(target: SeedTarget): Promise<void> {
  const migrations = await migrationsUpTo(BEFORE_READ_STATE);
  const db = await openAt(target, migrations);
  try {
    // This really is the schema before read state.
    const columns = await db.query<{ column_name: string }>(
      `select column_name from information_schema.columns where table_name = 'channel_members'`,
    );
    expect(columns.map((column) => column.column_name).sort()).toEqual(["channel_id", "joined_at", "user_id"]);
    const [readStates] = await db.query<{ exists: boolean }>(
      `select to_regclass('public.conversation_read_states') is not null as exists`,
    );
    expect(readStates!.exists).toBe(false);

    const passwordHash = await hashPassword(DEFAULT_PASSWORD);
    for (const key of ["ada", "bob", "cy"] as const) {
      const email = uniqueEmail(key);
      const [row] = await db.query<{ id: number }>(
        `insert into users (name, email, password_hash) values ($1, $2, $3) returning id`,
        [key, email, passwordHash],
      );
      seeded.people[key] = { key, id: row!.id, email, token: "" };
    }
    const id = (key: Person["key"]) => seeded.people[key].id;

    const workspaceId = newId("workspace");
    seeded.workspaceId = workspaceId;
    await db.query(
      `insert into workspaces (id, name, slug, visibility, owner_id) values ($1, 'Before', $2, 'public', $3)`,
      [workspaceId, `before-${workspaceId.slice(-8).toLowerCase()}`, id("ada")],
    );
    for (const [key, role] of [
      ["ada", "owner"],
      ["bob", "member"],
      ["cy", "member"],
    ] as const) {
      await db.query(`insert into workspace_members (id, workspace_id, user_id, role) values ($1, $2, $3, $4)`, [
        newId("member"),
        workspaceId,
        id(key),
        role,
      ]);
    }
    const channel = async (
      name: "general" | "random" | "secret" | "quiet",
      visibility: "public" | "private",
      members: Person["key"][],
    ) => {
      const channelId = newId("channel");
      await db.query(
        `insert into channels (id, workspace_id, name, slug, visibility, is_general, created_by)
         values ($1, $2, $3, $3, $4, $5, $6)`,
        [channelId, workspaceId, name, visibility, name === "general", id("ada")],
      );
      for (const member of members) {
        await db.query(`insert into channel_members (channel_id, user_id) values ($1, $2)`, [channelId, id(member)]);
      }
      seeded.channels[name] = { id: channelId, members, newest: null };
      return channelId;
    };
    const general = await channel("general", "public", ["ada", "bob", "cy"]);
    const random = await channel("random", "public", ["ada", "bob"]);
    const secret = await channel("secret", "private", ["ada", "cy"]);
    await channel("quiet", "public", ["ada", "bob"]);

    const conversation = async (name: "adaBob" | "bobCy", a: Person["key"], b: Person["key"]) => {
      const conversationId = newId("conversation");
      await db.query(`insert into conversations (id, user_a_id, user_b_id) values ($1, $2, $3)`, [
        conversationId,
        Math.min(id(a), id(b)),
        Math.max(id(a), id(b)),
      ]);
      seeded.conversations[name] = { id: conversationId, between: [a, b], newest: null };
      return conversationId;
    };
    const adaBob = await conversation("adaBob", "ada", "bob");
    await conversation("bobCy", "bob", "cy");

    // Messages an hour ago, a second apart, in this order: ids sort in posting order.
    let at = Date.now() - 60 * 60_000;
    const message = async (
      place: { channelId: string } | { conversationId: string },
      author: Person["key"],
      content: string,
      extra: {
        parent?: string;
        mentioned?: Person["key"][];
        mentionsChannel?: boolean;
        replyCount?: number;
        deleted?: boolean;
      } = {},
    ) => {
      at += 1_000;
      const messageId = newId("message", at);
      const time = new Date(at).toISOString();
      await db.query(
        `insert into messages (id, workspace_id, channel_id, conversation_id, author_user_id, content,
           parent_message_id, reply_count, mentioned_user_ids, mentions_channel, deleted_at, created_at, updated_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9::integer[], $10, $11::timestamptz, $12::timestamptz, $12::timestamptz)`,
        [
          messageId,
          "channelId" in place ? workspaceId : null,
          "channelId" in place ? place.channelId : null,
          "conversationId" in place ? place.conversationId : null,
          id(author),
          extra.deleted ? "" : content,
          extra.parent ?? null,
          extra.replyCount ?? 0,
          `{${(extra.mentioned ?? []).map(id).join(",")}}`,
          extra.mentionsChannel ?? false,
          extra.deleted ? time : null,
          time,
        ],
      );
      return messageId;
    };

    // #general: top-level messages, a mention of cy, and a reply that is the channel's newest message.
    const hello = await message({ channelId: general }, "ada", "hello");
    const mention = await message({ channelId: general }, "bob", `look <@${id("cy")}>`, { mentioned: ["cy"] });
    const parent = await message({ channelId: general }, "ada", "a thread", { replyCount: 1 });
    const newestTopLevel = await message({ channelId: general }, "cy", "<!channel> lunch?", { mentionsChannel: true });
    const reply = await message({ channelId: general }, "bob", `in the thread <@${id("ada")}>`, {
      parent,
      mentioned: ["ada"],
    });
    void hello;
    seeded.general = { mention, parent, reply, newestTopLevel };
    seeded.channels.general.newest = reply;

    // #random: a thread parent deleted to a tombstone (its reply keeps it), then the newest message, top-level.
    await message({ channelId: random }, "ada", "one");
    await message({ channelId: random }, "bob", "<!here> two", { mentionsChannel: true });
    const tombstone = await message({ channelId: random }, "bob", "", { replyCount: 1, deleted: true });
    await message({ channelId: random }, "ada", `reply to a deleted parent <@${id("bob")}>`, {
      parent: tombstone,
      mentioned: ["bob"],
    });
    const randomNewest = await message({ channelId: random }, "bob", `newest <@${id("ada")}>`, {
      mentioned: ["ada"],
    });
    seeded.random = { tombstone, newestTopLevel: randomNewest };
    seeded.channels.random.newest = randomNewest;

    // A private channel of ada and cy.
    seeded.channels.secret.newest = await message({ channelId: secret }, "cy", `secret <@${id("ada")}>`, {
      mentioned: ["ada"],
    });

    // ada and bob talked; bob and cy opened a conversation and said nothing.
    await message({ conversationId: adaBob }, "ada", "hi bob");
    await message({ conversationId: adaBob }, "bob", "hi ada");
    const lastDirect = await message({ conversationId: adaBob }, "ada", "how are you?");
    await db.query(`update conversations set last_message_id = $1 where id = $2`, [lastDirect, adaBob]);
    seeded.conversations.adaBob.newest = lastDirect;
  } finally {
    await db.close();
    await rm(migrations, { recursive: true, force: true });
  }
}

let server: TestServer;
let api: RestClient;

beforeAll(async () => {
  server = await startTestServer({}, { seed: seedBeforeReadState });
  api = restClient(server.url);
  for (const person of Object.values(seeded.people)) {
    const response = await api.post("/api/v1/auth/app/login", { email: person.email, password: DEFAULT_PASSWORD });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    person.token = response.body.access_token;
  }
}, 120_000);

afterAll(() => server?.close());

type Counts = { last_read_message_id: string | null; unread_count: number | null; mention_count: number | null };
type ChannelRow = Counts & { id: string; is_member: boolean; muted: boolean | null };
type ConversationRow = Counts & { id: string; muted: boolean };

function ok(response: ApiResponse, what: string) {
  expect(response.status, `${what}: ${JSON.stringify(response.body)}`).toBe(200);
  return response.body;
}

const person = (key: Person["key"]) => seeded.people[key];

async function channelRows(key: Person["key"]): Promise<ChannelRow[]> {
  return ok(
    await api.get(`/api/v1/workspaces/${seeded.workspaceId}/channels`, { token: person(key).token }),
    `${key}'s channels`,
  ).data;
}

async function conversationRows(key: Person["key"]): Promise<ConversationRow[]> {
  return ok(await api.get("/api/v1/direct-conversations", { token: person(key).token }), `${key}'s conversations`).data;
}

async function summary(key: Person["key"]) {
  return ok(await api.get("/api/v1/unread", { token: person(key).token }), `${key}'s unread`).data;
}

describe(`a database at ${BEFORE_READ_STATE}, opened by this release`, () => {
  it("every membership that exists when the feature arrives starts at its newest message, with nothing unread", async () => {
    // The server ran the migrations after 0016 on the seeded database (0017_read_state first).
    const journal = JSON.parse(
      await readFile(path.join(MIGRATIONS_FOLDER, "meta", "_journal.json"), "utf8"),
    ) as Journal;
    expect(journal.entries.findIndex((entry) => entry.tag === "0017_read_state")).toBe(
      journal.entries.findIndex((entry) => entry.tag === BEFORE_READ_STATE) + 1,
    );
    const [applied] = rowsOf<{ count: number }>(
      await server.app.deps.db.execute(sql`select count(*)::integer as count from drizzle.__drizzle_migrations`),
    );
    expect(applied!.count).toBe(journal.entries.length);
    // The reply is the newest message of #general: the position is the reply, not the newest top-level message.
    expect(seeded.general.reply > seeded.general.newestTopLevel).toBe(true);
    for (const key of ["ada", "bob", "cy"] as const) {
      const rows = await channelRows(key);
      for (const [name, channel] of Object.entries(seeded.channels)) {
        const row = rows.find((candidate) => candidate.id === channel.id);
        if (channel.members.includes(key)) {
          expect(row, `${key} in #${name}`).toEqual(
            expect.objectContaining({
              is_member: true,
              last_read_message_id: channel.newest,
              unread_count: 0,
              mention_count: 0,
              muted: false,
            }),
          );
        } else if (name === "secret") {
          expect(row, `${key} does not see #${name}`).toBeUndefined();
        } else {
          // The migration gives no one a membership they did not have.
          expect(row, `${key} not in #${name}`).toMatchObject({
            is_member: false,
            last_read_message_id: null,
            unread_count: null,
            mention_count: null,
            muted: null,
          });
        }
      }

      const conversations = await conversationRows(key);
      for (const [name, conversation] of Object.entries(seeded.conversations)) {
        const row = conversations.find((candidate) => candidate.id === conversation.id);
        if (!conversation.between.includes(key)) {
          expect(row, `${key} is not in ${name}`).toBeUndefined();
          continue;
        }
        expect(row, `${key} in ${name}`).toEqual(
          expect.objectContaining({
            last_read_message_id: conversation.newest,
            unread_count: 0,
            mention_count: 0,
            muted: false,
          }),
        );
      }

      expect(await summary(key), `${key}'s GET /api/v1/unread`).toEqual({
        total_mentions: 0,
        workspaces: [],
        channels: [],
        conversations: [],
      });
    }
  });

  it("a message by someone else afterwards counts 1, and a mention of the reader 1 mention", async () => {
    const general = seeded.channels.general.id;
    const random = seeded.channels.random.id;
    const posted = await api.post(
      `/api/v1/workspaces/${seeded.workspaceId}/channels/${general}/messages`,
      { content: "after the upgrade" },
      { token: person("cy").token },
    );
    expect(posted.status, JSON.stringify(posted.body)).toBe(201);
    const mention = await api.post(
      `/api/v1/workspaces/${seeded.workspaceId}/channels/${random}/messages`,
      { content: `after the upgrade <@${person("ada").id}>` },
      { token: person("bob").token },
    );
    expect(mention.status, JSON.stringify(mention.body)).toBe(201);
    const direct = await api.post(
      `/api/v1/direct-conversations/${seeded.conversations.adaBob.id}/messages`,
      { content: "after the upgrade" },
      { token: person("bob").token },
    );
    expect(direct.status, JSON.stringify(direct.body)).toBe(201);

    const adaChannels = await channelRows("ada");
    expect(adaChannels.find((row) => row.id === general)).toMatchObject({
      last_read_message_id: seeded.channels.general.newest,
      unread_count: 1,
      mention_count: 0,
    });
    expect(adaChannels.find((row) => row.id === random)).toMatchObject({
      last_read_message_id: seeded.channels.random.newest,
      unread_count: 1,
      mention_count: 1,
    });
    expect((await channelRows("bob")).find((row) => row.id === general)).toMatchObject({
      unread_count: 1,
      mention_count: 0,
    });
    expect((await conversationRows("ada")).find((row) => row.id === seeded.conversations.adaBob.id)).toMatchObject({
      last_read_message_id: seeded.conversations.adaBob.newest,
      unread_count: 1,
      mention_count: 1,
    });

    expect(await summary("ada")).toEqual({
      total_mentions: 2,
      workspaces: [{ workspace_id: seeded.workspaceId, unread_count: 2, mention_count: 1 }],
      channels: expect.arrayContaining([
        expect.objectContaining({ channel_id: general, unread_count: 1, mention_count: 0 }),
        expect.objectContaining({ channel_id: random, unread_count: 1, mention_count: 1 }),
      ]),
      conversations: [
        expect.objectContaining({
          conversation_id: seeded.conversations.adaBob.id,
          last_read_message_id: seeded.conversations.adaBob.newest,
          unread_count: 1,
          mention_count: 1,
        }),
      ],
    });
    expect((await summary("ada")).channels).toHaveLength(2);
  });
});
