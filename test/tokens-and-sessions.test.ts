// Personal access tokens, token abilities and the web cookie session, over the REST paths.
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accessTokens } from "../db/schema/index.ts";
import type { BusMessage } from "../server/events/bus.ts";
import { SIGN_IN_MEMORY_MS } from "../server/services/accounts/credential-watch.ts";
import { restClient, type ApiResponse, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { startTestServer, useTestServer, type TestServer } from "./helpers/server.ts";

const ctx = useTestServer();

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$/;
const UNAUTHENTICATED = { message: "Unauthenticated." };
const lacks = (ability: string) => ({ message: `This token does not have the "${ability}" ability.` });

type TokenRecord = { id: string; name: string; abilities: string[]; last_used_at: string | null; created_at: string };

const tokenRecord = (name: string, abilities: string[]) => ({
  id: expect.any(String),
  name,
  abilities,
  last_used_at: null,
  created_at: expect.stringMatching(ISO_WITH_OFFSET),
});

function createToken(token: string, body: unknown) {
  return ctx.api.post("/api/v1/tokens", body, { token });
}

/** A personal access token of the user, made with the user's sign-in token ("*"). */
async function personalToken(
  user: RegisteredUser,
  abilities: string[],
  name = "script",
): Promise<{ id: string; token: string }> {
  const response = await createToken(user.token, { name, abilities });
  if (response.status !== 201)
    throw new Error(`token create failed: ${response.status} ${JSON.stringify(response.body)}`);
  return { id: response.body.data.id, token: response.body.access_token };
}

async function listTokens(token: string, client: RestClient = ctx.api): Promise<TokenRecord[]> {
  const response = await client.get("/api/v1/tokens", { token });
  expect(response.status).toBe(200);
  return response.body.data;
}

// ---- cookies -------------------------------------------------------------------------------

type SetCookie = { name: string; value: string; attributes: Map<string, string | true> };

/** One Set-Cookie header: name, value and its attributes (keys lower-cased). */
function parseSetCookie(header: string): SetCookie {
  const [pair = "", ...attributes] = header.split(";").map((part) => part.trim());
  const separator = pair.indexOf("=");
  return {
    name: pair.slice(0, separator),
    value: pair.slice(separator + 1),
    attributes: new Map(
      attributes.map((attribute): [string, string | true] => {
        const at = attribute.indexOf("=");
        return at === -1
          ? [attribute.toLowerCase(), true]
          : [attribute.slice(0, at).toLowerCase(), attribute.slice(at + 1)];
      }),
    ),
  };
}

function sessionCookieOf(response: ApiResponse): SetCookie | undefined {
  return response.headers
    .getSetCookie()
    .map(parseSetCookie)
    .find((cookie) => cookie.name === "chat_session");
}

/** Signs in on the web door; returns the Cookie header value a browser would send back. */
async function webLogin(client: RestClient, user: RegisteredUser): Promise<{ cookie: string; response: ApiResponse }> {
  const response = await client.post("/api/v1/auth/web/login", { email: user.email, password: user.password });
  const session = sessionCookieOf(response);
  if (response.status !== 200 || !session)
    throw new Error(`web login failed: ${response.status} ${JSON.stringify(response.body)}`);
  return { cookie: `chat_session=${session.value}`, response };
}

const trustedOrigin = (target: TestServer) => new URL(target.config.appUrl).origin;

// ---- personal access tokens ----------------------------------------------------------------

describe("GET /api/v1/tokens", () => {
  it("lists the caller's sign-in tokens and personal access tokens with the record shape", async () => {
    const user = await registerUser(ctx.api, { device_name: "Pixel 8" });
    const login = await ctx.api.post("/api/v1/auth/app/login", {
      email: user.email,
      password: user.password,
      device_name: "iPad",
    });
    expect(login.status).toBe(200);
    const pat = await personalToken(user, ["read"], "CI bot");

    const response = await ctx.api.get("/api/v1/tokens", { token: user.token });
    expect(response.status).toBe(200);
    expect(Object.keys(response.body).sort()).toEqual(["data", "meta"]);
    expect(response.body.meta).toEqual({ total: 3 });
    expect(response.body.data).toHaveLength(3);
    for (const record of response.body.data) {
      expect(Object.keys(record).sort()).toEqual(["abilities", "created_at", "id", "last_used_at", "name"]);
      expect(record.id).toEqual(expect.any(String));
      expect(record.created_at).toMatch(ISO_WITH_OFFSET);
    }
    const byName = new Map<string, TokenRecord>(response.body.data.map((record: TokenRecord) => [record.name, record]));
    expect([...byName.keys()].sort()).toEqual(["CI bot", "Pixel 8", "iPad"]);
    expect(byName.get("Pixel 8")!.abilities).toEqual(["*"]);
    expect(byName.get("iPad")!.abilities).toEqual(["*"]);
    expect(byName.get("CI bot")).toEqual({ ...tokenRecord("CI bot", ["read"]), id: pat.id });
    // The token used for this call has just been used.
    expect(byName.get("Pixel 8")!.last_used_at).toMatch(ISO_WITH_OFFSET);
    // No plaintext or hash leaks into the list.
    expect(JSON.stringify(response.body)).not.toContain(user.token);
    expect(JSON.stringify(response.body)).not.toContain(pat.token);
  });

  it("shows only the caller's own tokens", async () => {
    const ann = await registerUser(ctx.api);
    const bob = await registerUser(ctx.api);
    const annPat = await personalToken(ann, ["read"]);
    const bobPat = await personalToken(bob, ["read"]);
    const annIds = (await listTokens(ann.token)).map((record) => record.id);
    const bobIds = (await listTokens(bob.token)).map((record) => record.id);
    expect(annIds).toContain(annPat.id);
    expect(annIds).not.toContain(bobPat.id);
    expect(bobIds).toContain(bobPat.id);
    expect(bobIds).not.toContain(annPat.id);
    expect(annIds.filter((id) => bobIds.includes(id))).toEqual([]);
  });

  it("answers 401 without a token", async () => {
    const response = await ctx.api.get("/api/v1/tokens");
    expect(response.status).toBe(401);
    expect(response.body).toEqual(UNAUTHENTICATED);
  });
});

describe("POST /api/v1/tokens", () => {
  it("returns 201 with the record, the plaintext once and the Bearer type; the new token works", async () => {
    const user = await registerUser(ctx.api);
    const response = await createToken(user.token, { name: "Deploy script", abilities: ["read", "write"] });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      data: tokenRecord("Deploy script", ["read", "write"]),
      access_token: expect.stringMatching(/^chat_[A-Za-z0-9_-]{40,}$/),
      token_type: "Bearer",
    });
    expect(response.body.access_token).not.toBe(user.token);

    const me = await ctx.api.get("/api/v1/me", { token: response.body.access_token });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: user.id, email: user.email });
    const listed = (await listTokens(user.token)).find((record) => record.id === response.body.data.id);
    expect(listed).toMatchObject({ name: "Deploy script", abilities: ["read", "write"] });
  });

  it("accepts a 255-character name and rejects 256 with key name", async () => {
    const user = await registerUser(ctx.api);
    const ok = await createToken(user.token, { name: "n".repeat(255), abilities: ["read"] });
    expect(ok.status).toBe(201);
    expect(ok.body.data.name).toBe("n".repeat(255));
    const tooLong = await createToken(user.token, { name: "n".repeat(256), abilities: ["read"] });
    expect(tooLong.status).toBe(422);
    expect(tooLong.body).toEqual({
      message: "The given data was invalid.",
      errors: { name: ["The name field must not be greater than 255 characters."] },
    });
  });

  it("requires name and abilities", async () => {
    const user = await registerUser(ctx.api);
    const empty = await createToken(user.token, {});
    expect(empty.status).toBe(422);
    expect(empty.body.message).toBe("The given data was invalid.");
    expect(Object.keys(empty.body.errors).sort()).toEqual(["abilities", "name"]);
    expect(empty.body.errors.name).toEqual(["The name field is required."]);
    expect(empty.body.errors.abilities).toEqual(["The abilities field is required."]);

    const blankName = await createToken(user.token, { name: "", abilities: ["read"] });
    expect(blankName.status).toBe(422);
    expect(blankName.body.errors).toEqual({ name: ["The name field is required."] });

    const noAbilities = await createToken(user.token, { name: "nothing", abilities: [] });
    expect(noAbilities.status).toBe(422);
    expect(Object.keys(noAbilities.body.errors)).toEqual(["abilities"]);

    // Nothing was created by the refused calls.
    expect((await listTokens(user.token)).map((record) => record.name)).toEqual(["sign-in"]);
  });

  it("treats a name of only spaces as missing", async () => {
    // Laravel trims input before "required"; the token would otherwise be listed without a name.
    const user = await registerUser(ctx.api);
    const spaces = await createToken(user.token, { name: "   ", abilities: ["read"] });
    expect(spaces.status).toBe(422);
    expect(spaces.body).toEqual({
      message: "The given data was invalid.",
      errors: { name: ["The name field is required."] },
    });
    expect((await listTokens(user.token)).map((record) => record.name)).toEqual(["sign-in"]);
  });

  it("trims the name", async () => {
    const user = await registerUser(ctx.api);
    const response = await createToken(user.token, { name: "  Padded  ", abilities: ["read"] });
    expect(response.status).toBe(201);
    expect(response.body.data.name).toBe("Padded");
  });

  it("rejects an unknown ability under its dotted key", async () => {
    const user = await registerUser(ctx.api);
    const first = await createToken(user.token, { name: "bad", abilities: ["admin"] });
    expect(first.status).toBe(422);
    expect(first.body).toEqual({
      message: "The given data was invalid.",
      errors: { "abilities.0": [expect.any(String)] },
    });
    const second = await createToken(user.token, { name: "bad", abilities: ["read", "delete-everything"] });
    expect(second.status).toBe(422);
    expect(Object.keys(second.body.errors)).toEqual(["abilities.1"]);
    expect((await listTokens(user.token)).map((record) => record.name)).not.toContain("bad");
  });

  it("accepts every documented ability", async () => {
    const user = await registerUser(ctx.api);
    for (const ability of ["*", "read", "write", "automation", "temporary-rooms:extend"]) {
      const response = await createToken(user.token, { name: ability, abilities: [ability] });
      expect(response.status).toBe(201);
      expect(response.body.data.abilities).toEqual([ability]);
    }
  });

  it("lets only a full (*) token create tokens: a read+write token gets 403", async () => {
    const user = await registerUser(ctx.api);
    const readWrite = await personalToken(user, ["read", "write"]);
    const refused = await createToken(readWrite.token, { name: "escalated", abilities: ["*"] });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual(lacks("*"));
    const modest = await createToken(readWrite.token, { name: "modest", abilities: ["read"] });
    expect(modest.status).toBe(403);
    expect((await listTokens(user.token)).map((record) => record.name).sort()).toEqual(["script", "sign-in"]);

    // A personal token carrying "*" may.
    const full = await personalToken(user, ["*"], "full");
    expect((await createToken(full.token, { name: "child", abilities: ["read"] })).status).toBe(201);
  });

  it("answers 401 without a token", async () => {
    const response = await ctx.api.post("/api/v1/tokens", { name: "x", abilities: ["read"] });
    expect(response.status).toBe(401);
    expect(response.body).toEqual(UNAUTHENTICATED);
  });
});

describe("DELETE /api/v1/tokens/{id}", () => {
  it("revokes the token: 204 with an empty body, then 401 with it and gone from the list", async () => {
    const user = await registerUser(ctx.api);
    const pat = await personalToken(user, ["read"]);
    expect((await ctx.api.get("/api/v1/me", { token: pat.token })).status).toBe(200);

    const response = await ctx.api.delete(`/api/v1/tokens/${pat.id}`, { token: user.token });
    expect(response.status).toBe(204);
    expect(response.body).toBeUndefined();

    const after = await ctx.api.get("/api/v1/me", { token: pat.token });
    expect(after.status).toBe(401);
    expect(after.body).toEqual(UNAUTHENTICATED);
    expect((await listTokens(user.token)).map((record) => record.id)).not.toContain(pat.id);
    // The token used for the call is untouched.
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(200);
  });

  it("answers 404 the second time", async () => {
    const user = await registerUser(ctx.api);
    const pat = await personalToken(user, ["read"]);
    expect((await ctx.api.delete(`/api/v1/tokens/${pat.id}`, { token: user.token })).status).toBe(204);
    const again = await ctx.api.delete(`/api/v1/tokens/${pat.id}`, { token: user.token });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ message: expect.any(String) });
  });

  it("answers 404 for another user's token and leaves it working", async () => {
    const owner = await registerUser(ctx.api);
    const stranger = await registerUser(ctx.api);
    const pat = await personalToken(owner, ["read"]);
    const response = await ctx.api.delete(`/api/v1/tokens/${pat.id}`, { token: stranger.token });
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ message: expect.any(String) });
    expect((await ctx.api.get("/api/v1/me", { token: pat.token })).status).toBe(200);
    expect((await listTokens(owner.token)).map((record) => record.id)).toContain(pat.id);
  });

  it("answers 404 for an id that never existed", async () => {
    const user = await registerUser(ctx.api);
    const response = await ctx.api.delete("/api/v1/tokens/does-not-exist", { token: user.token });
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ message: expect.any(String) });
  });
});

// ---- abilities -----------------------------------------------------------------------------

describe("token abilities", () => {
  it("a read token can GET /me but not PATCH it", async () => {
    const user = await registerUser(ctx.api, { name: "Reader" });
    const read = await personalToken(user, ["read"]);
    const me = await ctx.api.get("/api/v1/me", { token: read.token });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: user.id, name: "Reader" });

    const patch = await ctx.api.patch("/api/v1/me", { name: "Changed" }, { token: read.token });
    expect(patch.status).toBe(403);
    expect(patch.body).toEqual(lacks("write"));
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.name).toBe("Reader");
  });

  it("a write token cannot GET /me but can PATCH it", async () => {
    const user = await registerUser(ctx.api, { name: "Writer" });
    const write = await personalToken(user, ["write"]);
    const me = await ctx.api.get("/api/v1/me", { token: write.token });
    expect(me.status).toBe(403);
    expect(me.body).toEqual(lacks("read"));

    const patch = await ctx.api.patch("/api/v1/me", { name: "Written" }, { token: write.token });
    expect(patch.status).toBe(200);
    expect(patch.body).toMatchObject({ id: user.id, name: "Written" });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.name).toBe("Written");
  });

  it("a token without read (automation only) cannot list tokens", async () => {
    const user = await registerUser(ctx.api);
    const automation = await personalToken(user, ["automation"]);
    const response = await ctx.api.get("/api/v1/tokens", { token: automation.token });
    expect(response.status).toBe(403);
    expect(response.body).toEqual(lacks("read"));
  });

  it("any token can log out, even a read-only one, and only that token is revoked", async () => {
    const user = await registerUser(ctx.api);
    const read = await personalToken(user, ["read"]);
    const response = await ctx.api.post("/api/v1/auth/app/logout", undefined, { token: read.token });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: "Logged out." });
    expect((await ctx.api.get("/api/v1/me", { token: read.token })).status).toBe(401);
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(200);
    expect((await listTokens(user.token)).map((record) => record.id)).not.toContain(read.id);
  });

  it("sets last_used_at once the token has been used", async () => {
    const user = await registerUser(ctx.api);
    const created = await createToken(user.token, { name: "fresh", abilities: ["read"] });
    expect(created.body.data.last_used_at).toBeNull();
    const find = async () => (await listTokens(user.token)).find((record) => record.id === created.body.data.id)!;
    expect((await find()).last_used_at).toBeNull();

    expect((await ctx.api.get("/api/v1/me", { token: created.body.access_token })).status).toBe(200);
    const used = await find();
    expect(used.last_used_at).toMatch(ISO_WITH_OFFSET);
    expect(Date.parse(used.last_used_at!)).toBeGreaterThanOrEqual(Date.parse(used.created_at));
  });
});

// ---- web cookie session --------------------------------------------------------------------

// A request's sign-in is served from memory for a few seconds (docs/api.md): what
// changes the user or ends a token is seen by the very next request.
describe("sign-ins served from memory", () => {
  /**
   * Runs `steps` while the relay's publishes are held back (released after): the writing
   * process must forget at its own commit, not when the event comes back over the bus.
   */
  async function withPublishesHeld(steps: () => Promise<void>): Promise<void> {
    const bus = ctx.server.app.deps.events;
    const publishAll = bus.publishAll.bind(bus);
    const held: BusMessage[] = [];
    bus.publishAll = async (messages) => {
      held.push(...messages);
      return messages.map(() => ({ status: "fulfilled", value: undefined }));
    };
    try {
      await steps();
    } finally {
      bus.publishAll = publishAll;
      await publishAll(held);
    }
  }

  it("a rename shows at once in GET /me and in the next post's author", async () => {
    const user = await registerUser(ctx.api, { name: "Before" });
    const { workspaceId, channelId } = await createWorkspaceWithGeneral(ctx.api, user);
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.name).toBe("Before");

    await withPublishesHeld(async () => {
      expect((await ctx.api.patch("/api/v1/me", { name: "After" }, { token: user.token })).status).toBe(200);
      expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.name).toBe("After");
      const posted = await ctx.api.post(
        `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`,
        { content: "renamed" },
        { token: user.token },
      );
      expect(posted.status).toBe(201);
      expect(posted.body.data.author).toMatchObject({ type: "user", id: user.id, name: "After" });
    });
  });

  it("after a password change the old password no longer changes it, with the token that changed it", async () => {
    const user = await registerUser(ctx.api);
    const change = (current: string, next: string) =>
      ctx.api.post(
        "/api/v1/auth/app/change-password",
        { current_password: current, password: next, password_confirmation: next },
        { token: user.token },
      );
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(200);
    await withPublishesHeld(async () => {
      expect((await change(user.password, "second-password-1")).status).toBe(200);
      const again = await change(user.password, "third-password-1");
      expect(again.status).toBe(422);
      expect(again.body.errors).toHaveProperty("current_password");
    });
    expect((await change("second-password-1", "third-password-1")).status).toBe(200);
  });

  it("a logout refuses the token on the very next request", async () => {
    const user = await registerUser(ctx.api);
    const phone = (await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password })).body
      .access_token as string;
    expect((await ctx.api.get("/api/v1/me", { token: phone })).status).toBe(200);
    await withPublishesHeld(async () => {
      expect((await ctx.api.post("/api/v1/auth/app/logout", undefined, { token: phone })).status).toBe(200);
      const after = await ctx.api.get("/api/v1/me", { token: phone });
      expect(after.status).toBe(401);
      expect(after.body).toEqual(UNAUTHENTICATED);
    });
  });

  it("a token removed behind the service's back (no event) is refused once SIGN_IN_MEMORY_MS has passed", async () => {
    const user = await registerUser(ctx.api);
    const pat = await personalToken(user, ["read"]);
    expect((await ctx.api.get("/api/v1/me", { token: pat.token })).status).toBe(200);
    await ctx.server.app.deps.db.delete(accessTokens).where(eq(accessTokens.id, pat.id));
    ctx.server.clock.advance(SIGN_IN_MEMORY_MS);
    const after = await ctx.api.get("/api/v1/me", { token: pat.token });
    expect(after.status).toBe(401);
    expect(after.body).toEqual(UNAUTHENTICATED);
  });
});

describe("web cookie session", () => {
  it("signs in with a HttpOnly, SameSite=Lax session cookie (no Secure on http) and returns {data: user}", async () => {
    const user = await registerUser(ctx.api, { name: "Web Ann" });
    const response = await ctx.api.post("/api/v1/auth/web/login", { email: user.email, password: user.password });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      data: {
        id: user.id,
        name: "Web Ann",
        email: user.email,
        email_verified_at: null,
        is_active: true,
        last_login_at: expect.stringMatching(ISO_WITH_OFFSET),
        created_at: expect.stringMatching(ISO_WITH_OFFSET),
        updated_at: expect.stringMatching(ISO_WITH_OFFSET),
        preferred_language: "en",
        avatar_url: null,
      },
    });
    const cookie = sessionCookieOf(response);
    expect(cookie).toBeDefined();
    expect(cookie!.value).not.toBe("");
    expect(cookie!.attributes.get("path")).toBe("/");
    expect(cookie!.attributes.get("httponly")).toBe(true);
    expect(cookie!.attributes.get("samesite")).toBe("Lax");
    expect(Number(cookie!.attributes.get("max-age"))).toBeGreaterThan(0);
    expect(cookie!.attributes.has("secure")).toBe(false);
    // The session is a token of the user: it shows in the list with full abilities.
    const sessions = (await listTokens(user.token)).filter((record) => record.name === "web session");
    expect(sessions).toEqual([expect.objectContaining({ abilities: ["*"] })]);
  });

  it("authenticates GET /me with only the Cookie header", async () => {
    const user = await registerUser(ctx.api);
    const { cookie } = await webLogin(ctx.api, user);
    const me = await ctx.api.get("/api/v1/me", { headers: { Cookie: cookie } });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: user.id, email: user.email });
    // A made-up cookie is not a session.
    const forged = await ctx.api.get("/api/v1/me", { headers: { Cookie: "chat_session=chat_forged-value" } });
    expect(forged.status).toBe(401);
    expect(forged.body).toEqual(UNAUTHENTICATED);
  });

  it("finds the session cookie among the browser's other cookies", async () => {
    const user = await registerUser(ctx.api);
    const { cookie } = await webLogin(ctx.api, user);
    const me = await ctx.api.get("/api/v1/me", { headers: { Cookie: `theme=dark; ${cookie}; _ga=GA1.1.123` } });
    expect(me.status).toBe(200);
    expect(me.body.id).toBe(user.id);
  });

  it("answers 401, not a server error, to a garbled session cookie, and lets that browser sign in again", async () => {
    for (const value of ["%E0%A4%A", "%", "chat_%ZZ"]) {
      const response = await ctx.api.get("/api/v1/me", { headers: { Cookie: `chat_session=${value}` } });
      expect(response.status).toBe(401);
      expect(response.body).toEqual(UNAUTHENTICATED);
    }
    const user = await registerUser(ctx.api);
    const login = await ctx.api.post(
      "/api/v1/auth/web/login",
      { email: user.email, password: user.password },
      { headers: { Cookie: "chat_session=%E0%A4%A" } },
    );
    expect(login.status).toBe(200);
    expect(sessionCookieOf(login)).toBeDefined();
  });

  it("lets the user end a browser session from the token list", async () => {
    const user = await registerUser(ctx.api);
    const { cookie } = await webLogin(ctx.api, user);
    const session = (await listTokens(user.token)).find((record) => record.name === "web session")!;
    expect((await ctx.api.delete(`/api/v1/tokens/${session.id}`, { token: user.token })).status).toBe(204);
    const after = await ctx.api.get("/api/v1/me", { headers: { Cookie: cookie } });
    expect(after.status).toBe(401);
    expect(after.body).toEqual(UNAUTHENTICATED);
  });

  it("refuses a wrong password with 422 key email and sets no cookie", async () => {
    const user = await registerUser(ctx.api);
    const response = await ctx.api.post("/api/v1/auth/web/login", { email: user.email, password: "wrong-password" });
    expect(response.status).toBe(422);
    expect(response.body).toEqual({
      message: "The given data was invalid.",
      errors: { email: ["These credentials do not match our records."] },
    });
    expect(sessionCookieOf(response)).toBeUndefined();
  });

  it("refuses a cookie-authenticated write without an Origin or from an untrusted one, accepts the app's own", async () => {
    const user = await registerUser(ctx.api, { name: "Before" });
    const { cookie } = await webLogin(ctx.api, user);

    const noOrigin = await ctx.api.patch("/api/v1/me", { name: "No Origin" }, { headers: { Cookie: cookie } });
    expect(noOrigin.status).toBe(403);
    expect(noOrigin.body).toEqual({ message: expect.any(String) });

    const evil = await ctx.api.patch(
      "/api/v1/me",
      { name: "Evil" },
      { headers: { Cookie: cookie, Origin: "http://evil.example" } },
    );
    expect(evil.status).toBe(403);
    expect(evil.body).toEqual({ message: expect.any(String) });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.name).toBe("Before");

    const trusted = await ctx.api.patch(
      "/api/v1/me",
      { name: "After" },
      { headers: { Cookie: cookie, Origin: trustedOrigin(ctx.server) } },
    );
    expect(trusted.status).toBe(200);
    expect(trusted.body).toMatchObject({ id: user.id, name: "After" });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.name).toBe("After");
  });

  it("does not apply the Origin check to bearer-token writes", async () => {
    const user = await registerUser(ctx.api);
    const noOrigin = await ctx.api.patch("/api/v1/me", { name: "Bearer Write" }, { token: user.token });
    expect(noOrigin.status).toBe(200);
    expect(noOrigin.body.name).toBe("Bearer Write");
    const otherOrigin = await ctx.api.patch(
      "/api/v1/me",
      { name: "Bearer Elsewhere" },
      { token: user.token, headers: { Origin: "http://evil.example" } },
    );
    expect(otherOrigin.status).toBe(200);
  });

  it("logs out: clears the cookie and the old cookie no longer authenticates", async () => {
    const user = await registerUser(ctx.api);
    const { cookie } = await webLogin(ctx.api, user);

    // A cross-site page cannot log the user out either.
    const crossSite = await ctx.api.post("/api/v1/auth/web/logout", undefined, {
      headers: { Cookie: cookie, Origin: "http://evil.example" },
    });
    expect(crossSite.status).toBe(403);
    expect((await ctx.api.get("/api/v1/me", { headers: { Cookie: cookie } })).status).toBe(200);

    const response = await ctx.api.post("/api/v1/auth/web/logout", undefined, {
      headers: { Cookie: cookie, Origin: trustedOrigin(ctx.server) },
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: "Logged out." });
    const cleared = sessionCookieOf(response);
    expect(cleared).toBeDefined();
    expect(cleared!.value).toBe("");
    expect(cleared!.attributes.get("max-age")).toBe("0");
    expect(cleared!.attributes.get("path")).toBe("/");

    const after = await ctx.api.get("/api/v1/me", { headers: { Cookie: cookie } });
    expect(after.status).toBe(401);
    expect(after.body).toEqual(UNAUTHENTICATED);
    // Only the session went: the app's bearer token still works.
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(200);
  });
});

describe("web cookie session behind https", () => {
  let secure: TestServer;
  let secureApi: RestClient;
  beforeAll(async () => {
    secure = await startTestServer({ APP_URL: "https://chat.example.test" });
    secureApi = restClient(secure.url);
  });
  afterAll(() => secure?.close());

  it("marks the session cookie and its clearing Secure when APP_URL is https", async () => {
    const user = await registerUser(secureApi);
    const { cookie, response } = await webLogin(secureApi, user);
    const session = sessionCookieOf(response)!;
    expect(session.attributes.get("secure")).toBe(true);
    expect(session.attributes.get("httponly")).toBe(true);
    expect(session.attributes.get("samesite")).toBe("Lax");

    const logout = await secureApi.post("/api/v1/auth/web/logout", undefined, {
      headers: { Cookie: cookie, Origin: "https://chat.example.test" },
    });
    expect(logout.status).toBe(200);
    expect(sessionCookieOf(logout)!.attributes.get("secure")).toBe(true);
  });

  it("ends the session when its Max-Age has passed; bearer tokens do not expire", async () => {
    const user = await registerUser(secureApi);
    const { cookie, response } = await webLogin(secureApi, user);
    const maxAgeSeconds = Number(sessionCookieOf(response)!.attributes.get("max-age"));
    expect(maxAgeSeconds).toBeGreaterThan(120);

    secure.clock.advance((maxAgeSeconds - 60) * 1000);
    expect((await secureApi.get("/api/v1/me", { headers: { Cookie: cookie } })).status).toBe(200);
    secure.clock.advance(120 * 1000);
    const expired = await secureApi.get("/api/v1/me", { headers: { Cookie: cookie } });
    expect(expired.status).toBe(401);
    expect(expired.body).toEqual(UNAUTHENTICATED);
    expect((await listTokens(user.token, secureApi)).map((record) => record.name)).not.toContain("web session");
    expect((await secureApi.get("/api/v1/me", { token: user.token })).status).toBe(200);
  });
});

describe("FRONTEND_URL as a trusted origin", () => {
  const FRONTEND = "http://app.example.test";
  let withFrontend: TestServer;
  let frontendApi: RestClient;
  beforeAll(async () => {
    withFrontend = await startTestServer({ FRONTEND_URL: FRONTEND });
    frontendApi = restClient(withFrontend.url);
  });
  afterAll(() => withFrontend?.close());

  it("accepts a cookie-authenticated write from the frontend's origin", async () => {
    const user = await registerUser(frontendApi);
    const { cookie } = await webLogin(frontendApi, user);
    const response = await frontendApi.patch(
      "/api/v1/me",
      { name: "From Frontend" },
      { headers: { Cookie: cookie, Origin: FRONTEND } },
    );
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ id: user.id, name: "From Frontend" });
    // The app's own origin stays trusted too; a third one does not.
    const own = await frontendApi.patch(
      "/api/v1/me",
      { name: "From App" },
      { headers: { Cookie: cookie, Origin: trustedOrigin(withFrontend) } },
    );
    expect(own.status).toBe(200);
    const other = await frontendApi.patch(
      "/api/v1/me",
      { name: "Other" },
      { headers: { Cookie: cookie, Origin: "http://evil.example" } },
    );
    expect(other.status).toBe(403);
  });

  it("answers the frontend's CORS preflight with 204 and credentials allowed", async () => {
    const response = await frontendApi.call("OPTIONS", "/api/v1/me", {
      headers: {
        Origin: FRONTEND,
        "Access-Control-Request-Method": "PATCH",
        "Access-Control-Request-Headers": "content-type",
      },
    });
    expect(response.status).toBe(204);
    expect(response.body).toBeUndefined();
    expect(response.headers.get("access-control-allow-origin")).toBe(FRONTEND);
    expect(response.headers.get("access-control-allow-credentials")).toBe("true");
    expect(response.headers.get("access-control-allow-methods")).toContain("PATCH");
  });

  it("sends the CORS headers on the actual request from the frontend", async () => {
    const user = await registerUser(frontendApi);
    const { cookie } = await webLogin(frontendApi, user);
    const response = await frontendApi.get("/api/v1/me", { headers: { Cookie: cookie, Origin: FRONTEND } });
    expect(response.status).toBe(200);
    expect(response.headers.get("access-control-allow-origin")).toBe(FRONTEND);
    expect(response.headers.get("access-control-allow-credentials")).toBe("true");
  });

  it("gives an untrusted origin no Access-Control-Allow-Origin", async () => {
    const preflight = await frontendApi.call("OPTIONS", "/api/v1/me", {
      headers: { Origin: "http://evil.example", "Access-Control-Request-Method": "PATCH" },
    });
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    expect(preflight.headers.get("access-control-allow-credentials")).toBeNull();
    const user = await registerUser(frontendApi);
    const actual = await frontendApi.get("/api/v1/me", {
      token: user.token,
      headers: { Origin: "http://evil.example" },
    });
    expect(actual.status).toBe(200);
    expect(actual.headers.get("access-control-allow-origin")).toBeNull();
  });
});
