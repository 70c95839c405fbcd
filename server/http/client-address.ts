// The client's address, decided in one place for every door (REST, tRPC over HTTP and SSE,
// the WebSocket upgrade, file routes, inbound webhooks), every per-address limit, the request
// log and the loopback-only gates (/metrics without METRICS_TOKEN, the CLI's admin hand-over).
//
// TRUST_PROXY (contract.md, configuration table): unset, the address is the socket's and
// X-Forwarded-For is ignored. Set, a request whose peer is trusted is taken from its proxy: the
// X-Forwarded-For entries are walked from the right, trusted ones skipped, and the first entry
// that is not trusted is the client. An entry that is not an address ends the walk (the address
// is then the last good one seen, or the peer's); when every entry is trusted, the leftmost.
// A trusted peer that sends no X-Forwarded-For at all is its own client (as Express and Laravel
// decide): a proxy must set the header, or every visitor it passes is the proxy itself.
//
// Addresses are compared and returned unmapped: `::ffff:10.0.0.7` is 10.0.0.7, so it matches
// IPv4 entries and ranges and counts against the same budget as the plain form.
import type { IncomingMessage } from "node:http";
import ipaddr from "ipaddr.js";
import { parseIpAddress as parseAddress, type IpAddress as Address } from "../ip-address.ts";

/** The trusted proxies as parsed ranges, compiled once from the configuration's CIDR strings. */
export type TrustedRanges = readonly (readonly [Address, number])[];

/** The address used when the socket has none left (it closed before anyone asked). */
export const UNKNOWN_ADDRESS = "unknown";

/**
 * `127.0.0.0/8`, `::1/128`, `fd00::/8` → parsed ranges. An IPv4-mapped IPv6 range
 * (`::ffff:10.0.0.0/104`) becomes its IPv4 range, since addresses are matched unmapped.
 */
export function compileTrustedRanges(cidrs: readonly string[]): TrustedRanges {
  return cidrs.map((cidr) => {
    const [range, bits] = ipaddr.parseCIDR(cidr);
    if (range.kind() === "ipv6" && (range as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
      return [(range as ipaddr.IPv6).toIPv4Address(), bits - 96] as const;
    }
    return [range, bits] as const;
  });
}

const compiled = new WeakMap<readonly string[], TrustedRanges>();

/** The configuration's trusted ranges (config.trustProxy), compiled on first use and kept. */
export function trustedRangesOf(config: { trustProxy: readonly string[] }): TrustedRanges {
  let ranges = compiled.get(config.trustProxy);
  if (!ranges) {
    ranges = compileTrustedRanges(config.trustProxy);
    compiled.set(config.trustProxy, ranges);
  }
  return ranges;
}

/**
 * One X-Forwarded-For entry as an address: surrounding spaces ignored, a port dropped
 * (`1.2.3.4:5678`, `[2001:db8::1]:443`), brackets removed (`[2001:db8::1]`).
 */
function parseForwardedEntry(entry: string): Address | undefined {
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(entry);
  if (bracketed) return parseAddress(bracketed[1]!);
  // A colon after a dotted quad is a port; any other colon belongs to an IPv6 address.
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(entry);
  return parseAddress(withPort ? withPort[1]! : entry);
}

function isTrusted(address: Address, trusted: TrustedRanges): boolean {
  return trusted.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits));
}

/**
 * The client address of a request (see the top of this file): `peer` is the socket's address,
 * `forwardedFor` the X-Forwarded-For header (several headers are one list, joined with ",").
 * Empty list elements (`a,,b`, a trailing comma) are skipped, as HTTP lists allow. The answer is
 * the address as text, IPv4-mapped IPv6 unmapped; `unknown` when the peer is unknown and no
 * forwarded entry decides.
 */
export function clientAddress(
  peer: string | undefined,
  forwardedFor: string | string[] | undefined,
  trusted: TrustedRanges,
): string {
  return decide(peerOf(peer), forwardedFor, trusted);
}

/** A peer's address, parsed, and as the answer gives it. */
type Peer = { address: Address | undefined; text: string };

function peerOf(peer: string | undefined): Peer {
  const address = peer === undefined ? undefined : parseAddress(peer);
  return { address, text: address?.toString() ?? peer ?? UNKNOWN_ADDRESS };
}

function decide(
  { address: peerAddress, text: peerText }: Peer,
  forwardedFor: string | string[] | undefined,
  trusted: TrustedRanges,
): string {
  if (trusted.length === 0 || !peerAddress || !isTrusted(peerAddress, trusted)) return peerText;
  if (forwardedFor === undefined) return peerText;
  const entries = (Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor)
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  let decided = peerText;
  for (let index = entries.length - 1; index >= 0; index--) {
    const address = parseForwardedEntry(entries[index]!);
    if (!address) return decided;
    decided = address.toString();
    if (!isTrusted(address, trusted)) return decided;
  }
  return decided;
}

/** Decided once per request: the request log, the context and the routes all read this one. */
const decidedByRequest = new WeakMap<IncomingMessage, { trusted: TrustedRanges; address: string }>();
/**
 * A connection's peer, parsed once for all the requests a kept-alive connection carries. Without
 * trusted proxies only its text is kept (a WebSocket's socket lives as long as the connection,
 * and a parsed address is a few hundred bytes).
 */
const peersBySocket = new WeakMap<object, Peer>();

/** The client address of this request under these trusted ranges (computed once per request). */
export function requestClientAddress(req: IncomingMessage, trusted: TrustedRanges): string {
  const known = decidedByRequest.get(req);
  if (known && known.trusted === trusted) return known.address;
  const { socket } = req;
  let peer = socket ? peersBySocket.get(socket) : undefined;
  if (!peer || (trusted.length > 0 && !peer.address)) {
    peer = peerOf(socket?.remoteAddress);
    // A closed socket has no address left: not kept, so that a later look is not stuck with it.
    if (socket && peer.address)
      peersBySocket.set(socket, trusted.length > 0 ? peer : { address: undefined, text: peer.text });
  }
  const address = decide(peer, req.headers["x-forwarded-for"], trusted);
  decidedByRequest.set(req, { trusted, address });
  return address;
}

/** Loopback: 127.0.0.0/8 and ::1 (`::ffff:127.x.y.z` too). Anything unparsable is not. */
export function isLoopbackAddress(address: string): boolean {
  return parseAddress(address)?.range() === "loopback";
}
