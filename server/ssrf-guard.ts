// The SSRF guard for outbound webhooks. A webhook's URL is typed in by a workspace owner, so
// without a guard anyone who may save one could make the server POST to itself (127.0.0.1, ::1),
// to the private network behind it (10/8, 192.168/16, fc00::/7) or to a cloud metadata service
// (169.254.169.254, fd00:ec2::254), and read the answer back in the delivery log. Only plain
// public unicast addresses may be called. The URL is checked when it is saved (checkTarget) and
// again at connect time on every delivery (guardedPost), because a name's DNS answer can change
// in between (DNS rebinding). A delivery never follows a redirect, is bounded in time and in the
// bytes it reads, and reuses keep-alive connections.
import dns from "node:dns";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { parseIpAddress } from "./ip-address.ts";

/** A target the guard refuses; `message` is safe to show to the webhook's owner and to store (e.g. "127.0.0.1 is a loopback address"). */
export class RefusedTargetError extends Error {
  override name = "RefusedTargetError";
}

// ipaddr.js range names in plain words; every other non-unicast range is "a reserved address".
const REASONS: Record<string, string> = {
  loopback: "a loopback address",
  private: "a private address",
  linkLocal: "a link-local address (cloud metadata lives there)",
  uniqueLocal: "a unique-local address",
  unspecified: "an unspecified address",
  carrierGradeNat: "a carrier-grade NAT address",
  multicast: "a multicast address",
  broadcast: "a broadcast address",
};

/** Why an address is refused, in plain words, or null when it is public. */
export function refusalOf(address: string): string | null {
  // ::ffff:127.0.0.1 is judged as 127.0.0.1; loose forms ("127.1") are no address.
  const parsed = parseIpAddress(address);
  if (!parsed) return "not an IP address";
  const range = parsed.range();
  if (range !== "unicast") return REASONS[range] ?? "a reserved address";
  // ::a.b.c.d (IPv4-compatible, deprecated) is "unicast" to ipaddr.js, but some stacks tunnel it to IPv4.
  if (
    parsed.kind() === "ipv6" &&
    parsed
      .toByteArray()
      .slice(0, 12)
      .every((byte) => byte === 0)
  ) {
    return "a reserved address";
  }
  return null;
}

/** True when the address (IPv4 or IPv6 text) may be called; anything unparsable is not. */
export function isPublicAddress(address: string): boolean {
  return refusalOf(address) === null;
}

/** The refusal for a host whose addresses are these, or null when every one of them is public. */
function refusalFor(host: string, addresses: readonly string[]): RefusedTargetError | null {
  if (addresses.length === 0) return new RefusedTargetError(`${host} could not be resolved.`);
  for (const address of addresses) {
    const reason = refusalOf(address);
    if (reason === null) continue;
    const subject = address === host ? `${address} is` : `${host} resolves to ${address},`;
    return new RefusedTargetError(`${subject} ${reason}.`);
  }
  return null;
}

function parseHttpUrl(url: string): URL {
  const parsed = URL.canParse(url) ? new URL(url) : undefined;
  if (parsed?.protocol !== "http:" && parsed?.protocol !== "https:") {
    throw new RefusedTargetError("The url must be an http or https URL.");
  }
  return parsed;
}

/** The URL's host without the brackets of an IPv6 literal ("[::1]" → "::1"). */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, "$1");
}

/** Checks a URL before it is saved: http(s) only, and unless allowPrivate, public addresses only. */
export async function checkTarget(url: string, options: { allowPrivate: boolean }): Promise<void> {
  const target = parseHttpUrl(url);
  if (options.allowPrivate) return;
  const host = hostOf(target);
  let addresses: string[];
  if (net.isIP(host) !== 0) addresses = [host];
  else {
    try {
      addresses = (await dns.promises.lookup(host, { all: true })).map((answer) => answer.address);
    } catch {
      addresses = [];
    }
  }
  const refused = refusalFor(host, addresses);
  if (refused) throw refused;
}

/**
 * A `lookup` for net.connect that refuses a name if ANY of its addresses is not public. net calls
 * it in two forms: with options.all (autoSelectFamily, Node 20's default) it wants an array of
 * {address, family}; without, one (address, family). Lookup errors (ENOTFOUND) pass through.
 */
export function guardedLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (error, answers) => {
    if (error) return callback(error, []);
    const refused = refusalFor(
      hostname,
      answers.map((answer) => answer.address),
    );
    if (refused) return callback(refused, []);
    if (options.all) return callback(null, answers);
    callback(null, answers[0]!.address, answers[0]!.family);
  });
}
type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

// Keep-alive pools. The guarded pair carries the lookup in its own options (an Agent spreads its
// options over each request's when it creates a socket), so no socket of theirs skips the check.
// allowPrivate gets its own pair: a pool is keyed by host:port only, and an unchecked socket must
// never be handed to a guarded request.
const POOL = { keepAlive: true, maxSockets: 50 };
const guardedAgents = {
  "http:": new http.Agent({ ...POOL, lookup: guardedLookup }),
  "https:": new https.Agent({ ...POOL, lookup: guardedLookup }),
};
const openAgents = { "http:": new http.Agent(POOL), "https:": new https.Agent(POOL) };

export type GuardedResponse = { status: number; body: string; truncated: boolean; durationMs: number };

/**
 * POSTs `body` to `url` with `headers`, never following a redirect. One timeout covers connect,
 * sending and the whole response (rejects with name "TimeoutError"); at most `maxResponseBytes`
 * of the body are read, then the socket is dropped. Unless allowPrivate, an IP-literal host is
 * checked before connecting and a name at connect time (net skips `lookup` for IP literals).
 */
export async function guardedPost(
  url: string,
  init: { headers: Record<string, string>; body: string },
  options: { timeoutMs: number; allowPrivate: boolean; maxResponseBytes: number },
): Promise<GuardedResponse> {
  const target = parseHttpUrl(url);
  const host = hostOf(target);
  if (!options.allowPrivate && net.isIP(host) !== 0) {
    const refused = refusalFor(host, [host]);
    if (refused) throw refused;
  }
  const protocol = target.protocol as "http:" | "https:";
  const started = performance.now();
  return new Promise<GuardedResponse>((resolve, reject) => {
    const request = (protocol === "https:" ? https : http).request(target, {
      method: "POST",
      headers: init.headers,
      agent: (options.allowPrivate ? openAgents : guardedAgents)[protocol],
      ...(options.allowPrivate ? {} : { lookup: guardedLookup }),
    });
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      outcome();
    };
    const timer = setTimeout(() => {
      const error = new Error(`No complete answer within ${options.timeoutMs} ms.`);
      error.name = "TimeoutError";
      settle(() => reject(error)); // before destroy(), whose 'error' events (the response's "aborted") lose
      request.destroy(error);
    }, options.timeoutMs);
    request.on("error", (error) => settle(() => reject(error)));
    request.on("response", (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = (truncated: boolean) =>
        settle(() =>
          resolve({
            status: response.statusCode ?? 0,
            body: Buffer.concat(chunks).toString("utf8"),
            truncated,
            durationMs: Math.round(performance.now() - started),
          }),
        );
      response.on("data", (chunk: Buffer) => {
        if (settled) return;
        const room = options.maxResponseBytes - size;
        chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
        size += Math.min(chunk.length, room);
        if (chunk.length <= room) return;
        finish(true);
        response.destroy(); // the socket goes too: the rest is never read
      });
      response.on("end", () => finish(false));
      response.on("error", (error) => settle(() => reject(error)));
    });
    request.end(init.body);
  });
}
