// Social sign-in and linking against a real OpenID Connect server (oauth2-mock-server) and a
// GitHub-style OAuth 2 server, both on 127.0.0.1. The test plays the browser: it opens the
// redirect_url, takes the code the provider sends back, and calls the callback.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { users } from "../db/schema/index.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { registerUser, uniqueEmail } from "./helpers/factories.ts";
import {
  authorize,
  startOAuth2Provider,
  startOidcProvider,
  type OAuth2Provider,
  type OidcProvider,
} from "./helpers/oauth.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";

const APP_REDIRECT = "http://app.example.test/auth/callback";

let oidc: OidcProvider;
let github: OAuth2Provider;
let server: TestServer;
let api: RestClient;

function providerEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    SOCIAL_PROVIDERS: "google,github",
    SOCIAL_GOOGLE_CLIENT_ID: "chat-service",
    SOCIAL_GOOGLE_CLIENT_SECRET: "google-secret",
    SOCIAL_GOOGLE_ISSUER: oidc.issuer,
    SOCIAL_GOOGLE_REDIRECT_URI: APP_REDIRECT,
    SOCIAL_GITHUB_CLIENT_ID: github.clientId,
    SOCIAL_GITHUB_CLIENT_SECRET: github.clientSecret,
    SOCIAL_GITHUB_AUTHORIZATION_URL: github.authorizationUrl,
    SOCIAL_GITHUB_TOKEN_URL: github.tokenUrl,
    SOCIAL_GITHUB_USERINFO_URL: github.userinfoUrl,
    SOCIAL_GITHUB_REDIRECT_URI: APP_REDIRECT,
    ...extra,
  };
}

beforeAll(async () => {
  oidc = await startOidcProvider();
  github = await startOAuth2Provider();
  server = await startTestServer(providerEnv());
  api = restClient(server.url);
});
afterAll(async () => {
  await server?.close();
  await oidc?.stop();
  await github?.stop();
});

let counter = 0;
const subject = () => `subject-${Date.now()}-${++counter}`;
const INVALID_PROVIDER = {
  message: "The given data was invalid.",
  errors: { provider: ["The selected provider is invalid."] },
};
const INVALID_STATE = {
  message: "The given data was invalid.",
  errors: { state: ["The state is invalid or has expired."] },
};

/** redirect → browser → code; for link flows pass the user's token. */
async function startFlow(provider: string, token?: string) {
  const path = token ? `/api/v1/auth/app/social/${provider}/link` : `/api/v1/auth/app/social/${provider}/redirect`;
  const response = await api.post(path, undefined, { token });
  expect(response.status).toBe(200);
  return authorize(response.body.redirect_url);
}

async function socialSignIn(provider: "google" | "github", extra: Record<string, unknown> = {}) {
  const { code, state } = await startFlow(provider);
  return api.post(`/api/v1/auth/app/social/${provider}/callback`, { code, state, ...extra });
}

async function linkAs(token: string, provider: "google" | "github") {
  const { code, state } = await startFlow(provider, token);
  return api.post(`/api/v1/auth/app/social/${provider}/link/callback`, { code, state }, { token });
}

describe("redirect", () => {
  it("returns an OpenID Connect authorization URL with state, nonce and PKCE (S256)", async () => {
    const response = await api.post("/api/v1/auth/app/social/google/redirect");
    expect(response.status).toBe(200);
    expect(Object.keys(response.body)).toEqual(["redirect_url"]);
    const url = new URL(response.body.redirect_url);
    expect(url.origin).toBe(new URL(oidc.issuer).origin);
    expect(url.searchParams.get("client_id")).toBe("chat-service");
    expect(url.searchParams.get("redirect_uri")).toBe(APP_REDIRECT);
    expect(url.searchParams.get("response_type")).toBe("code");
    expect(url.searchParams.get("scope")).toBe("openid email profile");
    expect(url.searchParams.get("state")).toMatch(/^[\w-]{20,}$/);
    expect(url.searchParams.get("nonce")).toMatch(/^[\w-]{20,}$/);
    expect(url.searchParams.get("code_challenge")).toMatch(/^[\w-]{43}$/);
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
  });

  it("returns a plain OAuth 2 URL (no nonce) for a GitHub-style provider", async () => {
    const url = new URL((await api.post("/api/v1/auth/app/social/github/redirect")).body.redirect_url);
    expect(url.toString().startsWith(github.authorizationUrl)).toBe(true);
    expect(url.searchParams.get("scope")).toBe("read:user user:email");
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
    expect(url.searchParams.has("nonce")).toBe(false);
  });

  it("answers an unknown or disabled provider with 422 key provider, on every endpoint", async () => {
    const user = await registerUser(api);
    const calls = [
      api.post("/api/v1/auth/app/social/myspace/redirect"),
      api.post("/api/v1/auth/app/social/myspace/callback", { code: "x" }),
      api.post("/api/v1/auth/app/social/myspace/link", undefined, { token: user.token }),
      api.post("/api/v1/auth/app/social/myspace/link/callback", { code: "x" }, { token: user.token }),
      api.delete("/api/v1/auth/app/social/myspace/unlink", { token: user.token }),
      api.post("/api/v1/auth/web/social/myspace/redirect"),
    ];
    for (const response of await Promise.all(calls)) {
      expect(response.status).toBe(422);
      expect(response.body).toEqual(INVALID_PROVIDER);
    }
  });
});

describe("callback (sign-in)", () => {
  it("creates the user on first sign-in: verified e-mail, no password, device_name on the token", async () => {
    const email = uniqueEmail("google-new");
    const sub = subject();
    oidc.nextIdentity({
      sub,
      email,
      email_verified: true,
      name: "Grace Hopper",
      picture: "https://img.example.test/g.png",
    });
    const response = await socialSignIn("google", { device_name: "Grace's phone" });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      access_token: expect.any(String),
      token_type: "Bearer",
      user: { id: expect.any(Number), name: "Grace Hopper", email },
    });
    const token = response.body.access_token;
    const me = await api.get("/api/v1/me", { token });
    expect(me.body).toMatchObject({
      email,
      email_verified_at: expect.any(String),
      avatar_url: "https://img.example.test/g.png",
    });
    const [row] = await server.app.deps.db.select().from(users).where(eq(users.email, email));
    expect(row!.passwordHash).toBeNull();
    const tokens = await api.get("/api/v1/tokens", { token });
    expect(tokens.body.data.map((entry: { name: string }) => entry.name)).toEqual(["Grace's phone"]);
    const accounts = await api.get("/api/v1/auth/app/social/accounts", { token });
    expect(accounts.status).toBe(200);
    expect(accounts.body).toEqual({
      accounts: [
        {
          id: expect.any(Number),
          provider: "google",
          provider_email: email,
          name: "Grace Hopper",
          avatar: "https://img.example.test/g.png",
          created_at: expect.stringMatching(/\+00:00$/),
        },
      ],
    });
  });

  it("signs the same provider account into the same user next time", async () => {
    const sub = subject();
    const email = uniqueEmail("google-again");
    oidc.nextIdentity({ sub, email, email_verified: true, name: "Again" });
    const first = await socialSignIn("google");
    // The provider's e-mail changed since: the link is by subject, not by e-mail.
    oidc.nextIdentity({ sub, email: uniqueEmail("changed"), email_verified: true, name: "Again" });
    const second = await socialSignIn("google");
    expect(second.status).toBe(200);
    expect(second.body.user.id).toBe(first.body.user.id);
  });

  it("links to the existing user with the same verified e-mail", async () => {
    const user = await registerUser(api);
    oidc.nextIdentity({ sub: subject(), email: user.email, email_verified: true, name: "Someone" });
    const response = await socialSignIn("google");
    expect(response.status).toBe(200);
    expect(response.body.user).toEqual({ id: user.id, name: user.name, email: user.email });
    const accounts = await api.get("/api/v1/auth/app/social/accounts", { token: user.token });
    expect(accounts.body.accounts.map((account: { provider: string }) => account.provider)).toEqual(["google"]);
    expect((await api.get("/api/v1/me", { token: user.token })).body.email_verified_at).not.toBeNull();
  });

  it("does not link by an e-mail the provider has not verified", async () => {
    const user = await registerUser(api);
    oidc.nextIdentity({ sub: subject(), email: user.email, email_verified: false });
    const response = await socialSignIn("google");
    expect(response.status).toBe(422);
    expect(Object.keys(response.body.errors)).toEqual(["email"]);
    expect((await api.get("/api/v1/auth/app/social/accounts", { token: user.token })).body.accounts).toEqual([]);
  });

  it("signs up through a GitHub-style provider with the e-mail from its userinfo endpoint", async () => {
    const email = uniqueEmail("octo");
    github.nextProfile({ id: 100 + ++counter, login: "octocat", email, avatar_url: "https://img.example.test/o.png" });
    const response = await socialSignIn("github");
    expect(response.status).toBe(200);
    expect(response.body.user).toEqual({ id: expect.any(Number), name: "octocat", email });
    const accounts = await api.get("/api/v1/auth/app/social/accounts", { token: response.body.access_token });
    expect(accounts.body.accounts).toEqual([
      expect.objectContaining({ provider: "github", provider_email: email, name: "octocat" }),
    ]);
  });

  it("refuses an inactive user with 403", async () => {
    const user = await registerUser(api);
    oidc.nextIdentity({ sub: subject(), email: user.email, email_verified: true });
    expect((await socialSignIn("google")).status).toBe(200);
    await server.app.deps.db.update(users).set({ isActive: false }).where(eq(users.id, user.id));
    const response = await socialSignIn("google");
    expect(response.status).toBe(403);
    expect(response.body).toEqual({ message: "Account is inactive." });
  });

  it("rejects a bad code with 422 key code", async () => {
    const { state } = await startFlow("google");
    const response = await api.post("/api/v1/auth/app/social/google/callback", { code: "not-a-real-code", state });
    expect(response.status).toBe(422);
    expect(response.body.errors).toEqual({ code: ["The authorization code is invalid or has expired."] });
    const missing = await api.post("/api/v1/auth/app/social/google/callback", {});
    expect(missing.body.errors).toEqual({ code: ["The code field is required."] });
  });
});

describe("state", () => {
  it("is consumed once: a replayed state is 422 key state", async () => {
    oidc.nextIdentity({ sub: subject(), email: uniqueEmail(), email_verified: true });
    const { code, state } = await startFlow("google");
    expect((await api.post("/api/v1/auth/app/social/google/callback", { code, state })).status).toBe(200);
    const replay = await api.post("/api/v1/auth/app/social/google/callback", { code, state });
    expect(replay.status).toBe(422);
    expect(replay.body).toEqual(INVALID_STATE);
  });

  it("must be one we issued, for this provider and this flow", async () => {
    const unknown = await api.post("/api/v1/auth/app/social/google/callback", { code: "x", state: "made-up-state" });
    expect(unknown.body).toEqual(INVALID_STATE);
    const githubFlow = await startFlow("github");
    const wrongProvider = await api.post("/api/v1/auth/app/social/google/callback", {
      code: githubFlow.code,
      state: githubFlow.state,
    });
    expect(wrongProvider.status).toBe(422);
    expect(wrongProvider.body).toEqual(INVALID_STATE);
    // A link flow's state cannot sign anyone in, and one user's link state is not another's.
    const linker = await registerUser(api);
    const other = await registerUser(api);
    const linkFlow = await startFlow("google", linker.token);
    expect((await api.post("/api/v1/auth/app/social/google/callback", linkFlow)).body).toEqual(INVALID_STATE);
    const secondLinkFlow = await startFlow("google", linker.token);
    const stolen = await api.post("/api/v1/auth/app/social/google/link/callback", secondLinkFlow, {
      token: other.token,
    });
    expect(stolen.body).toEqual(INVALID_STATE);
  });

  it("expires after 10 minutes", async () => {
    oidc.nextIdentity({ sub: subject(), email: uniqueEmail(), email_verified: true });
    const { code, state } = await startFlow("google");
    server.clock.advance(10 * 60 * 1000 + 1000);
    const response = await api.post("/api/v1/auth/app/social/google/callback", { code, state });
    expect(response.status).toBe(422);
    expect(response.body).toEqual(INVALID_STATE);
  });
});

describe("link, link/callback, unlink", () => {
  it("links a provider account to the signed-in user, with the four documented fields", async () => {
    const user = await registerUser(api);
    const email = uniqueEmail("linked");
    oidc.nextIdentity({ sub: subject(), email, email_verified: true, name: "Linked Name" });
    const response = await linkAs(user.token, "google");
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      account: { id: expect.any(Number), provider: "google", provider_email: email, name: "Linked Name" },
      message: "Social account linked.",
    });
    const accounts = await api.get("/api/v1/auth/app/social/accounts", { token: user.token });
    expect(accounts.body.accounts.map((account: { id: number }) => account.id)).toEqual([response.body.account.id]);
  });

  it("answers 422 when the account is already linked to you, and when linked to another user", async () => {
    const owner = await registerUser(api);
    const sub = subject();
    oidc.nextIdentity({ sub, email: uniqueEmail(), email_verified: true });
    expect((await linkAs(owner.token, "google")).status).toBe(200);
    const again = await linkAs(owner.token, "google");
    expect(again.status).toBe(422);
    expect(again.body).toEqual({ message: "This social account is already linked to your account." });
    const someoneElse = await registerUser(api);
    const taken = await linkAs(someoneElse.token, "google");
    expect(taken.status).toBe(422);
    expect(taken.body).toEqual({ message: "This social account is already linked to another user." });
  });

  it("requires a token for link, link/callback, unlink and accounts", async () => {
    for (const response of [
      await api.post("/api/v1/auth/app/social/google/link"),
      await api.post("/api/v1/auth/app/social/google/link/callback", { code: "x" }),
      await api.delete("/api/v1/auth/app/social/google/unlink"),
      await api.get("/api/v1/auth/app/social/accounts"),
    ]) {
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ message: "Unauthenticated." });
    }
  });

  it("unlinks (404 when not linked), but never the last way to sign in", async () => {
    // A user created by social sign-in: no password, one provider.
    oidc.nextIdentity({ sub: subject(), email: uniqueEmail("only-google"), email_verified: true });
    const signedIn = await socialSignIn("google");
    const token = signedIn.body.access_token;
    const notLinked = await api.delete("/api/v1/auth/app/social/github/unlink", { token });
    expect(notLinked.status).toBe(404);
    expect(notLinked.body).toEqual({ message: "Social account not found." });
    const last = await api.delete("/api/v1/auth/app/social/google/unlink", { token });
    expect(last.status).toBe(422);
    expect(last.body).toEqual({ message: expect.stringContaining("set a password") });

    // With a second provider linked, either can go; then the other is the last again.
    github.nextProfile({ id: 5000 + ++counter, login: "second", email: uniqueEmail("second") });
    expect((await linkAs(token, "github")).status).toBe(200);
    const unlinked = await api.delete("/api/v1/auth/app/social/google/unlink", { token });
    expect(unlinked.status).toBe(200);
    expect(unlinked.body).toEqual({ message: "Social account unlinked." });
    expect((await api.delete("/api/v1/auth/app/social/github/unlink", { token })).status).toBe(422);
    const accounts = await api.get("/api/v1/auth/app/social/accounts", { token });
    expect(accounts.body.accounts.map((account: { provider: string }) => account.provider)).toEqual(["github"]);
  });

  it("lets a user with a password unlink their only provider", async () => {
    const user = await registerUser(api);
    oidc.nextIdentity({ sub: subject(), email: uniqueEmail(), email_verified: true });
    expect((await linkAs(user.token, "google")).status).toBe(200);
    expect((await api.delete("/api/v1/auth/app/social/google/unlink", { token: user.token })).status).toBe(200);
    expect((await api.get("/api/v1/auth/app/social/accounts", { token: user.token })).body).toEqual({ accounts: [] });
  });
});

describe("web variant", () => {
  /** The provider sends the browser to APP_URL; in tests the server's own address stands for it. */
  const onServer = (target: TestServer, location: URL) => `${target.url}${location.pathname}${location.search}`;

  it("signs in with a cookie session at the web callback", async () => {
    const email = uniqueEmail("web");
    oidc.nextIdentity({ sub: subject(), email, email_verified: true, name: "Web User" });
    const redirect = await api.post("/api/v1/auth/web/social/google/redirect");
    expect(redirect.status).toBe(200);
    const redirectUri = new URL(new URL(redirect.body.redirect_url).searchParams.get("redirect_uri")!);
    expect(redirectUri.pathname).toBe("/api/v1/auth/web/social/google/callback");
    expect(redirectUri.origin).toBe(new URL(server.config.appUrl).origin);

    const { location } = await authorize(redirect.body.redirect_url);
    const landing = await fetch(onServer(server, location), { redirect: "manual" });
    expect(landing.status).toBe(200);
    expect(await landing.json()).toEqual({ data: expect.objectContaining({ email, name: "Web User" }) });
    const cookie = landing.headers.getSetCookie().find((header) => header.startsWith("chat_session="));
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
    const me = await api.get("/api/v1/me", { headers: { Cookie: cookie!.split(";")[0]! } });
    expect(me.status).toBe(200);
    expect(me.body.email).toBe(email);
  });

  it("does not accept an app flow's state at the web callback", async () => {
    const { code, state } = await startFlow("google");
    const response = await fetch(`${server.url}/api/v1/auth/web/social/google/callback?code=${code}&state=${state}`);
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual(INVALID_STATE);
  });

  it("redirects to FRONTEND_URL after signing in when one is set", async () => {
    const withFrontend = await startTestServer(providerEnv({ FRONTEND_URL: "http://frontend.example.test/app" }));
    try {
      oidc.nextIdentity({ sub: subject(), email: uniqueEmail("front"), email_verified: true });
      const redirect = await restClient(withFrontend.url).post("/api/v1/auth/web/social/google/redirect");
      const { location } = await authorize(redirect.body.redirect_url);
      const landing = await fetch(onServer(withFrontend, location), { redirect: "manual" });
      expect(landing.status).toBe(302);
      expect(landing.headers.get("location")).toBe("http://frontend.example.test/app");
      expect(landing.headers.getSetCookie().some((header) => header.startsWith("chat_session="))).toBe(true);
    } finally {
      await withFrontend.close();
    }
  });
});
