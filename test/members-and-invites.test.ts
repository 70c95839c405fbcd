// Workspace members and invites of the API document ("Invites", "Workspaces, channels, members")
// with the contract's records, roles and invite-preview throttle, over the REST paths.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../server/app.ts";
import { loadConfig } from "../server/config.ts";
import { restClient, type ApiResponse, type RestClient } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { startTestServer, useTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$/;
const DAY_MS = 24 * 60 * 60 * 1000;
const INVALID_INVITE = { message: "This invite link is not valid." };
const TOO_MANY = { message: "Too Many Attempts." };

const MEMBER_FIELDS = [
  "avatar_url",
  "email",
  "id",
  "joined_at",
  "name",
  "preferred_language",
  "role",
  "user_id",
  "workspace_id",
].sort();
const INVITE_FIELDS = ["created_at", "created_by", "expires_at", "id", "token", "url", "workspace_id"].sort();

type Member = {
  id: string;
  workspace_id: string;
  user_id: number;
  name: string;
  email: string;
  avatar_url: string | null;
  role: string;
  preferred_language: string | null;
  joined_at: string;
};
type Invite = {
  id: string;
  workspace_id: string;
  token: string;
  url: string;
  expires_at: string | null;
  created_by: number;
  created_at: string;
};
type Workspace = { id: string; name: string; slug: string; member_count: number; role: string };
type Role = "owner" | "admin" | "member";
type WorkspaceEvent = { id: string; type: string; workspace_id: string; created_at: string; data: any };

// ---- factories (all through the public API) ----

function expectStatus(response: ApiResponse, status: number): void {
  if (response.status !== status) {
    throw new Error(`expected ${status}, got ${response.status}: ${JSON.stringify(response.body)}`);
  }
}

async function createWorkspace(
  api: RestClient,
  owner: RegisteredUser,
  body: Record<string, unknown> = {},
): Promise<Workspace> {
  const response = await api.post("/api/v1/workspaces", { name: "Team", ...body }, { token: owner.token });
  expectStatus(response, 201);
  return response.body.data;
}

async function createInvite(
  api: RestClient,
  workspaceId: string,
  token: string,
  body: Record<string, unknown> = {},
): Promise<Invite> {
  const response = await api.post(`/api/v1/workspaces/${workspaceId}/invites`, body, { token });
  expectStatus(response, 201);
  return response.body.data;
}

async function listMembers(api: RestClient, workspaceId: string, token: string): Promise<Member[]> {
  const response = await api.get(`/api/v1/workspaces/${workspaceId}/members`, { token });
  expectStatus(response, 200);
  return response.body.data;
}

async function memberOf(api: RestClient, workspaceId: string, token: string, userId: number): Promise<Member> {
  const member = (await listMembers(api, workspaceId, token)).find((entry) => entry.user_id === userId);
  if (!member) throw new Error(`user ${userId} is not a member of ${workspaceId}`);
  return member;
}

type Team = {
  workspace: Workspace;
  owner: RegisteredUser;
  ownerMember: Member;
  /** Adds a new user through an invite, with the role given (set by the owner). */
  join(role?: Role): Promise<{ user: RegisteredUser; member: Member }>;
};

async function createTeam(api: RestClient, body: Record<string, unknown> = {}): Promise<Team> {
  const owner = await registerUser(api, { name: "Olive Owner" });
  const workspace = await createWorkspace(api, owner, body);
  const invite = await createInvite(api, workspace.id, owner.token);
  const ownerMember = await memberOf(api, workspace.id, owner.token, owner.id);
  return {
    workspace,
    owner,
    ownerMember,
    async join(role: Role = "member") {
      const user = await registerUser(api, { name: `Joiner ${role}` });
      expectStatus(await api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: user.token }), 200);
      let member = await memberOf(api, workspace.id, owner.token, user.id);
      if (role !== "member") {
        const promoted = await api.put(
          `/api/v1/workspaces/${workspace.id}/members/${member.id}`,
          { role },
          { token: owner.token },
        );
        expectStatus(promoted, 200);
        member = promoted.body.data;
      }
      return { user, member };
    },
  };
}

async function channelBySlug(api: RestClient, workspaceId: string, token: string, slug: string) {
  const response = await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token });
  expectStatus(response, 200);
  return response.body.data.find((channel: { slug: string }) => channel.slug === slug) as { id: string } | undefined;
}

async function channelMemberIds(api: RestClient, workspaceId: string, channelId: string, token: string) {
  const response = await api.get(`/api/v1/workspaces/${workspaceId}/channels/${channelId}/members`, { token });
  expectStatus(response, 200);
  return response.body.data.map((entry: { user_id: number }) => entry.user_id) as number[];
}

/** Collects the events published on a workspace's stream. */
async function recordEvents(server: TestServer, workspaceId: string) {
  const events: WorkspaceEvent[] = [];
  const topic = `workspace:${workspaceId}`;
  const listener = (message: unknown) => {
    events.push((message as { event: WorkspaceEvent }).event);
  };
  await server.app.deps.events.subscribe(topic, listener);
  const unsubscribe = () => server.app.deps.events.unsubscribe(topic, listener);
  return {
    events,
    unsubscribe,
    next: (type: string, match: (data: any) => boolean) =>
      until(() => events.find((event) => event.type === type && match(event.data)), `a ${type} event`),
  };
}

function expectMemberRecord(member: Member): void {
  expect(Object.keys(member).sort()).toEqual(MEMBER_FIELDS);
  expect(member).toEqual({
    id: expect.any(String),
    workspace_id: expect.any(String),
    user_id: expect.any(Number),
    name: expect.any(String),
    email: expect.any(String),
    avatar_url: null,
    role: expect.stringMatching(/^(owner|admin|member)$/),
    preferred_language: member.preferred_language === null ? null : expect.any(String),
    joined_at: expect.stringMatching(ISO_WITH_OFFSET),
  });
}

// ---- members ----

describe("GET /api/v1/workspaces/{workspace_id}/members", () => {
  it("lists every member with exactly the contract's fields, to any member", async () => {
    const team = await createTeam(ctx.api);
    const admin = await team.join("admin");
    const plain = await team.join();
    for (const caller of [team.owner, admin.user, plain.user]) {
      const response = await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}/members`, { token: caller.token });
      expect(response.status).toBe(200);
      expect(Object.keys(response.body).sort()).toEqual(["data", "meta"]);
      expect(response.body.meta).toEqual({ total: 3 });
      expect(response.body.data).toHaveLength(3);
      for (const member of response.body.data) expectMemberRecord(member);
      const byUser = new Map<number, Member>(response.body.data.map((member: Member) => [member.user_id, member]));
      expect(byUser.get(team.owner.id)).toEqual({
        id: team.ownerMember.id,
        workspace_id: team.workspace.id,
        user_id: team.owner.id,
        name: team.owner.name,
        email: team.owner.email,
        avatar_url: null,
        role: "owner",
        preferred_language: null,
        joined_at: expect.stringMatching(ISO_WITH_OFFSET),
      });
      expect(byUser.get(admin.user.id)).toMatchObject({
        role: "admin",
        email: admin.user.email,
        preferred_language: null,
      });
      expect(byUser.get(plain.user.id)).toMatchObject({
        role: "member",
        name: plain.user.name,
        email: plain.user.email,
        preferred_language: null,
      });
    }
  });

  it("is 404 {message} for a non-member and 401 without a token", async () => {
    const team = await createTeam(ctx.api);
    const outsider = await registerUser(ctx.api);
    const response = await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}/members`, { token: outsider.token });
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ message: expect.any(String) });
    const anonymous = await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}/members`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toEqual({ message: "Unauthenticated." });
  });
});

describe("PUT /api/v1/workspaces/{workspace_id}/members/{id}", () => {
  const put = (team: Team, memberId: string, body: unknown, token: string) =>
    ctx.api.put(`/api/v1/workspaces/${team.workspace.id}/members/${memberId}`, body, { token });

  it("lets an owner promote a member to admin, an admin to owner, and demote an admin to member", async () => {
    const team = await createTeam(ctx.api);
    const { user, member } = await team.join();

    const toAdmin = await put(team, member.id, { role: "admin" }, team.owner.token);
    expect(toAdmin.status).toBe(200);
    expect(Object.keys(toAdmin.body)).toEqual(["data"]);
    expectMemberRecord(toAdmin.body.data);
    expect(toAdmin.body.data).toMatchObject({ id: member.id, user_id: user.id, role: "admin" });
    expect((await memberOf(ctx.api, team.workspace.id, user.token, user.id)).role).toBe("admin");

    const toOwner = await put(team, member.id, { role: "owner" }, team.owner.token);
    expect(toOwner.status).toBe(200);
    expect(toOwner.body.data.role).toBe("owner");
    const workspace = await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}`, { token: user.token });
    expect(workspace.body.data.role).toBe("owner");

    const other = await team.join("admin");
    const toMember = await put(team, other.member.id, { role: "member" }, team.owner.token);
    expect(toMember.status).toBe(200);
    expect(toMember.body.data).toMatchObject({ id: other.member.id, role: "member" });
    expect((await memberOf(ctx.api, team.workspace.id, team.owner.token, other.user.id)).role).toBe("member");
  });

  it("lets an admin promote a member to admin and demote an admin, but not make or change an owner (403)", async () => {
    const team = await createTeam(ctx.api);
    const admin = await team.join("admin");
    const plain = await team.join();
    const otherAdmin = await team.join("admin");

    const promoted = await put(team, plain.member.id, { role: "admin" }, admin.user.token);
    expect(promoted.status).toBe(200);
    expect(promoted.body.data.role).toBe("admin");

    const demoted = await put(team, otherAdmin.member.id, { role: "member" }, admin.user.token);
    expect(demoted.status).toBe(200);
    expect(demoted.body.data.role).toBe("member");

    const makeOwner = await put(team, otherAdmin.member.id, { role: "owner" }, admin.user.token);
    expect(makeOwner.status).toBe(403);
    expect(makeOwner.body).toEqual({ message: expect.any(String) });

    const selfOwner = await put(team, admin.member.id, { role: "owner" }, admin.user.token);
    expect(selfOwner.status).toBe(403);

    const changeOwner = await put(team, team.ownerMember.id, { role: "admin" }, admin.user.token);
    expect(changeOwner.status).toBe(403);
    expect(changeOwner.body).toEqual({ message: expect.any(String) });

    const roles = new Map((await listMembers(ctx.api, team.workspace.id, team.owner.token)).map((m) => [m.id, m.role]));
    expect(roles.get(team.ownerMember.id)).toBe("owner");
    expect(roles.get(otherAdmin.member.id)).toBe("member");
    expect(roles.get(admin.member.id)).toBe("admin");
  });

  it("refuses an admin changing an owner's membership even when the role stays owner (403)", async () => {
    const team = await createTeam(ctx.api);
    const admin = await team.join("admin");
    // Sending the owner's current role with a new language still changes an owner's member record.
    const response = await put(
      team,
      team.ownerMember.id,
      { role: "owner", preferred_language: "th" },
      admin.user.token,
    );
    expect(response.status).toBe(403);
    expect(response.body).toEqual({ message: expect.any(String) });
    expect((await memberOf(ctx.api, team.workspace.id, team.owner.token, team.owner.id)).preferred_language).toBeNull();
  });

  it("refuses a plain member any role change (403), their own included", async () => {
    const team = await createTeam(ctx.api);
    const plain = await team.join();
    const other = await team.join();
    const admin = await team.join("admin");
    for (const [memberId, role] of [
      [other.member.id, "admin"],
      [other.member.id, "member"],
      [admin.member.id, "member"],
      [team.ownerMember.id, "member"],
      [plain.member.id, "admin"],
      [plain.member.id, "owner"],
    ] as const) {
      const response = await put(team, memberId, { role, preferred_language: "id" }, plain.user.token);
      expect(response.status, `${memberId} → ${role}`).toBe(403);
      expect(response.body).toEqual({ message: expect.any(String) });
    }
    const roles = new Map((await listMembers(ctx.api, team.workspace.id, team.owner.token)).map((m) => [m.id, m.role]));
    expect(roles.get(plain.member.id)).toBe("member");
    expect(roles.get(other.member.id)).toBe("member");
    expect(roles.get(admin.member.id)).toBe("admin");
    // A refused call changes nothing, the language it carried included.
    for (const member of await listMembers(ctx.api, team.workspace.id, team.owner.token)) {
      expect(member.preferred_language).toBeNull();
    }
  });

  it("lets a plain member set their own preferred_language when sending their current role", async () => {
    const team = await createTeam(ctx.api);
    const plain = await team.join();
    const response = await put(team, plain.member.id, { role: "member", preferred_language: "ja" }, plain.user.token);
    expect(response.status).toBe(200);
    expect(response.body.data).toEqual({ ...plain.member, preferred_language: "ja" });
    expect((await memberOf(ctx.api, team.workspace.id, team.owner.token, plain.user.id)).preferred_language).toBe("ja");

    // null hands the choice back to the user's own language.
    const cleared = await put(team, plain.member.id, { role: "member", preferred_language: null }, plain.user.token);
    expect(cleared.status).toBe(200);
    expect(cleared.body.data.preferred_language).toBeNull();

    // Not someone else's, though.
    const other = await team.join();
    const foreign = await put(team, other.member.id, { role: "member", preferred_language: "th" }, plain.user.token);
    expect(foreign.status).toBe(403);
    expect((await memberOf(ctx.api, team.workspace.id, team.owner.token, other.user.id)).preferred_language).toBeNull();
  });

  it("validates role and preferred_language (422 with their keys)", async () => {
    const team = await createTeam(ctx.api);
    const plain = await team.join();
    for (const body of [{ role: "superuser" }, { role: "Owner" }, { role: "" }, { role: null }, {}]) {
      const response = await put(team, plain.member.id, body, team.owner.token);
      expect(response.status, JSON.stringify(body)).toBe(422);
      expect(response.body).toEqual({ message: "The given data was invalid.", errors: { role: [expect.any(String)] } });
    }
    for (const preferred_language of ["fr", "EN", ""]) {
      const response = await put(team, plain.member.id, { role: "member", preferred_language }, team.owner.token);
      expect(response.status, preferred_language).toBe(422);
      expect(response.body).toEqual({
        message: "The given data was invalid.",
        errors: { preferred_language: [expect.any(String)] },
      });
    }
    expect((await memberOf(ctx.api, team.workspace.id, team.owner.token, plain.user.id)).role).toBe("member");
  });

  it("never demotes the last owner (422 key role); of two owners, one can be demoted", async () => {
    const team = await createTeam(ctx.api);
    for (const role of ["admin", "member"]) {
      const response = await put(team, team.ownerMember.id, { role }, team.owner.token);
      expect(response.status).toBe(422);
      expect(response.body).toEqual({ message: "The given data was invalid.", errors: { role: [expect.any(String)] } });
    }
    expect((await memberOf(ctx.api, team.workspace.id, team.owner.token, team.owner.id)).role).toBe("owner");

    const second = await team.join("owner");
    const demoted = await put(team, team.ownerMember.id, { role: "admin" }, team.owner.token);
    expect(demoted.status).toBe(200);
    expect(demoted.body.data.role).toBe("admin");
    // Now the other one is the last owner.
    const last = await put(team, second.member.id, { role: "member" }, second.user.token);
    expect(last.status).toBe(422);
    expect(last.body.errors).toEqual({ role: [expect.any(String)] });
  });

  it("is 404 for an unknown member id", async () => {
    const team = await createTeam(ctx.api);
    const response = await put(team, "mem_00000000000000000000000000", { role: "member" }, team.owner.token);
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ message: expect.any(String) });
  });
});

describe("DELETE /api/v1/workspaces/{workspace_id}/members/{id}", () => {
  const remove = (team: Team, memberId: string, token: string) =>
    ctx.api.delete(`/api/v1/workspaces/${team.workspace.id}/members/${memberId}`, { token });

  it("lets an owner or admin remove a member: 204, the workspace is gone for them, and so is every channel membership", async () => {
    const team = await createTeam(ctx.api);
    const admin = await team.join("admin");
    const general = (await channelBySlug(ctx.api, team.workspace.id, team.owner.token, "general"))!;
    const privateChannel = await ctx.api.post(
      `/api/v1/workspaces/${team.workspace.id}/channels`,
      { name: "secret plans", visibility: "private" },
      { token: team.owner.token },
    );
    expect(privateChannel.status).toBe(201);
    const secretId: string = privateChannel.body.data.id;

    for (const remover of [team.owner, admin.user]) {
      const { user, member } = await team.join();
      const added = await ctx.api.post(
        `/api/v1/workspaces/${team.workspace.id}/channels/${secretId}/members`,
        { user_id: user.id },
        { token: team.owner.token },
      );
      expect(added.status).toBe(201);
      expect(await channelMemberIds(ctx.api, team.workspace.id, general.id, team.owner.token)).toContain(user.id);
      expect(await channelMemberIds(ctx.api, team.workspace.id, secretId, team.owner.token)).toContain(user.id);

      const response = await remove(team, member.id, remover.token);
      expect(response.status).toBe(204);
      expect(response.body).toBeUndefined();

      const workspace = await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}`, { token: user.token });
      expect(workspace.status).toBe(404);
      expect(workspace.body).toEqual({ message: expect.any(String) });
      expect((await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}/members`, { token: user.token })).status).toBe(
        404,
      );
      const mine = await ctx.api.get("/api/v1/workspaces", { token: user.token });
      expect(mine.body.data.map((entry: Workspace) => entry.id)).not.toContain(team.workspace.id);
      expect((await listMembers(ctx.api, team.workspace.id, team.owner.token)).map((m) => m.user_id)).not.toContain(
        user.id,
      );
      expect(await channelMemberIds(ctx.api, team.workspace.id, general.id, team.owner.token)).not.toContain(user.id);
      expect(await channelMemberIds(ctx.api, team.workspace.id, secretId, team.owner.token)).not.toContain(user.id);
    }
  });

  it("lets anyone leave (remove themselves)", async () => {
    const team = await createTeam(ctx.api);
    for (const role of ["member", "admin"] as const) {
      const { user, member } = await team.join(role);
      const response = await remove(team, member.id, user.token);
      expect(response.status).toBe(204);
      expect((await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}`, { token: user.token })).status).toBe(404);
    }
    // An owner too, while another owner remains.
    const coOwner = await team.join("owner");
    expect((await remove(team, coOwner.member.id, coOwner.user.token)).status).toBe(204);
    expect((await listMembers(ctx.api, team.workspace.id, team.owner.token)).map((m) => m.user_id)).toEqual([
      team.owner.id,
    ]);
  });

  it("refuses a plain member removing someone else, and an admin removing an owner (403)", async () => {
    const team = await createTeam(ctx.api);
    const plain = await team.join();
    const other = await team.join();
    const admin = await team.join("admin");
    const coOwner = await team.join("owner");
    for (const target of [other.member.id, admin.member.id, team.ownerMember.id]) {
      const response = await remove(team, target, plain.user.token);
      expect(response.status).toBe(403);
      expect(response.body).toEqual({ message: expect.any(String) });
    }
    for (const target of [team.ownerMember.id, coOwner.member.id]) {
      const response = await remove(team, target, admin.user.token);
      expect(response.status).toBe(403);
      expect(response.body).toEqual({ message: expect.any(String) });
    }
    expect(await listMembers(ctx.api, team.workspace.id, team.owner.token)).toHaveLength(5);
  });

  it("never lets the last owner leave or be removed (422 {message})", async () => {
    const team = await createTeam(ctx.api);
    const leave = await remove(team, team.ownerMember.id, team.owner.token);
    expect(leave.status).toBe(422);
    expect(leave.body).toEqual({ message: expect.any(String) });

    // With two owners, one removes the other; the one left is then the last.
    const coOwner = await team.join("owner");
    expect((await remove(team, team.ownerMember.id, coOwner.user.token)).status).toBe(204);
    const last = await remove(team, coOwner.member.id, coOwner.user.token);
    expect(last.status).toBe(422);
    expect(last.body).toEqual({ message: expect.any(String) });
    const members = await listMembers(ctx.api, team.workspace.id, coOwner.user.token);
    expect(members.map((m) => [m.user_id, m.role])).toEqual([[coOwner.user.id, "owner"]]);
  });

  it("is 404 for an unknown member id, and for a member of another workspace", async () => {
    const team = await createTeam(ctx.api);
    const unknown = await remove(team, "mem_00000000000000000000000000", team.owner.token);
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ message: expect.any(String) });
    const elsewhere = await createTeam(ctx.api);
    const foreign = await remove(team, elsewhere.ownerMember.id, team.owner.token);
    expect(foreign.status).toBe(404);
    expect(await listMembers(ctx.api, elsewhere.workspace.id, elsewhere.owner.token)).toHaveLength(1);
  });
});

// ---- who may manage members and invites ----

describe("role matrix of the member and invite management endpoints", () => {
  let team: Team;
  const callers = {} as Record<Role | "non-member", RegisteredUser>;

  beforeAll(async () => {
    team = await createTeam(ctx.api);
    callers.owner = team.owner;
    callers.admin = (await team.join("admin")).user;
    callers.member = (await team.join()).user;
    callers["non-member"] = await registerUser(ctx.api);
  });

  // Each call gets fresh targets (made by the owner) so that successful calls do not interfere.
  // `memberGets`: what a plain member gets instead of the default 403. Invites are seen by owners
  // and admins only, so to a member an invite does not exist (404), as for a non-member.
  const endpoints: {
    name: string;
    ok: number;
    memberGets?: number;
    call: (token: string) => Promise<ApiResponse>;
  }[] = [
    {
      name: "member update of someone else",
      ok: 200,
      call: async (token) => {
        const { member } = await team.join();
        return ctx.api.put(
          `/api/v1/workspaces/${team.workspace.id}/members/${member.id}`,
          { role: "admin" },
          { token },
        );
      },
    },
    {
      name: "member remove of someone else",
      ok: 204,
      call: async (token) => {
        const { member } = await team.join();
        return ctx.api.delete(`/api/v1/workspaces/${team.workspace.id}/members/${member.id}`, { token });
      },
    },
    {
      name: "invite list",
      ok: 200,
      call: (token) => ctx.api.get(`/api/v1/workspaces/${team.workspace.id}/invites`, { token }),
    },
    {
      name: "invite create",
      ok: 201,
      call: (token) => ctx.api.post(`/api/v1/workspaces/${team.workspace.id}/invites`, {}, { token }),
    },
    {
      name: "invite delete",
      ok: 204,
      memberGets: 404,
      call: async (token) => {
        const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token);
        return ctx.api.delete(`/api/v1/workspaces/${team.workspace.id}/invites/${invite.id}`, { token });
      },
    },
  ];

  const expectations: [Role | "non-member", number | "ok"][] = [
    ["owner", "ok"],
    ["admin", "ok"],
    ["member", 403],
    ["non-member", 404],
  ];

  for (const endpoint of endpoints) {
    for (const [role, roleExpectation] of expectations) {
      const expected = role === "member" && endpoint.memberGets ? endpoint.memberGets : roleExpectation;
      it(`${endpoint.name}: ${role} → ${expected === "ok" ? endpoint.ok : expected}`, async () => {
        const response = await endpoint.call(callers[role].token);
        if (expected === "ok") {
          expect(response.status).toBe(endpoint.ok);
        } else {
          expect(response.status).toBe(expected);
          expect(response.body).toEqual({ message: expect.any(String) });
        }
      });
    }
  }
});

// ---- invites ----

describe("POST /api/v1/workspaces/{workspace_id}/invites", () => {
  it("creates an invite record (201) with the public URL and a never-expiring default", async () => {
    const team = await createTeam(ctx.api);
    const response = await ctx.api.post(
      `/api/v1/workspaces/${team.workspace.id}/invites`,
      {},
      { token: team.owner.token },
    );
    expect(response.status).toBe(201);
    expect(Object.keys(response.body)).toEqual(["data"]);
    const invite: Invite = response.body.data;
    expect(Object.keys(invite).sort()).toEqual(INVITE_FIELDS);
    expect(invite).toEqual({
      id: expect.any(String),
      workspace_id: team.workspace.id,
      token: expect.stringMatching(/^[A-Za-z0-9_-]{32,}$/),
      url: `${ctx.server.config.appUrl}/invites/${invite.token}`,
      expires_at: null,
      created_by: team.owner.id,
      created_at: expect.stringMatching(ISO_WITH_OFFSET),
    });

    const withNull = await ctx.api.post(
      `/api/v1/workspaces/${team.workspace.id}/invites`,
      { expires_in_days: null },
      { token: team.owner.token },
    );
    expect(withNull.status).toBe(201);
    expect(withNull.body.data.expires_at).toBeNull();
  });

  it("makes a long random token, different each time", async () => {
    const team = await createTeam(ctx.api);
    const tokens = new Set<string>();
    for (let i = 0; i < 5; i++) tokens.add((await createInvite(ctx.api, team.workspace.id, team.owner.token)).token);
    expect(tokens.size).toBe(5);
    for (const token of tokens) expect(token.length).toBeGreaterThanOrEqual(32);
  });

  it("accepts expires_in_days from 1 to 365 and rejects 0, 366 and non-integers (422 key expires_in_days)", async () => {
    const team = await createTeam(ctx.api);
    for (const days of [1, 365]) {
      const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token, { expires_in_days: days });
      expect(invite.expires_at).toMatch(ISO_WITH_OFFSET);
      expect(Date.parse(invite.expires_at!) - Date.parse(invite.created_at)).toBe(days * DAY_MS);
    }
    // Laravel's integer: a number or its digits, nothing JavaScript's Number() would read as one.
    for (const days of [0, 366, -1, 1.5, "seven", "1e2", "0x10", true, [1], ["7"], 1e308]) {
      const response = await ctx.api.post(
        `/api/v1/workspaces/${team.workspace.id}/invites`,
        { expires_in_days: days },
        { token: team.owner.token },
      );
      expect(response.status, String(days)).toBe(422);
      expect(response.body).toEqual({
        message: "The given data was invalid.",
        errors: { expires_in_days: [expect.any(String)] },
      });
    }
    expect(
      (
        await ctx.api.post(
          `/api/v1/workspaces/${team.workspace.id}/invites`,
          { expires_in_days: 1.5 },
          { token: team.owner.token },
        )
      ).body.errors.expires_in_days,
    ).toEqual(["The expires in days field must be an integer."]);
    // Its digits as a string are the number.
    const asDigits = await createInvite(ctx.api, team.workspace.id, team.owner.token, { expires_in_days: "7" });
    expect(Date.parse(asDigits.expires_at!) - Date.parse(asDigits.created_at)).toBe(7 * DAY_MS);
    const list = await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}/invites`, { token: team.owner.token });
    // The one createTeam made, plus the three valid ones.
    expect(list.body.meta.total).toBe(4);
  });
});

describe("GET and DELETE /api/v1/workspaces/{workspace_id}/invites", () => {
  it("lists the workspace's invites as {data, meta}", async () => {
    const team = await createTeam(ctx.api);
    const made = [
      await createInvite(ctx.api, team.workspace.id, team.owner.token, { expires_in_days: 7 }),
      await createInvite(ctx.api, team.workspace.id, team.owner.token),
    ];
    const response = await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}/invites`, { token: team.owner.token });
    expect(response.status).toBe(200);
    expect(Object.keys(response.body).sort()).toEqual(["data", "meta"]);
    expect(response.body.meta).toEqual({ total: 3 });
    expect(response.body.data).toHaveLength(3);
    for (const invite of response.body.data) expect(Object.keys(invite).sort()).toEqual(INVITE_FIELDS);
    for (const invite of made) expect(response.body.data).toContainEqual(invite);
    // Another workspace's invites are not listed.
    const other = await createTeam(ctx.api);
    const otherList = await ctx.api.get(`/api/v1/workspaces/${other.workspace.id}/invites`, {
      token: other.owner.token,
    });
    expect(otherList.body.data.map((invite: Invite) => invite.id)).not.toContain(made[0]!.id);
  });

  it("deletes an invite (204): its link no longer previews or accepts; an unknown invite is 404", async () => {
    const team = await createTeam(ctx.api);
    const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token);
    const response = await ctx.api.delete(`/api/v1/workspaces/${team.workspace.id}/invites/${invite.id}`, {
      token: team.owner.token,
    });
    expect(response.status).toBe(204);
    expect(response.body).toBeUndefined();

    const preview = await ctx.api.get(`/api/v1/invites/${invite.token}`);
    expect(preview.status).toBe(404);
    expect(preview.body).toEqual(INVALID_INVITE);
    const joiner = await registerUser(ctx.api);
    const accept = await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: joiner.token });
    expect(accept.status).toBe(404);
    expect(accept.body).toEqual(INVALID_INVITE);
    const list = await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}/invites`, { token: team.owner.token });
    expect(list.body.data.map((entry: Invite) => entry.id)).not.toContain(invite.id);

    for (const id of [invite.id, "inv_00000000000000000000000000"]) {
      const again = await ctx.api.delete(`/api/v1/workspaces/${team.workspace.id}/invites/${id}`, {
        token: team.owner.token,
      });
      expect(again.status).toBe(404);
      expect(again.body).toEqual({ message: expect.any(String) });
    }
    // An invite of another workspace cannot be deleted through this one.
    const other = await createTeam(ctx.api);
    const foreign = await createInvite(ctx.api, other.workspace.id, other.owner.token);
    const cross = await ctx.api.delete(`/api/v1/workspaces/${team.workspace.id}/invites/${foreign.id}`, {
      token: team.owner.token,
    });
    expect(cross.status).toBe(404);
  });
});

// The preview is throttled per IP (30 a minute) and every test here comes from 127.0.0.1: the
// preview tests on the shared server stay well under the limit; the throttle has its own server.
describe("GET /api/v1/invites/{token} (public preview)", () => {
  it("shows the workspace, the inviter and the expiry, without a token", async () => {
    const team = await createTeam(ctx.api, { name: "Preview Club", slug: `preview-${Date.now()}` });
    await team.join();
    const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token, { expires_in_days: 3 });
    const response = await ctx.api.get(`/api/v1/invites/${invite.token}`);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      data: {
        workspace: { id: team.workspace.id, name: "Preview Club", slug: team.workspace.slug, member_count: 2 },
        inviter: { name: team.owner.name },
        expires_at: invite.expires_at,
      },
    });
    expect(response.headers.get("x-ratelimit-limit")).toBe("30");
    expect(Number(response.headers.get("x-ratelimit-remaining"))).toBeLessThan(30);

    const never = await createInvite(ctx.api, team.workspace.id, team.owner.token);
    const neverPreview = await ctx.api.get(`/api/v1/invites/${never.token}`);
    expect(neverPreview.status).toBe(200);
    expect(neverPreview.body.data.expires_at).toBeNull();
  });

  it("is 404 This invite link is not valid. for an unknown token", async () => {
    const response = await ctx.api.get("/api/v1/invites/not-a-real-invite-token");
    expect(response.status).toBe(404);
    expect(response.body).toEqual(INVALID_INVITE);
    expect(response.headers.get("x-ratelimit-limit")).toBe("30");
    expect(response.headers.get("x-ratelimit-remaining")).toMatch(/^\d+$/);
  });

  it("is 404 once the invite expired, and the invite can no longer be accepted", async () => {
    const team = await createTeam(ctx.api);
    const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token, { expires_in_days: 1 });
    expect((await ctx.api.get(`/api/v1/invites/${invite.token}`)).status).toBe(200);

    ctx.server.clock.advance(DAY_MS + 1000);

    const preview = await ctx.api.get(`/api/v1/invites/${invite.token}`);
    expect(preview.status).toBe(404);
    expect(preview.body).toEqual(INVALID_INVITE);
    const joiner = await registerUser(ctx.api);
    const accept = await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: joiner.token });
    expect(accept.status).toBe(404);
    expect(accept.body).toEqual(INVALID_INVITE);
    expect((await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}`, { token: joiner.token })).status).toBe(404);
  });
});

describe("invite preview throttle: 30 a minute per IP", () => {
  let server: TestServer;
  let api: RestClient;
  beforeAll(async () => {
    server = await startTestServer();
    api = restClient(server.url);
  });
  afterAll(() => server?.close());

  it("counts every preview (200 and 404) down in x-ratelimit-remaining, then answers 429", async () => {
    const owner = await registerUser(api);
    const workspace = await createWorkspace(api, owner);
    const invite = await createInvite(api, workspace.id, owner.token);
    for (let attempt = 1; attempt <= 30; attempt++) {
      const valid = attempt % 3 !== 0;
      const response = await api.get(`/api/v1/invites/${valid ? invite.token : `unknown-${attempt}`}`);
      expect(response.status, `preview ${attempt}`).toBe(valid ? 200 : 404);
      if (!valid) expect(response.body).toEqual(INVALID_INVITE);
      expect(response.headers.get("x-ratelimit-limit")).toBe("30");
      expect(response.headers.get("x-ratelimit-remaining"), `preview ${attempt}`).toBe(String(30 - attempt));
    }
    for (const token of [invite.token, "unknown-after-limit"]) {
      const response = await api.get(`/api/v1/invites/${token}`);
      expect(response.status).toBe(429);
      expect(response.body).toEqual(TOO_MANY);
      expect(Number(response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(Number(response.headers.get("retry-after"))).toBeLessThanOrEqual(60);
      expect(response.headers.get("x-ratelimit-limit")).toBe("30");
      expect(response.headers.get("x-ratelimit-remaining")).toBe("0");
    }
    // Accepting is not a preview: it is not throttled with it.
    const joiner = await registerUser(api);
    expect((await api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: joiner.token })).status).toBe(
      200,
    );
  });
});

describe.runIf(Boolean(process.env.REDIS_URL))("invite preview throttle shared through Redis", () => {
  let server: TestServer;
  let second: App;
  let secondDataDir: string | undefined;
  beforeAll(async () => {
    server = await startTestServer();
    // PGlite is one process per DATA_DIR: without DATABASE_URL the second app gets its own
    // database, and only the Redis prefix (the throttle's counters) is shared.
    secondDataDir = process.env.DATABASE_URL ? undefined : await mkdtemp(path.join(tmpdir(), "chat-test-second-"));
    second = await startApp(
      loadConfig({ ...server.env, PORT: "0", ...(secondDataDir && { DATA_DIR: secondDataDir }) }),
    );
  });
  afterAll(async () => {
    await second?.close();
    await server?.close();
    if (secondDataDir) await rm(secondDataDir, { recursive: true, force: true });
  });

  it("20 previews on one server and 10 on another spend the limit; the next on either is 429", async () => {
    const first = restClient(server.url);
    const other = restClient(second.url);
    const owner = await registerUser(first);
    const workspace = await createWorkspace(first, owner);
    const invite = await createInvite(first, workspace.id, owner.token);
    const sharedDatabase = Boolean(process.env.DATABASE_URL);

    for (let attempt = 1; attempt <= 30; attempt++) {
      const onFirst = attempt <= 20;
      const response = await (onFirst ? first : other).get(`/api/v1/invites/${invite.token}`);
      expect(response.status, `preview ${attempt}`).toBe(onFirst || sharedDatabase ? 200 : 404);
      expect(response.headers.get("x-ratelimit-limit")).toBe("30");
      expect(response.headers.get("x-ratelimit-remaining"), `preview ${attempt}`).toBe(String(30 - attempt));
    }
    for (const api of [first, other]) {
      const response = await api.get(`/api/v1/invites/${invite.token}`);
      expect(response.status).toBe(429);
      expect(response.body).toEqual(TOO_MANY);
      expect(response.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(response.headers.get("x-ratelimit-remaining")).toBe("0");
    }
  });
});

describe("POST /api/v1/invites/{token}/accept", () => {
  it("adds the caller as a member (200 with the workspace record, role member), into #general", async () => {
    const team = await createTeam(ctx.api, { name: "Acceptors" });
    const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token);
    const joiner = await registerUser(ctx.api, { name: "Jo Joiner" });
    const response = await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: joiner.token });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      data: {
        id: team.workspace.id,
        name: "Acceptors",
        slug: team.workspace.slug,
        visibility: "private",
        has_password: false,
        owner_id: team.owner.id,
        role: "member",
        member_count: 2,
        created_at: expect.stringMatching(ISO_WITH_OFFSET),
        updated_at: expect.stringMatching(ISO_WITH_OFFSET),
      },
    });

    const members = await listMembers(ctx.api, team.workspace.id, team.owner.token);
    expect(members.find((member) => member.user_id === joiner.id)).toMatchObject({
      name: "Jo Joiner",
      email: joiner.email,
      role: "member",
      preferred_language: null,
    });
    const general = await channelBySlug(ctx.api, team.workspace.id, joiner.token, "general");
    expect(general).toBeDefined();
    expect(await channelMemberIds(ctx.api, team.workspace.id, general!.id, joiner.token)).toContain(joiner.id);

    // Accepting again changes nothing.
    const again = await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: joiner.token });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ id: team.workspace.id, role: "member", member_count: 2 });
    const after = await listMembers(ctx.api, team.workspace.id, team.owner.token);
    expect(after).toEqual(members);
    const generalMembers = await channelMemberIds(ctx.api, team.workspace.id, general!.id, team.owner.token);
    expect(generalMembers.filter((id) => id === joiner.id)).toHaveLength(1);
    // The invite stays usable for others.
    const next = await registerUser(ctx.api);
    const third = await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: next.token });
    expect(third.body.data.member_count).toBe(3);
  });

  it("works for private and password-protected workspaces without the password", async () => {
    for (const body of [
      { visibility: "private" },
      { visibility: "public", password: "club-password" },
      { visibility: "private", password: "club-password" },
    ]) {
      const team = await createTeam(ctx.api, body);
      const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token);
      const joiner = await registerUser(ctx.api);
      const response = await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, {
        token: joiner.token,
      });
      expect(response.status, JSON.stringify(body)).toBe(200);
      expect(response.body.data).toMatchObject({
        id: team.workspace.id,
        role: "member",
        visibility: body.visibility,
        has_password: "password" in body,
      });
      const workspace = await ctx.api.get(`/api/v1/workspaces/${team.workspace.id}`, { token: joiner.token });
      expect(workspace.status).toBe(200);
      expect(workspace.body.data.role).toBe("member");
    }
  });

  it("keeps an owner's role when they accept their own workspace's invite", async () => {
    const team = await createTeam(ctx.api);
    const admin = await team.join("admin");
    const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token);
    const owner = await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: team.owner.token });
    expect(owner.status).toBe(200);
    expect(owner.body.data).toMatchObject({ role: "owner", member_count: 2 });
    const adminAccept = await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, {
      token: admin.user.token,
    });
    expect(adminAccept.body.data).toMatchObject({ role: "admin", member_count: 2 });
    expect((await listMembers(ctx.api, team.workspace.id, team.owner.token)).map((m) => m.role).sort()).toEqual([
      "admin",
      "owner",
    ]);
  });

  it("is 401 without a token, and 404 for an unknown token", async () => {
    const team = await createTeam(ctx.api);
    const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token);
    const anonymous = await ctx.api.post(`/api/v1/invites/${invite.token}/accept`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toEqual({ message: "Unauthenticated." });
    const joiner = await registerUser(ctx.api);
    const unknown = await ctx.api.post("/api/v1/invites/no-such-invite/accept", undefined, { token: joiner.token });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual(INVALID_INVITE);
    expect(await listMembers(ctx.api, team.workspace.id, team.owner.token)).toHaveLength(1);
  });
});

// ---- events ----

describe("membership events on the workspace stream", () => {
  it("publishes member.joined on accept, member.updated on a role change and member.left on removal", async () => {
    const team = await createTeam(ctx.api);
    const stream = await recordEvents(ctx.server, team.workspace.id);
    try {
      const invite = await createInvite(ctx.api, team.workspace.id, team.owner.token);
      const joiner = await registerUser(ctx.api);
      expectStatus(
        await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: joiner.token }),
        200,
      );
      const member = await memberOf(ctx.api, team.workspace.id, team.owner.token, joiner.id);

      const joined = await stream.next("member.joined", (data) => data.member?.user_id === joiner.id);
      expect(joined).toEqual({
        id: expect.any(String),
        type: "member.joined",
        workspace_id: team.workspace.id,
        created_at: expect.stringMatching(ISO_WITH_OFFSET),
        data: { member },
      });

      const promoted = await ctx.api.put(
        `/api/v1/workspaces/${team.workspace.id}/members/${member.id}`,
        { role: "admin" },
        { token: team.owner.token },
      );
      expect(promoted.status).toBe(200);
      const updated = await stream.next("member.updated", (data) => data.member?.id === member.id);
      expect(updated.workspace_id).toBe(team.workspace.id);
      expect(updated.data.member).toEqual(promoted.body.data);
      expect(updated.data.member.role).toBe("admin");

      const removed = await ctx.api.delete(`/api/v1/workspaces/${team.workspace.id}/members/${member.id}`, {
        token: team.owner.token,
      });
      expect(removed.status).toBe(204);
      const left = await stream.next("member.left", (data) => data.user_id === joiner.id && !data.channel_id);
      expect(left.workspace_id).toBe(team.workspace.id);
      expect(left.data).toMatchObject({ member_id: member.id, user_id: joiner.id });

      // Accepting again as an existing member announces nothing new.
      const before = stream.events.filter((event) => event.type === "member.joined").length;
      expectStatus(
        await ctx.api.post(`/api/v1/invites/${invite.token}/accept`, undefined, { token: team.owner.token }),
        200,
      );
      // Once the relay has published what is committed, a marker through the same bus arrives
      // after anything the accept published.
      await ctx.server.app.deps.relay.flush();
      await ctx.server.app.deps.events.publish(`workspace:${team.workspace.id}`, {
        event: { type: "test.marker", data: {} },
      });
      await stream.next("test.marker", () => true);
      expect(stream.events.filter((event) => event.type === "member.joined")).toHaveLength(before);
    } finally {
      stream.unsubscribe();
    }
  });
});
