// The request context every procedure receives: dependencies, the caller (if any) and a place
// for response status and headers (cookies, redirects) that both HTTP doors apply.
import type { IncomingMessage } from "node:http";
import { LANGUAGES, type Language } from "../db/schema/index.ts";
import type { Auth } from "./auth.ts";
import type { Deps } from "./deps.ts";
import { requestClientAddress, trustedRangesOf } from "./http/client-address.ts";
import { readCookie, SESSION_COOKIE } from "./http/cookies.ts";
import { resolveToken } from "./services/accounts/tokens.ts";
import { appErrorToTRPC, unavailableDependency } from "./trpc-errors.ts";

export type ResponseOverrides = { status?: number; headers: Record<string, string | string[]> };

export type RequestContext = {
  deps: Deps;
  ip: string;
  /** The best of our languages by Accept-Language, for mail to someone with no account yet. */
  language: Language | undefined;
  origin: string | undefined;
  auth: Auth | null;
  /** Which door the request came through: a subscription over "http" is an SSE stream. */
  door: "http" | "websocket";
  response: ResponseOverrides;
};

function bearerToken(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  if (!header) return undefined;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  return match?.[1]?.trim();
}

/** The first of the caller's Accept-Language preferences that we have, by quality. */
export function acceptedLanguage(header: string | undefined): Language | undefined {
  if (!header) return undefined;
  const ranked = header
    .split(",")
    .map((part) => {
      const [tag = "", ...params] = part.trim().split(";");
      const quality = params.map((param) => /^\s*q=([\d.]+)/.exec(param)?.[1]).find(Boolean);
      return { tag: tag.trim().toLowerCase(), quality: quality === undefined ? 1 : Number(quality) };
    })
    .filter((entry) => entry.tag && entry.quality > 0)
    .sort((a, b) => b.quality - a.quality);
  for (const { tag } of ranked) {
    const match =
      LANGUAGES.find((language) => language.toLowerCase() === tag) ??
      LANGUAGES.find((language) => language.split("-")[0] === tag.split("-")[0]);
    if (match) return match;
  }
  return undefined;
}

/**
 * The client's address under TRUST_PROXY (server/http/client-address.ts): the socket's, or the
 * one a trusted proxy forwarded. Decided once per request; every door and limit reads this.
 */
export function clientIp(req: IncomingMessage, config: { trustProxy: readonly string[] }): string {
  return requestClientAddress(req, trustedRangesOf(config));
}

/** A database that cannot be reached is a 503 here too: this runs before any procedure's error mapping. */
function asRequestError(error: unknown): unknown {
  const unavailable = unavailableDependency(error);
  return unavailable ? appErrorToTRPC(unavailable) : error;
}

/**
 * The caller of a request with `plaintext`. Over HTTP the sign-in may be served from this
 * process's memory for a few seconds (server/services/accounts/credential-watch.ts); a request
 * over a WebSocket connection always looks its token up.
 */
async function authenticate(
  deps: Deps,
  plaintext: string | undefined,
  via: Auth["via"],
  door: RequestContext["door"],
): Promise<Auth | null> {
  if (!plaintext) return null;
  try {
    const lookUp = () => resolveToken(deps.db, plaintext, deps.clock.now());
    const resolved = door === "http" ? await deps.credentials.signInRequest(plaintext, lookUp) : await lookUp();
    return resolved ? { ...resolved, via } : null;
  } catch (error) {
    throw asRequestError(error);
  }
}

/**
 * A WebSocket connection's own sign-in, with its connection params' token: the credential it
 * holds while open (watched for revocation, counted by presence). A reconnect's may be
 * remembered from the connection before (server/services/accounts/credential-watch.ts).
 */
export async function signInLiveConnection(deps: Deps, plaintext: string | undefined) {
  if (!plaintext) return null;
  try {
    return await deps.credentials.signInConnection(plaintext, async () => {
      const resolved = await resolveToken(deps.db, plaintext, deps.clock.now());
      return resolved && { userId: resolved.user.id, tokenId: resolved.token.id, expiresAt: resolved.token.expiresAt };
    });
  } catch (error) {
    throw asRequestError(error);
  }
}

/** What a request's context takes from the HTTP request: its client's address, language and origin. */
export type Peer = Pick<RequestContext, "ip" | "language" | "origin">;

/** The peer of an HTTP request (a WebSocket connection's is taken once, from its upgrade request). */
export function peerOf(req: IncomingMessage, config: { trustProxy: readonly string[] }): Peer {
  return {
    ip: clientIp(req, config),
    language: acceptedLanguage(req.headers["accept-language"]),
    origin: req.headers.origin,
  };
}

function contextFor(deps: Deps, peer: Peer, auth: Auth | null, door: RequestContext["door"]): RequestContext {
  const { ip, language, origin } = peer;
  return { deps, ip, language, origin, auth, door, response: { headers: {} } };
}

export async function createHttpContext(
  deps: Deps,
  req: IncomingMessage,
  connectionToken?: string,
): Promise<RequestContext> {
  const peer = peerOf(req, deps.config);
  if (connectionToken)
    return contextFor(deps, peer, await authenticate(deps, connectionToken, "connection", "http"), "http");
  const bearer = bearerToken(req);
  const auth = bearer
    ? await authenticate(deps, bearer, "bearer", "http")
    : await authenticate(deps, readCookie(req.headers.cookie, SESSION_COOKIE), "cookie", "http");
  return contextFor(deps, peer, auth, "http");
}

/** Each request of a WebSocket connection authenticates with its connection params `{ token }`. */
export async function createWsContext(
  deps: Deps,
  peer: Peer,
  connectionParams: Record<string, string | undefined> | null,
): Promise<RequestContext> {
  return contextFor(
    deps,
    peer,
    await authenticate(deps, connectionParams?.token, "connection", "websocket"),
    "websocket",
  );
}

export function appendResponseHeader(ctx: RequestContext, name: string, value: string): void {
  const existing = ctx.response.headers[name];
  ctx.response.headers[name] = existing === undefined ? value : [...[existing].flat(), value];
}
