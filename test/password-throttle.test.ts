// Password guesses are throttled like sign-in (docs/api.md, "Throttling"): a workspace's join
// password per user + workspace, a channel's per user + channel, the current password of a
// password change per user; 5 tries a minute, every try counts and a right password clears the
// count; past the limit 429 {"message":"Too Many Attempts."} with Retry-After, before the
// password is even checked.
import { describe, expect, it } from "vitest";
import { createChatClient } from "@chat-service/client";
import type { ApiResponse } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

const TOO_MANY = { message: "Too Many Attempts." };
const WRONG_JOIN_PASSWORD = {
  message: "The given data was invalid.",
  errors: { password: ["The password is incorrect."] },
};
const WRONG_CURRENT_PASSWORD = {
  message: "The given data was invalid.",
  errors: { current_password: ["The password is incorrect."] },
};

function expectThrottled(response: ApiResponse) {
  expect(response.status).toBe(429);
  expect(response.body).toEqual(TOO_MANY);
  const retryAfter = Number(response.headers.get("retry-after"));
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
}

async function publicWorkspace(owner: RegisteredUser, password: string): Promise<string> {
  const response = await ctx.api.post(
    "/api/v1/workspaces",
    { name: `Locked ${Math.random().toString(36).slice(2, 8)}`, visibility: "public", password },
    { token: owner.token },
  );
  expect(response.status).toBe(201);
  return response.body.data.id;
}

async function passwordChannel(owner: RegisteredUser, workspaceId: string, password: string): Promise<string> {
  const response = await ctx.api.post(
    `/api/v1/workspaces/${workspaceId}/channels`,
    { name: `Vault ${Math.random().toString(36).slice(2, 8)}`, password },
    { token: owner.token },
  );
  expect(response.status).toBe(201);
  return response.body.data.id;
}

const joinWorkspace = (user: RegisteredUser, workspaceId: string, password?: string) =>
  ctx.api.post(`/api/v1/workspaces/${workspaceId}/join`, password === undefined ? {} : { password }, {
    token: user.token,
  });

const joinChannel = (user: RegisteredUser, workspaceId: string, channelId: string, password?: string) =>
  ctx.api.post(
    `/api/v1/workspaces/${workspaceId}/channels/${channelId}/join`,
    password === undefined ? {} : { password },
    { token: user.token },
  );

const changePassword = (user: RegisteredUser, current: string, next = "a-brand-new-password") =>
  ctx.api.post(
    "/api/v1/auth/app/change-password",
    { current_password: current, password: next, password_confirmation: next },
    { token: user.token },
  );

async function membersOf(owner: RegisteredUser, workspaceId: string): Promise<number[]> {
  const response = await ctx.api.get(`/api/v1/workspaces/${workspaceId}/members`, { token: owner.token });
  expect(response.status).toBe(200);
  return (response.body.data as { user_id: number }[]).map((member) => member.user_id);
}

describe("POST /api/v1/workspaces/{id}/join with a password", () => {
  it("allows 5 tries a minute; the sixth, even with the right password, is 429 with Retry-After", async () => {
    const owner = await registerUser(ctx.api);
    const guesser = await registerUser(ctx.api);
    const workspaceId = await publicWorkspace(owner, "open-sesame-1");

    for (let attempt = 1; attempt <= 5; attempt++) {
      const wrong = await joinWorkspace(guesser, workspaceId, `guess-number-${attempt}`);
      expect(wrong.status).toBe(422);
      expect(wrong.body).toEqual(WRONG_JOIN_PASSWORD);
    }
    expectThrottled(await joinWorkspace(guesser, workspaceId, "open-sesame-1"));
    // A missing password counts as a try too: still throttled.
    expectThrottled(await joinWorkspace(guesser, workspaceId));
    expect(await membersOf(owner, workspaceId)).not.toContain(guesser.id);
  });

  it("counts per user and workspace: others, and the same user elsewhere, are not held up", async () => {
    const owner = await registerUser(ctx.api);
    const guesser = await registerUser(ctx.api);
    const bystander = await registerUser(ctx.api);
    const workspaceId = await publicWorkspace(owner, "open-sesame-1");
    const otherWorkspaceId = await publicWorkspace(owner, "open-sesame-2");
    for (let attempt = 1; attempt <= 6; attempt++) await joinWorkspace(guesser, workspaceId, "wrong-password");
    expectThrottled(await joinWorkspace(guesser, workspaceId, "open-sesame-1"));

    expect((await joinWorkspace(bystander, workspaceId, "open-sesame-1")).status).toBe(200);
    expect((await joinWorkspace(guesser, otherWorkspaceId, "open-sesame-2")).status).toBe(200);
    expect(await membersOf(owner, workspaceId)).toContain(bystander.id);
  });

  it("a right password clears the count", async () => {
    const owner = await registerUser(ctx.api);
    const user = await registerUser(ctx.api);
    const workspaceId = await publicWorkspace(owner, "open-sesame-1");
    for (let attempt = 1; attempt <= 4; attempt++) {
      expect((await joinWorkspace(user, workspaceId, "wrong-password")).status).toBe(422);
    }
    expect((await joinWorkspace(user, workspaceId, "open-sesame-1")).status).toBe(200);

    // Leave and come back: five fresh tries.
    const members = await ctx.api.get(`/api/v1/workspaces/${workspaceId}/members`, { token: owner.token });
    const membership = (members.body.data as { id: string; user_id: number }[]).find((m) => m.user_id === user.id)!;
    expect(
      (await ctx.api.delete(`/api/v1/workspaces/${workspaceId}/members/${membership.id}`, { token: user.token }))
        .status,
    ).toBe(204);
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect((await joinWorkspace(user, workspaceId, "wrong-password")).status).toBe(422);
    }
    expectThrottled(await joinWorkspace(user, workspaceId, "open-sesame-1"));
  });

  it("does not count joins of a workspace without a password, nor of members", async () => {
    const owner = await registerUser(ctx.api);
    const user = await registerUser(ctx.api);
    const open = await ctx.api.post(
      "/api/v1/workspaces",
      { name: "Open door", visibility: "public" },
      { token: owner.token },
    );
    for (let attempt = 1; attempt <= 7; attempt++) {
      expect((await joinWorkspace(user, open.body.data.id, "anything-at-all")).status).toBe(200);
    }
    const locked = await publicWorkspace(owner, "open-sesame-1");
    // The owner is a member: joining again answers 200 without a password check.
    for (let attempt = 1; attempt <= 7; attempt++) {
      expect((await joinWorkspace(owner, locked, "wrong-password")).status).toBe(200);
    }
  });

  it("typed RPC callers get TOO_MANY_REQUESTS with retryAfter", async () => {
    const owner = await registerUser(ctx.api);
    const guesser = await registerUser(ctx.api);
    const workspaceId = await publicWorkspace(owner, "open-sesame-1");
    const client = createChatClient({ url: ctx.server.url, token: guesser.token });
    for (let attempt = 1; attempt <= 5; attempt++) {
      const error = await rejectionOf(client.workspaces.join.mutate({ id: workspaceId, password: "wrong-password" }));
      expect(error.data?.code).toBe("UNPROCESSABLE_CONTENT");
    }
    const error = await rejectionOf(client.workspaces.join.mutate({ id: workspaceId, password: "open-sesame-1" }));
    expect(error.data?.code).toBe("TOO_MANY_REQUESTS");
    expect(error.data?.httpStatus).toBe(429);
    expect(error.data?.retryAfter).toBeGreaterThanOrEqual(1);
    expect(error.message).toBe("Too Many Attempts.");
    client.close();
  });
});

describe("POST /api/v1/workspaces/{workspace_id}/channels/{id}/join with a password", () => {
  it("allows 5 tries a minute per user and channel, then 429; a right password clears the count", async () => {
    const owner = await registerUser(ctx.api);
    const member = await registerUser(ctx.api);
    const other = await registerUser(ctx.api);
    const { workspaceId } = await createWorkspaceWithGeneral(ctx.api, owner);
    for (const user of [member, other]) {
      const invite = await ctx.api.post(`/api/v1/workspaces/${workspaceId}/invites`, {}, { token: owner.token });
      expect(
        (await ctx.api.post(`/api/v1/invites/${invite.body.data.token}/accept`, undefined, { token: user.token }))
          .status,
      ).toBe(200);
    }
    const channelId = await passwordChannel(owner, workspaceId, "channel-secret-1");
    const otherChannelId = await passwordChannel(owner, workspaceId, "channel-secret-2");

    for (let attempt = 1; attempt <= 5; attempt++) {
      const wrong = await joinChannel(member, workspaceId, channelId, "wrong-password");
      expect(wrong.status).toBe(422);
      expect(wrong.body).toEqual(WRONG_JOIN_PASSWORD);
    }
    expectThrottled(await joinChannel(member, workspaceId, channelId, "channel-secret-1"));
    // Per user and channel.
    expect((await joinChannel(member, workspaceId, otherChannelId, "channel-secret-2")).status).toBe(200);
    for (let attempt = 1; attempt <= 4; attempt++) {
      expect((await joinChannel(other, workspaceId, channelId, "wrong-password")).status).toBe(422);
    }
    expect((await joinChannel(other, workspaceId, channelId, "channel-secret-1")).status).toBe(200);

    // The right password cleared the other user's count: after leaving, five fresh tries.
    const leave = await ctx.api.delete(`/api/v1/workspaces/${workspaceId}/channels/${channelId}/members/${other.id}`, {
      token: other.token,
    });
    expect(leave.status).toBe(204);
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect((await joinChannel(other, workspaceId, channelId, "wrong-password")).status).toBe(422);
    }
    expectThrottled(await joinChannel(other, workspaceId, channelId, "channel-secret-1"));
  });
});

describe("POST /api/v1/auth/app/change-password", () => {
  it("allows 5 tries of the current password a minute per user, then 429 even with the right one", async () => {
    const user = await registerUser(ctx.api);
    const other = await registerUser(ctx.api);
    for (let attempt = 1; attempt <= 5; attempt++) {
      const wrong = await changePassword(user, `not-my-password-${attempt}`);
      expect(wrong.status).toBe(422);
      expect(wrong.body).toEqual(WRONG_CURRENT_PASSWORD);
    }
    expectThrottled(await changePassword(user, user.password));
    // Nothing changed: the old password still signs in.
    expect((await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password })).status).toBe(
      200,
    );
    // Another user is not held up.
    expect((await changePassword(other, other.password)).status).toBe(200);
  });

  it("a right current password clears the count", async () => {
    const user = await registerUser(ctx.api);
    for (let attempt = 1; attempt <= 4; attempt++) {
      expect((await changePassword(user, "not-my-password")).status).toBe(422);
    }
    expect((await changePassword(user, user.password, "second-password-1")).status).toBe(200);
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect((await changePassword(user, "not-my-password")).status).toBe(422);
    }
    expectThrottled(await changePassword(user, "second-password-1"));
  });
});
