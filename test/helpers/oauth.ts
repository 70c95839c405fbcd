// Identity providers for tests, on 127.0.0.1: a real OpenID Connect server
// (oauth2-mock-server: discovery, JWKS, signed ID tokens, PKCE and nonce checks) and a small
// GitHub-style OAuth 2 server (authorize, token, /user) written here. Tests play the browser.
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { OAuth2Server } from "oauth2-mock-server";

export type OidcClaims = { sub: string; email?: string; email_verified?: boolean; name?: string; picture?: string };

export type OidcProvider = {
  issuer: string;
  /** Claims of the ID token the next code exchange returns. */
  nextIdentity(claims: OidcClaims): void;
  stop(): Promise<void>;
};

export async function startOidcProvider(): Promise<OidcProvider> {
  const server = new OAuth2Server();
  await server.issuer.keys.generate("RS256");
  await server.start(0, "127.0.0.1");
  let identity: OidcClaims = { sub: "default-subject" };
  server.service.on("beforeTokenSigning", (token) => {
    Object.assign(token.payload, identity);
  });
  return {
    issuer: server.issuer.url!,
    nextIdentity(claims) {
      identity = claims;
    },
    stop: () => server.stop(),
  };
}

export type GithubProfile = {
  id: number;
  login: string;
  email: string | null;
  name?: string;
  avatar_url?: string;
  email_verified?: boolean;
};

export type OAuth2Provider = {
  authorizationUrl: string;
  tokenUrl: string;
  userinfoUrl: string;
  clientId: string;
  clientSecret: string;
  nextProfile(profile: GithubProfile): void;
  stop(): Promise<void>;
};

/** GitHub-style: /login/oauth/authorize, /login/oauth/access_token (PKCE S256), /user. */
export async function startOAuth2Provider(): Promise<OAuth2Provider> {
  const clientId = "github-client";
  const clientSecret = "github-secret";
  let profile: GithubProfile = { id: 1, login: "octocat", email: null };
  const codes = new Map<string, { challenge: string | null; redirectUri: string; profile: GithubProfile }>();
  const accessTokens = new Map<string, GithubProfile>();

  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(body));
    };
    if (req.method === "GET" && url.pathname === "/login/oauth/authorize") {
      if (url.searchParams.get("client_id") !== clientId) return json(400, { error: "unknown client" });
      const code = randomBytes(16).toString("hex");
      const redirectUri = url.searchParams.get("redirect_uri")!;
      codes.set(code, { challenge: url.searchParams.get("code_challenge"), redirectUri, profile });
      const target = new URL(redirectUri);
      target.searchParams.set("code", code);
      const state = url.searchParams.get("state");
      if (state) target.searchParams.set("state", state);
      res.writeHead(302, { Location: target.toString() }).end();
      return;
    }
    if (req.method === "POST" && url.pathname === "/login/oauth/access_token") {
      let raw = "";
      for await (const chunk of req) raw += chunk;
      const form = new URLSearchParams(raw);
      const basic = req.headers.authorization?.startsWith("Basic ")
        ? Buffer.from(req.headers.authorization.slice(6), "base64").toString().split(":").map(decodeURIComponent)
        : [form.get("client_id"), form.get("client_secret")];
      if (basic[0] !== clientId || basic[1] !== clientSecret) return json(401, { error: "invalid_client" });
      const grant = codes.get(form.get("code") ?? "");
      codes.delete(form.get("code") ?? "");
      const verifier = form.get("code_verifier");
      const challengeOk =
        !grant?.challenge ||
        (verifier && createHash("sha256").update(verifier).digest("base64url") === grant.challenge);
      if (!grant || !challengeOk || form.get("redirect_uri") !== grant.redirectUri)
        return json(400, { error: "invalid_grant" });
      const accessToken = randomBytes(16).toString("hex");
      accessTokens.set(accessToken, grant.profile);
      return json(200, { access_token: accessToken, token_type: "bearer", scope: "read:user,user:email" });
    }
    if (req.method === "GET" && url.pathname === "/user") {
      const token = req.headers.authorization?.replace(/^Bearer\s+/i, "") ?? "";
      const user = accessTokens.get(token);
      return user ? json(200, user) : json(401, { message: "Bad credentials" });
    }
    json(404, { message: "Not Found" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    authorizationUrl: `${base}/login/oauth/authorize`,
    tokenUrl: `${base}/login/oauth/access_token`,
    userinfoUrl: `${base}/user`,
    clientId,
    clientSecret,
    nextProfile(next) {
      profile = next;
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Plays the browser: opens the authorization URL and returns the code and state it is sent back with. */
export async function authorize(redirectUrl: string): Promise<{ code: string; state: string | null; location: URL }> {
  const response = await fetch(redirectUrl, { redirect: "manual" });
  const location = response.headers.get("location");
  if (response.status !== 302 || !location)
    throw new Error(`authorization did not redirect: ${response.status} ${await response.text()}`);
  const url = new URL(location);
  const code = url.searchParams.get("code");
  if (!code) throw new Error(`no code in ${location}`);
  return { code, state: url.searchParams.get("state"), location: url };
}
