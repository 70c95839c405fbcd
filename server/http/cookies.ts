// The web variant's session cookie: HttpOnly, SameSite=Lax, Secure when APP_URL is https.
import type { Config } from "../config.ts";

export const SESSION_COOKIE = "chat_session";

export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const separator = part.indexOf("=");
    if (separator === -1) continue;
    if (part.slice(0, separator).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(separator + 1).trim());
    } catch {
      // A garbled value is no credential at all: the request goes on unauthenticated.
      return undefined;
    }
  }
  return undefined;
}

function attributes(config: Config, maxAgeSeconds: number): string {
  const secure = config.appUrl.startsWith("https:") ? "; Secure" : "";
  return `Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${secure}`;
}

export function sessionCookie(config: Config, value: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${encodeURIComponent(value)}; ${attributes(config, maxAgeSeconds)}`;
}

export function clearedSessionCookie(config: Config): string {
  return `${SESSION_COOKIE}=; ${attributes(config, 0)}`;
}

/** Origins allowed to send cookie-authenticated writes (and to make CORS requests). */
export function trustedOrigins(config: Config): Set<string> {
  const origins = new Set([new URL(config.appUrl).origin]);
  if (config.frontendUrl) origins.add(new URL(config.frontendUrl).origin);
  return origins;
}
