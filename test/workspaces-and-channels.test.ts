// Workspaces, channels and channel membership over REST against the real server: the
// contract's records, the Limits table at its boundaries, roles, visibility, join passwords,
// the events on a workspace's stream, and a few of the same procedures through the typed client.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { createChatClient, TRPCClientError } from "@chat-service/client";
import { channels, workspaces } from "../db/schema/index.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$/;
const VALIDATION_MESSAGE = "The given data was invalid.";
const UNAUTHORIZED = { message: "This action is unauthorized." };
const WORKSPACE_NOT_FOUND = { message: "Workspace not found." };
const JOIN_PASSWORD = "open-sesame-42";

/** A slug no other test uses (workspace slugs are unique across the service). */
const uniqueSlug = (label = "ws") => `${label}-${randomBytes(4).toString("hex")}`;

const workspacePath = (id: string) => `/api/v1/workspaces/${id}`;
const channelsPath = (workspaceId: string) => `${workspacePath(workspaceId)}/channels`;
const channelPath = (workspaceId: string, channelId: string) => `${channelsPath(workspaceId)}/${channelId}`;
const channelMembersPath = (workspaceId: string, channelId: string) => `${channelPath(workspaceId, channelId)}/members`;

type Workspace = { id: string; slug: string; [key: string]: unknown };
type Channel = { id: string; slug: string; [key: string]: unknown };

async function createWorkspace(owner: RegisteredUser, body: Record<string, unknown> = {}): Promise<Workspace> {
  const response = await ctx.api.post("/api/v1/workspaces", { name: "Team", ...body }, { token: owner.token });
  if (response.status !== 201) throw new Error(`workspace create: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.data;
}

async function createChannel(
  user: RegisteredUser,
  workspaceId: string,
  body: Record<string, unknown> = {},
): Promise<Channel> {
  const response = await ctx.api.post(channelsPath(workspaceId), { name: "Channel", ...body }, { token: user.token });
  if (response.status !== 201) throw new Error(`channel create: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.data;
}

async function join(user: RegisteredUser, workspaceId: string, body: Record<string, unknown> = {}) {
  const response = await ctx.api.post(`${workspacePath(workspaceId)}/join`, body, { token: user.token });
  if (response.status !== 200) throw new Error(`join: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.data;
}

/** The channel list as channel records (the caller's read state on each, docs/unread.md, left out). */
async function channelList(user: RegisteredUser, workspaceId: string): Promise<Channel[]> {
  const response = await ctx.api.get(channelsPath(workspaceId), { token: user.token });
  expect(response.status).toBe(200);
  return response.body.data.map(
    ({
      is_member: _member,
      last_read_message_id: _position,
      unread_count: _unread,
      mention_count: _mentions,
      muted: _muted,
      ...channel
    }: Channel & Record<string, unknown>) => channel,
  );
}

async function generalChannel(user: RegisteredUser, workspaceId: string): Promise<Channel> {
  const general = (await channelList(user, workspaceId)).find((channel) => channel.slug === "general");
  if (!general) throw new Error("no #general");
  return general;
}

async function channelMemberIds(user: RegisteredUser, workspaceId: string, channelId: string): Promise<number[]> {
  const response = await ctx.api.get(channelMembersPath(workspaceId, channelId), { token: user.token });
  expect(response.status).toBe(200);
  return response.body.data.map((member: { user_id: number }) => member.user_id).sort((a: number, b: number) => a - b);
}

/** Makes `user` (already a member) an admin, through the API as the owner. */
async function promoteToAdmin(owner: RegisteredUser, workspaceId: string, user: RegisteredUser): Promise<void> {
  const members = await ctx.api.get(`${workspacePath(workspaceId)}/members`, { token: owner.token });
  const member = members.body.data.find((entry: { user_id: number }) => entry.user_id === user.id);
  const response = await ctx.api.put(
    `${workspacePath(workspaceId)}/members/${member.id}`,
    { role: "admin" },
    { token: owner.token },
  );
  expect(response.status).toBe(200);
  expect(response.body.data.role).toBe("admin");
}

/**
 * A public workspace with an owner, an admin and a plain member, and an outsider who is in
 * no workspace of theirs.
 */
async function team() {
  const [owner, admin, member, outsider] = await Promise.all([
    registerUser(ctx.api, { name: "Olive Owner" }),
    registerUser(ctx.api, { name: "Adam Admin" }),
    registerUser(ctx.api, { name: "Mia Member" }),
    registerUser(ctx.api, { name: "Oscar Outsider" }),
  ]);
  const workspace = await createWorkspace(owner!, { name: "Team", visibility: "public" });
  await join(admin!, workspace.id);
  await join(member!, workspace.id);
  await promoteToAdmin(owner!, workspace.id, admin!);
  return { owner: owner!, admin: admin!, member: member!, outsider: outsider!, workspace };
}

/** Every key anywhere in a JSON value. */
function keysOf(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(keysOf);
  if (value && typeof value === "object")
    return Object.entries(value).flatMap(([key, inner]) => [key, ...keysOf(inner)]);
  return [];
}

function expectNoPassword(body: unknown): void {
  const keys = keysOf(body);
  expect(keys).not.toContain("password");
  expect(keys).not.toContain("password_hash");
  expect(keys).not.toContain("passwordHash");
}

function expectFieldError(response: { status: number; body: any }, field: string, text?: string): void {
  expect(response.status).toBe(422);
  expect(response.body).toEqual({
    message: VALIDATION_MESSAGE,
    errors: { [field]: text === undefined ? [expect.any(String)] : [text] },
  });
}

type WorkspaceEvent = { id: string; type: string; workspace_id: string; created_at: string; data: any };

/** Records the events of a workspace's stream from now on. */
async function recordEvents(workspaceId: string) {
  const events: WorkspaceEvent[] = [];
  const topic = `workspace:${workspaceId}`;
  const listener = (message: unknown) => {
    events.push((message as { event: WorkspaceEvent }).event);
  };
  await ctx.server.app.deps.events.subscribe(topic, listener);
  const unsubscribe = () => ctx.server.app.deps.events.unsubscribe(topic, listener);
  return {
    events,
    unsubscribe,
    next: (type: string, matches: (event: WorkspaceEvent) => boolean = () => true) =>
      until(() => events.find((event) => event.type === type && matches(event)), `a ${type} event`),
  };
}

describe("workspaces", () => {
  it("creates a private workspace by default with exactly the contract's fields, the caller its owner", async () => {
    const owner = await registerUser(ctx.api);
    const response = await ctx.api.post("/api/v1/workspaces", { name: "Design Team" }, { token: owner.token });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      data: {
        id: expect.stringMatching(/^ws_[0-9A-Z]{26}$/),
        name: "Design Team",
        slug: expect.stringMatching(/^design-team/),
        visibility: "private",
        has_password: false,
        owner_id: owner.id,
        role: "owner",
        member_count: 1,
        created_at: expect.stringMatching(ISO_WITH_OFFSET),
        updated_at: expect.stringMatching(ISO_WITH_OFFSET),
      },
    });
    const workspace = response.body.data;
    const get = await ctx.api.get(workspacePath(workspace.id), { token: owner.token });
    expect(get.status).toBe(200);
    expect(get.body).toEqual({ data: workspace });
  });

  it("comes with a public #general channel that the creator is in", async () => {
    const owner = await registerUser(ctx.api, { name: "Gina" });
    const workspace = await createWorkspace(owner);
    const list = await ctx.api.get(channelsPath(workspace.id), { token: owner.token });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      data: [
        {
          id: expect.stringMatching(/^ch_/),
          workspace_id: workspace.id,
          name: "general",
          slug: "general",
          visibility: "public",
          has_password: false,
          created_at: expect.stringMatching(ISO_WITH_OFFSET),
          updated_at: expect.stringMatching(ISO_WITH_OFFSET),
          // The caller's read state (docs/unread.md): a member, nothing posted yet.
          is_member: true,
          last_read_message_id: null,
          unread_count: 0,
          mention_count: 0,
          muted: false,
        },
      ],
      meta: { total: 1 },
    });
    const members = await ctx.api.get(channelMembersPath(workspace.id, list.body.data[0].id), { token: owner.token });
    expect(members.status).toBe(200);
    expect(members.body).toEqual({
      data: [
        {
          channel_id: list.body.data[0].id,
          user_id: owner.id,
          name: "Gina",
          avatar_url: null,
          joined_at: expect.stringMatching(ISO_WITH_OFFSET),
        },
      ],
      meta: { total: 1 },
    });
  });

  it("lists only the caller's workspaces, with the caller's role in each", async () => {
    const [ann, bob] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const first = await createWorkspace(ann!, { name: "Alpha" });
    const second = await createWorkspace(ann!, { name: "Beta", visibility: "public" });
    const bobs = await createWorkspace(bob!, { name: "Bob's", visibility: "public" });

    const list = await ctx.api.get("/api/v1/workspaces", { token: ann!.token });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: expect.any(Array), meta: { total: 2 } });
    expect(list.body.data.map((workspace: Workspace) => workspace.id).sort()).toEqual([first.id, second.id].sort());
    expect(list.body.data.find((workspace: Workspace) => workspace.id === first.id)).toEqual(first);

    await join(ann!, bobs.id);
    const after = await ctx.api.get("/api/v1/workspaces", { token: ann!.token });
    expect(after.body.meta).toEqual({ total: 3 });
    expect(after.body.data.find((workspace: Workspace) => workspace.id === bobs.id)).toMatchObject({
      id: bobs.id,
      owner_id: bob!.id,
      role: "member",
      member_count: 2,
    });
    // Bob still sees only his own.
    const bobsList = await ctx.api.get("/api/v1/workspaces", { token: bob!.token });
    expect(bobsList.body.data.map((workspace: Workspace) => workspace.id)).toEqual([bobs.id]);
    expect(bobsList.body.meta).toEqual({ total: 1 });
  });

  it("shows a workspace to its members and is 404 {message} for everyone else", async () => {
    const [owner, stranger] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    for (const visibility of ["private", "public"]) {
      const workspace = await createWorkspace(owner!, { visibility });
      const hidden = await ctx.api.get(workspacePath(workspace.id), { token: stranger!.token });
      expect(hidden.status).toBe(404);
      expect(hidden.body).toEqual(WORKSPACE_NOT_FOUND);
      const channelsOfIt = await ctx.api.get(channelsPath(workspace.id), { token: stranger!.token });
      expect(channelsOfIt.status).toBe(404);
      expect(channelsOfIt.body).toEqual(WORKSPACE_NOT_FOUND);
    }
    const unknown = await ctx.api.get(workspacePath("ws_01AAAAAAAAAAAAAAAAAAAAAAAA"), { token: owner!.token });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual(WORKSPACE_NOT_FOUND);
  });

  it("answers 401 Unauthenticated. without a token", async () => {
    const response = await ctx.api.get("/api/v1/workspaces");
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ message: "Unauthenticated." });
    const create = await ctx.api.post("/api/v1/workspaces", { name: "Nope" });
    expect(create.status).toBe(401);
    expect(create.body).toEqual({ message: "Unauthenticated." });
  });
});

describe("POST /api/v1/workspaces/{id}/join", () => {
  it("joins a public workspace as a member, lands in #general, and is harmless when repeated", async () => {
    const [owner, joiner] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api, { name: "Joy" })]);
    const workspace = await createWorkspace(owner!, { name: "Open House", visibility: "public" });

    // A non-member cannot see it before joining.
    expect((await ctx.api.get(workspacePath(workspace.id), { token: joiner!.token })).status).toBe(404);

    const response = await ctx.api.post(`${workspacePath(workspace.id)}/join`, {}, { token: joiner!.token });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      data: { ...workspace, role: "member", member_count: 2, updated_at: expect.stringMatching(ISO_WITH_OFFSET) },
    });

    const again = await ctx.api.post(`${workspacePath(workspace.id)}/join`, {}, { token: joiner!.token });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ id: workspace.id, role: "member", member_count: 2 });

    // The owner joining their own workspace changes nothing either.
    const ownerJoin = await ctx.api.post(`${workspacePath(workspace.id)}/join`, {}, { token: owner!.token });
    expect(ownerJoin.status).toBe(200);
    expect(ownerJoin.body.data).toMatchObject({ role: "owner", member_count: 2 });

    expect((await ctx.api.get(workspacePath(workspace.id), { token: joiner!.token })).body.data).toMatchObject({
      role: "member",
      member_count: 2,
    });
    const general = await generalChannel(joiner!, workspace.id);
    expect(await channelMemberIds(joiner!, workspace.id, general.id)).toEqual(
      [owner!.id, joiner!.id].sort((a, b) => a - b),
    );
    const members = await ctx.api.get(channelMembersPath(workspace.id, general.id), { token: owner!.token });
    expect(members.body.data.find((member: { user_id: number }) => member.user_id === joiner!.id)).toEqual({
      channel_id: general.id,
      user_id: joiner!.id,
      name: "Joy",
      avatar_url: null,
      joined_at: expect.stringMatching(ISO_WITH_OFFSET),
    });
    expect(members.body.meta).toEqual({ total: 2 });
  });

  it("is 404 for a private workspace (invite only), and the caller is not added", async () => {
    const [owner, joiner] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const workspace = await createWorkspace(owner!, { visibility: "private" });
    const response = await ctx.api.post(`${workspacePath(workspace.id)}/join`, {}, { token: joiner!.token });
    expect(response.status).toBe(404);
    expect(response.body).toEqual(WORKSPACE_NOT_FOUND);
    // Even with a password: a private workspace is not joinable.
    const withPassword = await createWorkspace(owner!, { visibility: "private", password: JOIN_PASSWORD });
    const second = await ctx.api.post(
      `${workspacePath(withPassword.id)}/join`,
      { password: JOIN_PASSWORD },
      { token: joiner!.token },
    );
    expect(second.status).toBe(404);
    expect((await ctx.api.get(workspacePath(workspace.id), { token: owner!.token })).body.data.member_count).toBe(1);
    expect((await ctx.api.get("/api/v1/workspaces", { token: joiner!.token })).body.meta).toEqual({ total: 0 });
  });

  it("asks for the password of a protected workspace: missing and wrong are 422 key password, right is 200", async () => {
    const [owner, joiner] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const workspace = await createWorkspace(owner!, { visibility: "public", password: JOIN_PASSWORD });
    expect(workspace.has_password).toBe(true);
    const path = `${workspacePath(workspace.id)}/join`;

    expectFieldError(await ctx.api.post(path, {}, { token: joiner!.token }), "password");
    expectFieldError(await ctx.api.post(path, { password: "wrong-password" }, { token: joiner!.token }), "password");
    expect((await ctx.api.get(workspacePath(workspace.id), { token: joiner!.token })).status).toBe(404);

    const response = await ctx.api.post(path, { password: JOIN_PASSWORD }, { token: joiner!.token });
    expect(response.status).toBe(200);
    expect(response.body.data).toMatchObject({ id: workspace.id, role: "member", member_count: 2, has_password: true });
    expectNoPassword(response.body);
    const general = await generalChannel(joiner!, workspace.id);
    expect(await channelMemberIds(owner!, workspace.id, general.id)).toContain(joiner!.id);
  });
});

describe("limits of workspace and channel fields", () => {
  // The same rules on both create endpoints; channels are created in a workspace of `owner`.
  async function targets() {
    const owner = await registerUser(ctx.api);
    const workspace = await createWorkspace(owner);
    return {
      owner,
      workspace,
      create: {
        workspace: (body: Record<string, unknown>) => ctx.api.post("/api/v1/workspaces", body, { token: owner.token }),
        channel: (body: Record<string, unknown>) =>
          ctx.api.post(channelsPath(workspace.id), body, { token: owner.token }),
      },
    };
  }

  it("accepts a 120-character name and rejects 121 with key name", async () => {
    const { create } = await targets();
    for (const [kind, post] of Object.entries(create)) {
      const ok = await post({ name: "n".repeat(120) });
      expect(ok.status, kind).toBe(201);
      expect(ok.body.data.name).toBe("n".repeat(120));
      expectFieldError(
        await post({ name: "n".repeat(121) }),
        "name",
        "The name field must not be greater than 120 characters.",
      );
      expectFieldError(await post({}), "name", "The name field is required.");
    }
  });

  it("accepts letters, digits, dashes and underscores in a slug, up to 80, and rejects anything else", async () => {
    const { create } = await targets();
    for (const [kind, post] of Object.entries(create)) {
      const mixed = `Team_Alpha-01-${randomBytes(3).toString("hex")}`;
      const ok = await post({ name: "Slugged", slug: mixed });
      expect(ok.status, kind).toBe(201);
      // Slugs are lower-cased (docs/api.md): "Acme" and "acme" are the same slug.
      expect(ok.body.data.slug).toBe(mixed.toLowerCase());

      const eighty = uniqueSlug("s").padEnd(80, "x");
      expect(eighty).toHaveLength(80);
      const long = await post({ name: "Long slug", slug: eighty });
      expect(long.status, kind).toBe(201);
      expect(long.body.data.slug).toBe(eighty);

      expectFieldError(
        await post({ name: "Too long", slug: uniqueSlug("s").padEnd(81, "x") }),
        "slug",
        "The slug field must not be greater than 80 characters.",
      );
      for (const slug of ["has space", "é", "dots.are.out", "slash/no"]) {
        expectFieldError(
          await post({ name: "Bad slug", slug }),
          "slug",
          "The slug field must only contain letters, numbers, dashes, and underscores.",
        );
      }
    }
  });

  it("accepts passwords of 8 and 120 characters and rejects 7 and 121 with key password", async () => {
    const { create } = await targets();
    for (const [kind, post] of Object.entries(create)) {
      expectFieldError(
        await post({ name: "Short", password: "p".repeat(7) }),
        "password",
        "The password field must be at least 8 characters.",
      );
      expectFieldError(
        await post({ name: "Long", password: "p".repeat(121) }),
        "password",
        "The password field must not be greater than 120 characters.",
      );
      for (const length of [8, 120]) {
        const ok = await post({ name: `Password ${length}`, password: "p".repeat(length) });
        expect(ok.status, `${kind} ${length}`).toBe(201);
        expect(ok.body.data.has_password).toBe(true);
      }
    }
  });

  it("accepts visibility public or private only", async () => {
    const { create } = await targets();
    for (const [kind, post] of Object.entries(create)) {
      for (const visibility of ["public", "private"]) {
        const ok = await post({ name: "Visible", visibility });
        expect(ok.status, kind).toBe(201);
        expect(ok.body.data.visibility).toBe(visibility);
      }
      for (const visibility of ["secret", "PUBLIC", ""]) {
        expectFieldError(await post({ name: "Odd", visibility }), "visibility");
      }
    }
  });

  it("applies the same limits on channel update", async () => {
    const { owner, workspace } = await targets();
    const channel = await createChannel(owner, workspace.id, { name: "Tuned" });
    const put = (body: Record<string, unknown>) =>
      ctx.api.put(channelPath(workspace.id, channel.id), body, { token: owner.token });
    expectFieldError(await put({ name: "n".repeat(121) }), "name");
    expectFieldError(await put({ slug: "has space" }), "slug");
    expectFieldError(await put({ slug: "s".repeat(81) }), "slug");
    expectFieldError(await put({ password: "p".repeat(7) }), "password");
    expectFieldError(await put({ password: "p".repeat(121) }), "password");
    expectFieldError(await put({ visibility: "secret" }), "visibility");
    // Nothing changed.
    expect((await channelList(owner, workspace.id)).find((entry) => entry.id === channel.id)).toEqual(channel);
    const ok = await put({ name: "n".repeat(120), slug: "s".repeat(80), password: "p".repeat(120) });
    expect(ok.status).toBe(200);
    expect(ok.body.data).toMatchObject({ name: "n".repeat(120), slug: "s".repeat(80), has_password: true });
  });
});

describe("slugs", () => {
  it("are lower-cased, so uniqueness ignores case", async () => {
    const owner = await registerUser(ctx.api);
    const slug = `Case-${randomBytes(3).toString("hex")}`;
    expect((await createWorkspace(owner, { slug })).slug).toBe(slug.toLowerCase());
    const clash = await ctx.api.post(
      "/api/v1/workspaces",
      { name: "Clash", slug: slug.toUpperCase() },
      { token: owner.token },
    );
    expectFieldError(clash, "slug", "The slug has already been taken.");
  });

  it("are generated from the name, and a second workspace of the same name gets another unique slug", async () => {
    const owner = await registerUser(ctx.api);
    const first = await createWorkspace(owner, { name: "Acme Corp!" });
    expect(first.slug).toBe("acme-corp");
    const second = await createWorkspace(owner, { name: "Acme Corp" });
    expect(second.slug).not.toBe("acme-corp");
    expect(second.slug).toBe("acme-corp-2");
    const channel = await createChannel(owner, first.id, { name: "Release Planning!" });
    expect(channel.slug).toBe("release-planning");
    const twin = await createChannel(owner, first.id, { name: "Release planning" });
    expect(twin.slug).not.toBe("release-planning");
    expect(twin.slug).toMatch(/^release-planning-/);
  });

  it("rejects an explicit workspace slug that is taken, by anyone", async () => {
    const [ann, bob] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const slug = uniqueSlug("taken");
    await createWorkspace(ann!, { slug });
    for (const user of [ann!, bob!]) {
      const response = await ctx.api.post("/api/v1/workspaces", { name: "Copy", slug }, { token: user.token });
      expectFieldError(response, "slug", "The slug has already been taken.");
    }
    expect((await ctx.api.get("/api/v1/workspaces", { token: bob!.token })).body.meta).toEqual({ total: 0 });
  });

  it("are unique per workspace for channels: the same slug is fine in another workspace", async () => {
    const owner = await registerUser(ctx.api);
    const [one, two] = [await createWorkspace(owner), await createWorkspace(owner)];
    const dev = await createChannel(owner, one!.id, { name: "Dev", slug: "dev" });
    expect(dev.slug).toBe("dev");

    const duplicate = await ctx.api.post(channelsPath(one!.id), { name: "Dev 2", slug: "dev" }, { token: owner.token });
    expectFieldError(duplicate, "slug", "The slug has already been taken.");
    const general = await ctx.api.post(channelsPath(one!.id), { name: "Gen", slug: "general" }, { token: owner.token });
    expectFieldError(general, "slug", "The slug has already been taken.");

    const elsewhere = await ctx.api.post(channelsPath(two!.id), { name: "Dev", slug: "dev" }, { token: owner.token });
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body.data).toMatchObject({ workspace_id: two!.id, slug: "dev" });

    // Renaming a channel's slug to one taken in its workspace is refused too.
    const other = await createChannel(owner, one!.id, { name: "Ops", slug: "ops" });
    const rename = await ctx.api.put(channelPath(one!.id, other.id), { slug: "dev" }, { token: owner.token });
    expectFieldError(rename, "slug", "The slug has already been taken.");
    expect((await channelList(owner, one!.id)).find((channel) => channel.id === other.id)?.slug).toBe("ops");
  });
});

describe("passwords of workspaces and channels", () => {
  it("refuses a password on #general, which everyone belongs to", async () => {
    const owner = await registerUser(ctx.api);
    const workspace = await createWorkspace(owner);
    const general = await generalChannel(owner, workspace.id);
    const response = await ctx.api.put(
      `/api/v1/workspaces/${workspace.id}/channels/${general.id}`,
      { password: "a-long-password" },
      { token: owner.token },
    );
    expectFieldError(response, "password", "The general channel cannot have a password.");
    expect((await generalChannel(owner, workspace.id)).has_password).toBe(false);
  });

  it("are stored hashed and never returned: records only say has_password", async () => {
    const [owner, joiner] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api)]);
    const created = await ctx.api.post(
      "/api/v1/workspaces",
      { name: "Guarded", visibility: "public", password: JOIN_PASSWORD },
      { token: owner!.token },
    );
    expect(created.status).toBe(201);
    expect(created.body.data.has_password).toBe(true);
    const workspace = created.body.data;
    const channel = await ctx.api.post(
      channelsPath(workspace.id),
      { name: "Vault", password: JOIN_PASSWORD },
      { token: owner!.token },
    );
    expect(channel.status).toBe(201);
    expect(channel.body.data.has_password).toBe(true);
    const joined = await ctx.api.post(
      `${workspacePath(workspace.id)}/join`,
      { password: JOIN_PASSWORD },
      { token: joiner!.token },
    );

    for (const body of [
      created.body,
      channel.body,
      joined.body,
      (await ctx.api.get(workspacePath(workspace.id), { token: owner!.token })).body,
      (await ctx.api.get("/api/v1/workspaces", { token: owner!.token })).body,
      (await ctx.api.get(channelsPath(workspace.id), { token: joiner!.token })).body,
    ]) {
      expectNoPassword(body);
      expect(JSON.stringify(body)).not.toContain(JOIN_PASSWORD);
    }

    const [workspaceRow] = await ctx.server.app.deps.db
      .select()
      .from(workspaces)
      .where(eq(workspaces.id, workspace.id));
    expect(workspaceRow!.passwordHash).toMatch(/^\$argon2id\$/);
    const [channelRow] = await ctx.server.app.deps.db
      .select()
      .from(channels)
      .where(eq(channels.id, channel.body.data.id));
    expect(channelRow!.passwordHash).toMatch(/^\$argon2id\$/);
  });
});

describe("channels", () => {
  it("creates a public channel by default with exactly the contract's fields; its creator is its member", async () => {
    const { owner, workspace } = await team();
    const response = await ctx.api.post(channelsPath(workspace.id), { name: "Random" }, { token: owner.token });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      data: {
        id: expect.stringMatching(/^ch_[0-9A-Z]{26}$/),
        workspace_id: workspace.id,
        name: "Random",
        slug: "random",
        visibility: "public",
        has_password: false,
        created_at: expect.stringMatching(ISO_WITH_OFFSET),
        updated_at: expect.stringMatching(ISO_WITH_OFFSET),
      },
    });
    expect(await channelMemberIds(owner, workspace.id, response.body.data.id)).toEqual([owner.id]);
  });

  it("lists public channels and the private ones the caller is in", async () => {
    const { owner, admin, member, workspace } = await team();
    const general = await generalChannel(owner, workspace.id);
    const open = await createChannel(owner, workspace.id, { name: "Open", visibility: "public" });
    const secret = await createChannel(owner, workspace.id, { name: "Secret", visibility: "private" });
    const adminsOwn = await createChannel(admin, workspace.id, { name: "Admins only", visibility: "private" });

    const ids = async (user: RegisteredUser) => {
      const response = await ctx.api.get(channelsPath(workspace.id), { token: user.token });
      expect(response.status).toBe(200);
      expect(response.body.meta).toEqual({ total: response.body.data.length });
      return response.body.data.map((channel: Channel) => channel.id).sort();
    };
    expect(await ids(owner)).toEqual([general.id, open.id, secret.id].sort());
    expect(await ids(admin)).toEqual([general.id, open.id, adminsOwn.id].sort());
    expect(await ids(member)).toEqual([general.id, open.id].sort());

    // Added to the private channel, the member sees it.
    const added = await ctx.api.post(
      channelMembersPath(workspace.id, secret.id),
      { user_id: member.id },
      { token: owner.token },
    );
    expect(added.status).toBe(201);
    expect(await ids(member)).toEqual([general.id, open.id, secret.id].sort());
    expect((await channelList(member, workspace.id)).find((channel) => channel.id === secret.id)).toEqual(secret);
  });

  it("updates name, slug, visibility and password with PUT; password null removes the password", async () => {
    const { owner, member, workspace } = await team();
    const channel = await createChannel(owner, workspace.id, { name: "Old name" });
    const path = channelPath(workspace.id, channel.id);

    const response = await ctx.api.put(
      path,
      { name: "New name", slug: "new-slug", visibility: "private", password: JOIN_PASSWORD },
      { token: owner.token },
    );
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      data: {
        ...channel,
        name: "New name",
        slug: "new-slug",
        visibility: "private",
        has_password: true,
        updated_at: expect.stringMatching(ISO_WITH_OFFSET),
      },
    });
    expectNoPassword(response.body);
    // Now private: gone from the member's list.
    expect((await channelList(member, workspace.id)).map((entry) => entry.id)).not.toContain(channel.id);
    expect((await channelList(owner, workspace.id)).find((entry) => entry.id === channel.id)).toEqual(
      response.body.data,
    );

    // Fields left out stay as they are.
    const partial = await ctx.api.put(path, { visibility: "public" }, { token: owner.token });
    expect(partial.status).toBe(200);
    expect(partial.body.data).toMatchObject({
      name: "New name",
      slug: "new-slug",
      visibility: "public",
      has_password: true,
    });

    const cleared = await ctx.api.put(path, { password: null }, { token: owner.token });
    expect(cleared.status).toBe(200);
    expect(cleared.body.data).toMatchObject({ name: "New name", has_password: false });
    // Without a password, the member joins without one.
    const joined = await ctx.api.post(`${path}/join`, {}, { token: member.token });
    expect(joined.status).toBe(200);
  });

  it("deletes a channel: 204 with an empty body, then it is 404", async () => {
    const { owner, member, workspace } = await team();
    const channel = await createChannel(owner, workspace.id, { name: "Doomed" });
    const path = channelPath(workspace.id, channel.id);
    const response = await ctx.api.delete(path, { token: owner.token });
    expect(response.status).toBe(204);
    expect(response.body).toBeUndefined();
    expect(response.headers.get("content-type")).toBeNull();

    expect((await channelList(owner, workspace.id)).map((entry) => entry.id)).not.toContain(channel.id);
    const notFound = { message: "Channel not found." };
    for (const request of [
      ctx.api.delete(path, { token: owner.token }),
      ctx.api.put(path, { name: "Back" }, { token: owner.token }),
      ctx.api.get(`${path}/members`, { token: owner.token }),
      ctx.api.post(`${path}/join`, {}, { token: member.token }),
    ]) {
      const gone = await request;
      expect(gone.status).toBe(404);
      expect(gone.body).toEqual(notFound);
    }
  });

  it("keeps #general: it cannot be deleted (422 {message}) nor made private (422 key visibility)", async () => {
    const { owner, admin, workspace } = await team();
    const general = await generalChannel(owner, workspace.id);
    for (const user of [owner, admin]) {
      const deletion = await ctx.api.delete(channelPath(workspace.id, general.id), { token: user.token });
      expect(deletion.status).toBe(422);
      expect(deletion.body).toEqual({ message: expect.any(String) });
      expectFieldError(
        await ctx.api.put(channelPath(workspace.id, general.id), { visibility: "private" }, { token: user.token }),
        "visibility",
      );
    }
    expect(await generalChannel(owner, workspace.id)).toEqual(general);
  });

  it("joins a public channel (200 with the channel), with its password when it has one", async () => {
    const { owner, member, workspace } = await team();
    const open = await createChannel(owner, workspace.id, { name: "Lounge" });
    const response = await ctx.api.post(`${channelPath(workspace.id, open.id)}/join`, {}, { token: member.token });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ data: open });
    expect(await channelMemberIds(owner, workspace.id, open.id)).toEqual([owner.id, member.id].sort((a, b) => a - b));
    // Joining again is harmless.
    expect((await ctx.api.post(`${channelPath(workspace.id, open.id)}/join`, {}, { token: member.token })).status).toBe(
      200,
    );
    expect(await channelMemberIds(owner, workspace.id, open.id)).toHaveLength(2);

    const guarded = await createChannel(owner, workspace.id, { name: "Guarded", password: JOIN_PASSWORD });
    const joinPath = `${channelPath(workspace.id, guarded.id)}/join`;
    expectFieldError(await ctx.api.post(joinPath, {}, { token: member.token }), "password");
    expectFieldError(
      await ctx.api.post(joinPath, { password: "not-the-password" }, { token: member.token }),
      "password",
    );
    expect(await channelMemberIds(owner, workspace.id, guarded.id)).toEqual([owner.id]);
    const right = await ctx.api.post(joinPath, { password: JOIN_PASSWORD }, { token: member.token });
    expect(right.status).toBe(200);
    expect(right.body.data).toMatchObject({ id: guarded.id, has_password: true });
    expectNoPassword(right.body);
    expect(await channelMemberIds(owner, workspace.id, guarded.id)).toContain(member.id);
  });

  it("hides a private channel (404) from everyone not in it: join, update, delete, members list", async () => {
    const { owner, admin, member, workspace } = await team();
    const secret = await createChannel(owner, workspace.id, { name: "Secret", visibility: "private" });
    const path = channelPath(workspace.id, secret.id);
    const notFound = { message: "Channel not found." };
    const attempts: Array<[string, () => Promise<{ status: number; body: any }>]> = [
      ["member join", () => ctx.api.post(`${path}/join`, {}, { token: member.token })],
      ["admin join", () => ctx.api.post(`${path}/join`, {}, { token: admin.token })],
      ["member members", () => ctx.api.get(`${path}/members`, { token: member.token })],
      ["admin members", () => ctx.api.get(`${path}/members`, { token: admin.token })],
      ["admin update", () => ctx.api.put(path, { name: "Exposed" }, { token: admin.token })],
      ["admin delete", () => ctx.api.delete(path, { token: admin.token })],
      ["member add", () => ctx.api.post(`${path}/members`, { user_id: member.id }, { token: member.token })],
      ["admin add", () => ctx.api.post(`${path}/members`, { user_id: admin.id }, { token: admin.token })],
    ];
    for (const [what, attempt] of attempts) {
      const response = await attempt();
      expect(response.status, what).toBe(404);
      expect(response.body, what).toEqual(notFound);
    }
    // Nothing changed.
    expect(await channelMemberIds(owner, workspace.id, secret.id)).toEqual([owner.id]);
    expect((await channelList(owner, workspace.id)).find((channel) => channel.id === secret.id)).toEqual(secret);
  });
});

describe("channel membership", () => {
  it("adds a workspace member by user id (number or numeric string): 201 with the channel member", async () => {
    const { owner, admin, member, workspace } = await team();
    const secret = await createChannel(owner, workspace.id, { name: "Secret", visibility: "private" });
    const path = channelMembersPath(workspace.id, secret.id);

    const added = await ctx.api.post(path, { user_id: member.id }, { token: owner.token });
    expect(added.status).toBe(201);
    expect(added.body).toEqual({
      data: {
        channel_id: secret.id,
        user_id: member.id,
        name: "Mia Member",
        avatar_url: null,
        joined_at: expect.stringMatching(ISO_WITH_OFFSET),
      },
    });

    // A plain member who is in the channel may add others, with the id as a string.
    const byMember = await ctx.api.post(path, { user_id: String(admin.id) }, { token: member.token });
    expect(byMember.status).toBe(201);
    expect(byMember.body.data).toMatchObject({ channel_id: secret.id, user_id: admin.id, name: "Adam Admin" });

    const list = await ctx.api.get(path, { token: member.token });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      data: expect.arrayContaining([
        {
          channel_id: secret.id,
          user_id: owner.id,
          name: "Olive Owner",
          avatar_url: null,
          joined_at: expect.stringMatching(ISO_WITH_OFFSET),
        },
      ]),
      meta: { total: 3 },
    });
    expect(await channelMemberIds(owner, workspace.id, secret.id)).toEqual(
      [owner.id, admin.id, member.id].sort((a, b) => a - b),
    );
  });

  it("lets an admin add to a public channel they are not in", async () => {
    const { owner, admin, member, workspace } = await team();
    const open = await createChannel(owner, workspace.id, { name: "Open" });
    const response = await ctx.api.post(
      channelMembersPath(workspace.id, open.id),
      { user_id: member.id },
      { token: admin.token },
    );
    expect(response.status).toBe(201);
    expect(await channelMemberIds(owner, workspace.id, open.id)).toEqual([owner.id, member.id].sort((a, b) => a - b));
  });

  it("forbids a plain member who is not in the channel to add anyone (403)", async () => {
    const { owner, admin, member, workspace } = await team();
    const open = await createChannel(owner, workspace.id, { name: "Open" });
    const response = await ctx.api.post(
      channelMembersPath(workspace.id, open.id),
      { user_id: admin.id },
      { token: member.token },
    );
    expect(response.status).toBe(403);
    expect(response.body).toEqual(UNAUTHORIZED);
    expect(await channelMemberIds(owner, workspace.id, open.id)).toEqual([owner.id]);
  });

  it("refuses to add someone who is not a member of the workspace (422 key user_id)", async () => {
    const { owner, outsider, workspace } = await team();
    const open = await createChannel(owner, workspace.id, { name: "Open" });
    const path = channelMembersPath(workspace.id, open.id);
    expectFieldError(await ctx.api.post(path, { user_id: outsider.id }, { token: owner.token }), "user_id");
    expectFieldError(await ctx.api.post(path, { user_id: 999_999_999 }, { token: owner.token }), "user_id");
    expectFieldError(await ctx.api.post(path, { user_id: "abc" }, { token: owner.token }), "user_id");
    expectFieldError(await ctx.api.post(path, {}, { token: owner.token }), "user_id");
    expect(await channelMemberIds(owner, workspace.id, open.id)).toEqual([owner.id]);
    // The outsider still cannot see the workspace.
    expect((await ctx.api.get(workspacePath(workspace.id), { token: outsider.token })).status).toBe(404);
  });

  it("removes members: owners and admins remove anyone (204), anyone may leave (204), a member may not remove others (403)", async () => {
    const { owner, admin, member, workspace } = await team();
    const open = await createChannel(owner, workspace.id, { name: "Open" });
    const path = channelMembersPath(workspace.id, open.id);
    for (const user of [admin, member]) {
      expect((await ctx.api.post(path, { user_id: user.id }, { token: owner.token })).status).toBe(201);
    }

    const forbidden = await ctx.api.delete(`${path}/${owner.id}`, { token: member.token });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body).toEqual(UNAUTHORIZED);
    expect(await channelMemberIds(owner, workspace.id, open.id)).toContain(owner.id);

    const byOwner = await ctx.api.delete(`${path}/${admin.id}`, { token: owner.token });
    expect(byOwner.status).toBe(204);
    expect(byOwner.body).toBeUndefined();
    expect(await channelMemberIds(owner, workspace.id, open.id)).not.toContain(admin.id);

    const leave = await ctx.api.delete(`${path}/${member.id}`, { token: member.token });
    expect(leave.status).toBe(204);
    expect(leave.body).toBeUndefined();
    expect(await channelMemberIds(owner, workspace.id, open.id)).toEqual([owner.id]);

    // An admin removes someone else too.
    expect((await ctx.api.post(path, { user_id: member.id }, { token: owner.token })).status).toBe(201);
    const byAdmin = await ctx.api.delete(`${path}/${member.id}`, { token: admin.token });
    expect(byAdmin.status).toBe(204);
    expect(await channelMemberIds(owner, workspace.id, open.id)).toEqual([owner.id]);
  });

  it("is 404 for workspace outsiders", async () => {
    const { owner, outsider, workspace } = await team();
    const general = await generalChannel(owner, workspace.id);
    const path = channelMembersPath(workspace.id, general.id);
    for (const request of [
      ctx.api.get(path, { token: outsider.token }),
      ctx.api.post(path, { user_id: outsider.id }, { token: outsider.token }),
      ctx.api.delete(`${path}/${owner.id}`, { token: outsider.token }),
      ctx.api.post(`${channelPath(workspace.id, general.id)}/join`, {}, { token: outsider.token }),
    ]) {
      const response = await request;
      expect(response.status).toBe(404);
      expect(response.body).toEqual(WORKSPACE_NOT_FOUND);
    }
  });
});

describe("who manages channels", () => {
  type Actor = "owner" | "admin" | "member" | "outsider";
  const expected: Record<Actor, { status: number; body?: unknown }> = {
    owner: { status: 0 },
    admin: { status: 0 },
    member: { status: 403, body: UNAUTHORIZED },
    outsider: { status: 404, body: WORKSPACE_NOT_FOUND },
  };

  it("create: owner and admin 201, member 403, outsider 404", async () => {
    const setup = await team();
    for (const actor of ["owner", "admin", "member", "outsider"] as const) {
      const response = await ctx.api.post(
        channelsPath(setup.workspace.id),
        { name: `By ${actor}` },
        { token: setup[actor].token },
      );
      if (actor === "owner" || actor === "admin") {
        expect(response.status, actor).toBe(201);
        expect(await channelMemberIds(setup[actor], setup.workspace.id, response.body.data.id)).toEqual([
          setup[actor].id,
        ]);
      } else {
        expect(response.status, actor).toBe(expected[actor].status);
        expect(response.body, actor).toEqual(expected[actor].body);
      }
    }
    const names = (await channelList(setup.owner, setup.workspace.id)).map((channel) => channel.name).sort();
    expect(names).toEqual(["By admin", "By owner", "general"]);
  });

  it("update: owner and admin 200, member 403, outsider 404", async () => {
    const setup = await team();
    const channel = await createChannel(setup.owner, setup.workspace.id, { name: "Target" });
    for (const actor of ["owner", "admin", "member", "outsider"] as const) {
      const response = await ctx.api.put(
        channelPath(setup.workspace.id, channel.id),
        { name: `Renamed by ${actor}` },
        { token: setup[actor].token },
      );
      if (actor === "owner" || actor === "admin") {
        expect(response.status, actor).toBe(200);
        expect(response.body.data.name).toBe(`Renamed by ${actor}`);
      } else {
        expect(response.status, actor).toBe(expected[actor].status);
        expect(response.body, actor).toEqual(expected[actor].body);
      }
    }
    expect((await channelList(setup.owner, setup.workspace.id)).find((entry) => entry.id === channel.id)?.name).toBe(
      "Renamed by admin",
    );
  });

  it("delete: owner and admin 204, member 403, outsider 404", async () => {
    const setup = await team();
    for (const actor of ["owner", "admin", "member", "outsider"] as const) {
      const channel = await createChannel(setup.owner, setup.workspace.id, { name: `Delete by ${actor}` });
      const response = await ctx.api.delete(channelPath(setup.workspace.id, channel.id), {
        token: setup[actor].token,
      });
      const remaining = (await channelList(setup.owner, setup.workspace.id)).map((entry) => entry.id);
      if (actor === "owner" || actor === "admin") {
        expect(response.status, actor).toBe(204);
        expect(response.body, actor).toBeUndefined();
        expect(remaining).not.toContain(channel.id);
      } else {
        expect(response.status, actor).toBe(expected[actor].status);
        expect(response.body, actor).toEqual(expected[actor].body);
        expect(remaining).toContain(channel.id);
      }
    }
  });
});

describe("a private channel seen from outside", () => {
  it("answers PUT and DELETE by a member who is not in it with 404, the body of a channel that does not exist", async () => {
    const setup = await team();
    const secret = await createChannel(setup.owner, setup.workspace.id, { name: "Secret", visibility: "private" });
    const unknown = await ctx.api.put(
      channelPath(setup.workspace.id, "ch_does_not_exist"),
      { name: "x" },
      { token: setup.member.token },
    );
    expect(unknown.status).toBe(404);
    const attempts = [
      await ctx.api.put(channelPath(setup.workspace.id, secret.id), { name: "Renamed" }, { token: setup.member.token }),
      await ctx.api.delete(channelPath(setup.workspace.id, secret.id), { token: setup.member.token }),
    ];
    for (const response of attempts) {
      expect(response.status).toBe(404);
      expect(response.body).toEqual(unknown.body);
    }
    const stillThere = (await channelList(setup.owner, setup.workspace.id)).find((entry) => entry.id === secret.id);
    expect(stillThere?.name).toBe("Secret");
  });
});

describe("events on the workspace stream", () => {
  it("publishes channel.created, channel.updated and channel.deleted", async () => {
    const { owner, workspace } = await team();
    const stream = await recordEvents(workspace.id);
    try {
      const channel = await createChannel(owner, workspace.id, { name: "Announcements" });
      const created = await stream.next("channel.created", (event) => event.data.channel?.id === channel.id);
      expect(created).toEqual({
        id: expect.stringMatching(/^\d+$/),
        type: "channel.created",
        workspace_id: workspace.id,
        created_at: expect.stringMatching(ISO_WITH_OFFSET),
        data: { channel },
      });

      const updated = await ctx.api.put(
        channelPath(workspace.id, channel.id),
        { name: "News" },
        { token: owner.token },
      );
      const updateEvent = await stream.next("channel.updated", (event) => event.data.channel?.id === channel.id);
      expect(updateEvent).toMatchObject({ type: "channel.updated", workspace_id: workspace.id });
      expect(updateEvent.data.channel).toEqual(updated.body.data);

      expect((await ctx.api.delete(channelPath(workspace.id, channel.id), { token: owner.token })).status).toBe(204);
      const deleted = await stream.next("channel.deleted");
      expect(deleted).toMatchObject({
        id: expect.stringMatching(/^\d+$/),
        type: "channel.deleted",
        workspace_id: workspace.id,
        created_at: expect.stringMatching(ISO_WITH_OFFSET),
      });
      expect(JSON.stringify(deleted.data)).toContain(channel.id);
    } finally {
      stream.unsubscribe();
    }
  });

  it("publishes member.joined when someone joins the workspace", async () => {
    const [owner, joiner] = await Promise.all([registerUser(ctx.api), registerUser(ctx.api, { name: "Newcomer" })]);
    const workspace = await createWorkspace(owner!, { visibility: "public" });
    const stream = await recordEvents(workspace.id);
    try {
      await join(joiner!, workspace.id);
      const joined = await stream.next("member.joined");
      expect(joined).toMatchObject({
        id: expect.stringMatching(/^\d+$/),
        type: "member.joined",
        workspace_id: workspace.id,
        created_at: expect.stringMatching(ISO_WITH_OFFSET),
      });
      expect(joined.data.member).toMatchObject({
        workspace_id: workspace.id,
        user_id: joiner!.id,
        name: "Newcomer",
        role: "member",
      });
      // Joining again announces nothing new.
      await join(joiner!, workspace.id);
      await join(owner!, workspace.id);
      const marker = await createChannel(owner!, workspace.id, { name: "Marker" });
      await stream.next("channel.created", (event) => event.data.channel?.id === marker.id);
      expect(
        stream.events.filter((event) => event.type === "member.joined" && event.data.member?.user_id !== undefined),
      ).toHaveLength(1);
    } finally {
      stream.unsubscribe();
    }
  });
});

describe("through the typed client", () => {
  it("creates and lists workspaces and creates channels, with typed errors", async () => {
    const [owner, member, outsider] = await Promise.all([
      registerUser(ctx.api),
      registerUser(ctx.api),
      registerUser(ctx.api),
    ]);
    const ownerClient = createChatClient({ url: ctx.server.url, token: owner!.token });
    const created = await ownerClient.workspaces.create.mutate({ name: "Typed Team", visibility: "public" });
    expect(created.data).toEqual({
      id: expect.stringMatching(/^ws_/),
      name: "Typed Team",
      slug: "typed-team",
      visibility: "public",
      has_password: false,
      owner_id: owner!.id,
      role: "owner",
      member_count: 1,
      created_at: expect.stringMatching(ISO_WITH_OFFSET),
      updated_at: expect.stringMatching(ISO_WITH_OFFSET),
    });
    // The same record over REST.
    expect((await ctx.api.get(workspacePath(created.data.id), { token: owner!.token })).body.data).toEqual(
      created.data,
    );

    const list = await ownerClient.workspaces.list.query();
    expect(list).toEqual({ data: [created.data], meta: { total: 1 } });

    const channel = await ownerClient.channels.create.mutate({
      workspace_id: created.data.id,
      name: "Typed Channel",
      visibility: "private",
    });
    expect(channel.data).toMatchObject({
      workspace_id: created.data.id,
      name: "Typed Channel",
      slug: "typed-channel",
      visibility: "private",
      has_password: false,
    });
    expect((await channelList(owner!, created.data.id)).map((entry) => entry.id)).toContain(channel.data.id);

    await join(member!, created.data.id);
    const memberClient = createChatClient({ url: ctx.server.url, token: member!.token });
    const forbidden = await memberClient.channels.create.mutate({ workspace_id: created.data.id, name: "Nope" }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(forbidden).toBeInstanceOf(TRPCClientError);
    expect((forbidden as TRPCClientError<any>).data).toMatchObject({ code: "FORBIDDEN", httpStatus: 403 });

    const outsiderClient = createChatClient({ url: ctx.server.url, token: outsider!.token });
    const notFound = await outsiderClient.channels.create.mutate({ workspace_id: created.data.id, name: "Nope" }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(notFound).toBeInstanceOf(TRPCClientError);
    expect((notFound as TRPCClientError<any>).data).toMatchObject({ code: "NOT_FOUND", httpStatus: 404 });
    expect((await outsiderClient.workspaces.list.query()).data).toEqual([]);

    const invalid = await ownerClient.workspaces.create.mutate({ name: "x".repeat(121) }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(invalid).toBeInstanceOf(TRPCClientError);
    expect((invalid as TRPCClientError<any>).data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      errors: { name: ["The name field must not be greater than 120 characters."] },
    });
  });
});
