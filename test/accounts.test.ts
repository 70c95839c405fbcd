// Account sign-in and account rows of the API document, over the REST paths.
import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { accessTokens, users } from "../db/schema/index.ts";
import { DEFAULT_PASSWORD, registerUser, uniqueEmail } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$/;

function registration(overrides: Record<string, unknown> = {}) {
  return { name: "Ann", email: uniqueEmail(), password: "12345678", password_confirmation: "12345678", ...overrides };
}

describe("POST /api/v1/auth/app/register", () => {
  it("returns the token response and creates the user with a hashed password", async () => {
    const body = registration({
      email: uniqueEmail("Mixed.Case").replace("mixed", "MiXeD"),
      preferred_language: "ja",
      device_name: "Pixel 8",
    });
    const response = await ctx.api.post("/api/v1/auth/app/register", body);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      access_token: expect.stringMatching(/^chat_[A-Za-z0-9_-]{40,}$/),
      token_type: "Bearer",
      user: { id: expect.any(Number), name: "Ann", email: body.email.toLowerCase() },
    });
    const [row] = await ctx.server.app.deps.db.select().from(users).where(eq(users.id, response.body.user.id));
    expect(row!.passwordHash).toMatch(/^\$argon2id\$/);
    expect(row!.preferredLanguage).toBe("ja");
    const tokens = await ctx.server.app.deps.db.select().from(accessTokens).where(eq(accessTokens.userId, row!.id));
    expect(tokens).toHaveLength(1);
    expect(tokens[0]).toMatchObject({ name: "Pixel 8", abilities: ["*"], kind: "sign_in" });
    expect(tokens[0]!.tokenHash).not.toContain(response.body.access_token);
  });

  it("accepts an 8-character password and rejects a 7-character one with error key password", async () => {
    expect(
      (
        await ctx.api.post(
          "/api/v1/auth/app/register",
          registration({ password: "abcdefgh", password_confirmation: "abcdefgh" }),
        )
      ).status,
    ).toBe(200);
    const response = await ctx.api.post(
      "/api/v1/auth/app/register",
      registration({ password: "abcdefg", password_confirmation: "abcdefg" }),
    );
    expect(response.status).toBe(422);
    expect(response.body).toEqual({
      message: "The given data was invalid.",
      errors: { password: ["The password field must be at least 8 characters."] },
    });
  });

  it("rejects a differing confirmation under the password key", async () => {
    const response = await ctx.api.post(
      "/api/v1/auth/app/register",
      registration({ password_confirmation: "87654321" }),
    );
    expect(response.status).toBe(422);
    expect(response.body.errors).toEqual({ password: ["The password field confirmation does not match."] });
  });

  it("names every missing required field", async () => {
    const response = await ctx.api.post("/api/v1/auth/app/register", {});
    expect(response.status).toBe(422);
    expect(Object.keys(response.body.errors).sort()).toEqual(["email", "name", "password", "password_confirmation"]);
    expect(response.body.errors.email).toEqual(["The email field is required."]);
  });

  it("rejects an invalid e-mail, a taken e-mail (in any case) and an unknown language", async () => {
    expect(
      (await ctx.api.post("/api/v1/auth/app/register", registration({ email: "not-an-email" }))).body.errors,
    ).toHaveProperty("email");
    const taken = await registerUser(ctx.api);
    const duplicate = await ctx.api.post(
      "/api/v1/auth/app/register",
      registration({ email: taken.email.toUpperCase() }),
    );
    expect(duplicate.status).toBe(422);
    expect(duplicate.body.errors).toEqual({ email: ["The email has already been taken."] });
    const language = await ctx.api.post("/api/v1/auth/app/register", registration({ preferred_language: "fr" }));
    expect(language.status).toBe(422);
    expect(language.body.errors).toEqual({ preferred_language: ["The selected preferred language is invalid."] });
  });

  it("accepts every documented language and a null one (which means en)", async () => {
    for (const language of ["en", "zh-CN", "ja", "th", "id"]) {
      const response = await ctx.api.post("/api/v1/auth/app/register", registration({ preferred_language: language }));
      expect(response.status).toBe(200);
    }
    const response = await ctx.api.post("/api/v1/auth/app/register", registration({ preferred_language: null }));
    const me = await ctx.api.get("/api/v1/me", { token: response.body.access_token });
    expect(me.body.preferred_language).toBe("en");
  });
});

describe("POST /api/v1/auth/app/login", () => {
  it("returns a new token labelled with device_name and records last_login_at", async () => {
    const user = await registerUser(ctx.api);
    const response = await ctx.api.post("/api/v1/auth/app/login", {
      email: user.email,
      password: user.password,
      device_name: "iPad",
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      access_token: expect.any(String),
      token_type: "Bearer",
      user: { id: user.id, name: user.name, email: user.email },
    });
    expect(response.body.access_token).not.toBe(user.token);
    const tokens = await ctx.api.get("/api/v1/tokens", { token: response.body.access_token });
    expect(tokens.body.data.map((token: { name: string }) => token.name)).toContain("iPad");
    const me = await ctx.api.get("/api/v1/me", { token: response.body.access_token });
    expect(me.body.last_login_at).toMatch(ISO_WITH_OFFSET);
  });

  it("answers wrong credentials and unknown e-mails alike: 422 with key email", async () => {
    const user = await registerUser(ctx.api);
    for (const body of [
      { email: user.email, password: "wrong-password" },
      { email: uniqueEmail(), password: DEFAULT_PASSWORD },
    ]) {
      const response = await ctx.api.post("/api/v1/auth/app/login", body);
      expect(response.status).toBe(422);
      expect(response.body).toEqual({
        message: "The given data was invalid.",
        errors: { email: ["These credentials do not match our records."] },
      });
    }
  });

  it("refuses an inactive account with 403 Account is inactive.", async () => {
    const user = await registerUser(ctx.api);
    await ctx.server.app.deps.db.update(users).set({ isActive: false }).where(eq(users.id, user.id));
    const response = await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password });
    expect(response.status).toBe(403);
    expect(response.body).toEqual({ message: "Account is inactive." });
    // The existing token of an inactive account no longer works either.
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(401);
  });

  it("throttles after 5 tries a minute per e-mail and IP, with Retry-After", async () => {
    const user = await registerUser(ctx.api);
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect(
        (await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: "wrong-password" })).status,
      ).toBe(422);
    }
    const blocked = await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password });
    expect(blocked.status).toBe(429);
    expect(blocked.body).toEqual({ message: "Too Many Attempts." });
    const retryAfter = Number(blocked.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Another e-mail from the same IP is not affected.
    const other = await registerUser(ctx.api);
    expect(
      (await ctx.api.post("/api/v1/auth/app/login", { email: other.email, password: other.password })).status,
    ).toBe(200);
  });

  it("does not count a successful sign-in against the limit", async () => {
    const user = await registerUser(ctx.api);
    for (let attempt = 1; attempt <= 7; attempt++) {
      expect(
        (await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password })).status,
      ).toBe(200);
    }
  });
});

describe("POST /api/v1/auth/app/logout", () => {
  it("revokes only the token used for the call", async () => {
    const user = await registerUser(ctx.api);
    const second = (await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password })).body
      .access_token;
    const response = await ctx.api.post("/api/v1/auth/app/logout", undefined, { token: user.token });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: "Logged out." });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(401);
    expect((await ctx.api.get("/api/v1/me", { token: second })).status).toBe(200);
  });
});

describe("GET /api/v1/me", () => {
  it("returns the bare user object", async () => {
    const user = await registerUser(ctx.api, { name: "Bea" });
    const response = await ctx.api.get("/api/v1/me", { token: user.token });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      id: user.id,
      name: "Bea",
      email: user.email,
      email_verified_at: null,
      is_active: true,
      last_login_at: expect.stringMatching(ISO_WITH_OFFSET),
      created_at: expect.stringMatching(ISO_WITH_OFFSET),
      updated_at: expect.stringMatching(ISO_WITH_OFFSET),
      preferred_language: "en",
      avatar_url: null,
    });
  });

  it("answers 401 Unauthenticated. without a token or with a bad one", async () => {
    for (const token of [undefined, "chat_not-a-real-token", "garbage"]) {
      const response = await ctx.api.get("/api/v1/me", { token });
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ message: "Unauthenticated." });
    }
  });
});

describe("PATCH /api/v1/me", () => {
  it("updates name, language and avatar and returns the bare user object", async () => {
    const user = await registerUser(ctx.api);
    const response = await ctx.api.patch(
      "/api/v1/me",
      { name: "New Name", preferred_language: "th", avatar_url: "https://cdn.example.test/a.png" },
      { token: user.token },
    );
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({
      id: user.id,
      name: "New Name",
      preferred_language: "th",
      avatar_url: "https://cdn.example.test/a.png",
    });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body).toEqual(response.body);
    const cleared = await ctx.api.patch("/api/v1/me", { avatar_url: null }, { token: user.token });
    expect(cleared.body).toMatchObject({ name: "New Name", avatar_url: null });
  });

  it("accepts a 255-character name and rejects 256", async () => {
    const user = await registerUser(ctx.api);
    expect((await ctx.api.patch("/api/v1/me", { name: "n".repeat(255) }, { token: user.token })).status).toBe(200);
    const response = await ctx.api.patch("/api/v1/me", { name: "n".repeat(256) }, { token: user.token });
    expect(response.status).toBe(422);
    expect(response.body.errors).toEqual({ name: ["The name field must not be greater than 255 characters."] });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.name).toBe("n".repeat(255));
  });

  it("accepts a 2048-character avatar_url and rejects 2049 and a non-URL", async () => {
    const user = await registerUser(ctx.api);
    const prefix = "https://cdn.example.test/";
    const url = (length: number) => prefix + "a".repeat(length - prefix.length);
    expect((await ctx.api.patch("/api/v1/me", { avatar_url: url(2048) }, { token: user.token })).status).toBe(200);
    const tooLong = await ctx.api.patch("/api/v1/me", { avatar_url: url(2049) }, { token: user.token });
    expect(tooLong.status).toBe(422);
    expect(tooLong.body.errors).toEqual({
      avatar_url: ["The avatar url field must not be greater than 2048 characters."],
    });
    const notUrl = await ctx.api.patch("/api/v1/me", { avatar_url: "not a url" }, { token: user.token });
    expect(notUrl.status).toBe(422);
    expect(notUrl.body.errors).toEqual({ avatar_url: ["The avatar url field must be a valid URL."] });
  });

  it("rejects a language outside the enum", async () => {
    const user = await registerUser(ctx.api);
    const response = await ctx.api.patch("/api/v1/me", { preferred_language: "de" }, { token: user.token });
    expect(response.status).toBe(422);
    expect(response.body.errors).toHaveProperty("preferred_language");
  });
});

describe("POST /api/v1/auth/app/change-password", () => {
  it("changes the password and signs out other devices, keeping the current token", async () => {
    const user = await registerUser(ctx.api);
    const other = (await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password })).body
      .access_token;
    const response = await ctx.api.post(
      "/api/v1/auth/app/change-password",
      { current_password: user.password, password: "a-new-password", password_confirmation: "a-new-password" },
      { token: user.token },
    );
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: "Password changed." });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(200);
    expect((await ctx.api.get("/api/v1/me", { token: other })).status).toBe(401);
    expect((await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password })).status).toBe(
      422,
    );
    expect(
      (await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: "a-new-password" })).status,
    ).toBe(200);
  });

  it("rejects a wrong current password with key current_password and keeps the old one", async () => {
    const user = await registerUser(ctx.api);
    const response = await ctx.api.post(
      "/api/v1/auth/app/change-password",
      { current_password: "not-my-password", password: "a-new-password", password_confirmation: "a-new-password" },
      { token: user.token },
    );
    expect(response.status).toBe(422);
    expect(response.body).toEqual({
      message: "The given data was invalid.",
      errors: { current_password: ["The password is incorrect."] },
    });
    expect((await ctx.api.post("/api/v1/auth/app/login", { email: user.email, password: user.password })).status).toBe(
      200,
    );
  });

  it("applies the 8-character minimum to the new password", async () => {
    const user = await registerUser(ctx.api);
    const response = await ctx.api.post(
      "/api/v1/auth/app/change-password",
      { current_password: user.password, password: "1234567", password_confirmation: "1234567" },
      { token: user.token },
    );
    expect(response.status).toBe(422);
    expect(response.body.errors).toEqual({ password: ["The password field must be at least 8 characters."] });
  });
});
