// Simultaneous first social sign-ins of one identity (a double tap, two devices signing in at
// once): each callback exchanges its own code and finds no account yet; one creates it, and
// the others end up signed in to that same account: every callback 200, one user, one linked
// provider account, never a 500. Simultaneous link callbacks likewise: one links, the others
// get the documented 422, one link row. With PostgreSQL the requests really run in parallel;
// with PGlite (one connection) they are serialized, and the answer must be the same.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { socialAccounts, users } from "../db/schema/index.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { registerUser, uniqueEmail, type RegisteredUser } from "./helpers/factories.ts";
import {
  authorize,
  startOAuth2Provider,
  startOidcProvider,
  type OAuth2Provider,
  type OidcProvider,
} from "./helpers/oauth.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";

const APP_REDIRECT = "http://app.example.test/auth/callback";
const PARALLEL = 6;

let oidc: OidcProvider;
let github: OAuth2Provider;
let server: TestServer;
let api: RestClient;

beforeAll(async () => {
  oidc = await startOidcProvider();
  github = await startOAuth2Provider();
  server = await startTestServer({
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
  });
  api = restClient(server.url);
});
afterAll(async () => {
  await server?.close();
  await oidc?.stop();
  await github?.stop();
});

let counter = 0;
const subject = () => `race-${Date.now()}-${++counter}`;

/** `count` flows started and authorized (each its own state and code), not yet called back. */
async function authorizedFlows(provider: "google" | "github", count: number) {
  const flows: { code: string; state: string | null }[] = [];
  for (let i = 0; i < count; i++) {
    const redirect = await api.post(`/api/v1/auth/app/social/${provider}/redirect`);
    expect(redirect.status).toBe(200);
    flows.push(await authorize(redirect.body.redirect_url));
  }
  return flows;
}

/** Every callback at once. */
function callBackTogether(provider: "google" | "github", flows: { code: string; state: string | null }[]) {
  return Promise.all(
    flows.map((flow, index) =>
      api.post(`/api/v1/auth/app/social/${provider}/callback`, {
        code: flow.code,
        state: flow.state,
        device_name: `device ${index + 1}`,
      }),
    ),
  );
}

async function accountsFor(email: string) {
  const rows = await server.app.deps.db.select().from(users).where(eq(users.email, email));
  const links = rows[0]
    ? await server.app.deps.db.select().from(socialAccounts).where(eq(socialAccounts.userId, rows[0].id))
    : [];
  return { users: rows, links };
}

describe("simultaneous first social sign-ins of one identity", () => {
  it("OpenID Connect: every callback signs in to one new account", async () => {
    const email = uniqueEmail("race-oidc");
    oidc.nextIdentity({ sub: subject(), email, email_verified: true, name: "Racing Rita" });
    const responses = await callBackTogether("google", await authorizedFlows("google", PARALLEL));

    for (const response of responses) {
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      expect(response.body).toMatchObject({ token_type: "Bearer", access_token: expect.any(String) });
    }
    const userIds = new Set(responses.map((response) => response.body.user.id));
    expect(userIds.size).toBe(1);
    const { users: rows, links } = await accountsFor(email);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.id).toBe([...userIds][0]);
    expect(links.map((link) => link.provider)).toEqual(["google"]);
    // Every device got a token of its own, and each works.
    const tokens = new Set(responses.map((response) => response.body.access_token));
    expect(tokens.size).toBe(PARALLEL);
    for (const token of tokens) expect((await api.get("/api/v1/me", { token })).body.id).toBe(rows[0]!.id);
  });

  it("OAuth 2 (GitHub style): every callback signs in to one new account", async () => {
    const email = uniqueEmail("race-github");
    github.nextProfile({ id: 9_000_000 + ++counter, login: "racer", email, email_verified: true, name: "Racer" });
    const responses = await callBackTogether("github", await authorizedFlows("github", PARALLEL));

    for (const response of responses) expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(new Set(responses.map((response) => response.body.user.id)).size).toBe(1);
    const { users: rows, links } = await accountsFor(email);
    expect(rows).toHaveLength(1);
    expect(links.map((link) => link.provider)).toEqual(["github"]);
  });

  it("an existing account with the verified e-mail: every callback links it once and signs in to it", async () => {
    const existing = await registerUser(api, { email: uniqueEmail("race-existing") });
    oidc.nextIdentity({ sub: subject(), email: existing.email, email_verified: true, name: "Existing" });
    const responses = await callBackTogether("google", await authorizedFlows("google", PARALLEL));

    for (const response of responses) {
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      expect(response.body.user.id).toBe(existing.id);
    }
    const { users: rows, links } = await accountsFor(existing.email);
    expect(rows).toHaveLength(1);
    expect(links.map((link) => link.provider)).toEqual(["google"]);
  });
});

/** `count` link flows of the user, started and authorized, not yet called back. */
async function authorizedLinkFlows(user: RegisteredUser, count: number) {
  const flows: { code: string; state: string | null }[] = [];
  for (let i = 0; i < count; i++) {
    const link = await api.post("/api/v1/auth/app/social/google/link", undefined, { token: user.token });
    expect(link.status).toBe(200);
    flows.push(await authorize(link.body.redirect_url));
  }
  return flows.map((flow) => ({ user, flow }));
}

/** Every link callback at once, each with its user's token. */
function linkTogether(calls: { user: RegisteredUser; flow: { code: string; state: string | null } }[]) {
  return Promise.all(
    calls.map(({ user, flow }) =>
      api.post("/api/v1/auth/app/social/google/link/callback", flow, { token: user.token }),
    ),
  );
}

async function linksOf(providerUserId: string) {
  return server.app.deps.db.select().from(socialAccounts).where(eq(socialAccounts.providerUserId, providerUserId));
}

describe("simultaneous link callbacks of one provider account", () => {
  it("one user: one callback links it, the others answer 422 already linked to your account", async () => {
    const user = await registerUser(api, { email: uniqueEmail("race-link") });
    const sub = subject();
    oidc.nextIdentity({ sub, email: user.email, email_verified: true, name: "Linking Lou" });
    const responses = await linkTogether(await authorizedLinkFlows(user, PARALLEL));

    const statuses = responses.map((response) => response.status).sort();
    expect(statuses, JSON.stringify(responses.map((response) => response.body))).toEqual([
      200,
      ...Array<number>(PARALLEL - 1).fill(422),
    ]);
    for (const response of responses) {
      if (response.status === 200) expect(response.body.message).toBe("Social account linked.");
      else expect(response.body).toEqual({ message: "This social account is already linked to your account." });
    }
    const links = await linksOf(sub);
    expect(links.map((link) => [link.provider, link.userId])).toEqual([["google", user.id]]);
  });

  it("two users: one of them links it, the other answers 422 already linked to another user", async () => {
    const first = await registerUser(api, { email: uniqueEmail("race-link-a") });
    const second = await registerUser(api, { email: uniqueEmail("race-link-b") });
    const sub = subject();
    oidc.nextIdentity({ sub, email: uniqueEmail("race-link-shared"), email_verified: true, name: "Shared" });
    const calls = [
      ...(await authorizedLinkFlows(first, PARALLEL / 2)),
      ...(await authorizedLinkFlows(second, PARALLEL / 2)),
    ];
    const responses = await linkTogether(calls);

    const unexpected = responses.filter((response) => response.status !== 200 && response.status !== 422);
    expect(unexpected.map((response) => [response.status, response.body])).toEqual([]);
    const winners = responses.flatMap((response, index) => (response.status === 200 ? [calls[index]!.user.id] : []));
    expect(winners).toHaveLength(1);
    const links = await linksOf(sub);
    expect(links.map((link) => link.userId)).toEqual(winners);
    responses.forEach((response, index) => {
      if (response.status === 200) return;
      const mine = calls[index]!.user.id === winners[0];
      expect(response.body).toEqual({
        message: mine
          ? "This social account is already linked to your account."
          : "This social account is already linked to another user.",
      });
    });
  });
});
