// The one rule for the client address (server/http/client-address.ts), as the contract's
// TRUST_PROXY row states it: unset, the socket's address and X-Forwarded-For ignored; set, the
// rightmost X-Forwarded-For entry that is not trusted, a non-address entry ending the walk (the
// last good one seen, or the peer's), the leftmost when every entry is trusted.
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../server/config.ts";
import {
  clientAddress,
  compileTrustedRanges,
  isLoopbackAddress,
  requestClientAddress,
  trustedRangesOf,
} from "../server/http/client-address.ts";

const NONE = compileTrustedRanges([]);
/** What TRUST_PROXY=loopback configures. */
const LOOPBACK = compileTrustedRanges(loadConfig({ TRUST_PROXY: "loopback" }).trustProxy);
const PROXIES = compileTrustedRanges(loadConfig({ TRUST_PROXY: "10.0.0.5, 192.168.0.0/16, fd00::/8" }).trustProxy);

describe("TRUST_PROXY unset", () => {
  it("is the socket's address, whatever X-Forwarded-For says", () => {
    expect(clientAddress("127.0.0.1", undefined, NONE)).toBe("127.0.0.1");
    expect(clientAddress("127.0.0.1", "203.0.113.9", NONE)).toBe("127.0.0.1");
    expect(clientAddress("198.51.100.4", "127.0.0.1", NONE)).toBe("198.51.100.4");
    expect(clientAddress("2001:db8::7", ["203.0.113.9", "10.0.0.1"], NONE)).toBe("2001:db8::7");
  });

  it("unmaps an IPv4-mapped peer and says unknown when the socket has no address", () => {
    expect(clientAddress("::ffff:198.51.100.4", undefined, NONE)).toBe("198.51.100.4");
    expect(clientAddress(undefined, "203.0.113.9", NONE)).toBe("unknown");
  });
});

describe("TRUST_PROXY set", () => {
  it("ignores the header of a peer that is not trusted", () => {
    expect(clientAddress("198.51.100.4", "203.0.113.9", LOOPBACK)).toBe("198.51.100.4");
    expect(clientAddress("10.0.0.6", "203.0.113.9", PROXIES)).toBe("10.0.0.6");
  });

  it("takes a trusted peer's single forwarded entry", () => {
    expect(clientAddress("127.0.0.1", "203.0.113.9", LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("::1", "203.0.113.9", LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("127.0.0.53", "203.0.113.9", LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("10.0.0.5", "203.0.113.9", PROXIES)).toBe("203.0.113.9");
    expect(clientAddress("192.168.7.1", "203.0.113.9", PROXIES)).toBe("203.0.113.9");
  });

  it("is the rightmost entry that is not trusted: what the client wrote on the left is not believed", () => {
    // A client sending `X-Forwarded-For: 1.1.1.1` through the proxy: the proxy appends the real one.
    expect(clientAddress("127.0.0.1", "1.1.1.1, 203.0.113.9", LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("127.0.0.1", "127.0.0.1, 203.0.113.9", LOOPBACK)).toBe("203.0.113.9");
    // A trusted hop appended after the client is skipped.
    expect(clientAddress("127.0.0.1", "203.0.113.9, 127.0.0.1", LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("10.0.0.5", "1.1.1.1, 203.0.113.9, 192.168.1.1, 10.0.0.5", PROXIES)).toBe("203.0.113.9");
  });

  it("is the leftmost entry when every entry is trusted", () => {
    expect(clientAddress("127.0.0.1", "127.0.0.2, 127.0.0.3", LOOPBACK)).toBe("127.0.0.2");
    expect(clientAddress("10.0.0.5", "192.168.1.1, 10.0.0.5", PROXIES)).toBe("192.168.1.1");
  });

  it("is the peer's own address when a trusted peer sends no entry", () => {
    expect(clientAddress("127.0.0.1", undefined, LOOPBACK)).toBe("127.0.0.1");
    expect(clientAddress("127.0.0.1", "", LOOPBACK)).toBe("127.0.0.1");
    expect(clientAddress("127.0.0.1", " , ", LOOPBACK)).toBe("127.0.0.1");
    expect(clientAddress("::ffff:10.0.0.5", undefined, PROXIES)).toBe("10.0.0.5");
  });

  it("ends the walk at an entry that is not an address: the last good one seen, or the peer's", () => {
    expect(clientAddress("127.0.0.1", "garbage", LOOPBACK)).toBe("127.0.0.1");
    expect(clientAddress("127.0.0.1", "203.0.113.9, garbage", LOOPBACK)).toBe("127.0.0.1");
    expect(clientAddress("127.0.0.1", "203.0.113.9, unknown, 127.0.0.2", LOOPBACK)).toBe("127.0.0.2");
    expect(clientAddress("127.0.0.1", "garbage, 203.0.113.9", LOOPBACK)).toBe("203.0.113.9");
    // Loose forms ipaddr.js would read are not address text.
    for (const loose of ["127.1", "2130706433", "0x7f.0.0.1", "1.2.3.4.5", "256.1.1.1", "1.2.3.4:port", "[::1"])
      expect(clientAddress("10.0.0.5", `203.0.113.9, ${loose}`, PROXIES), loose).toBe("10.0.0.5");
  });

  it("drops a port and removes brackets", () => {
    expect(clientAddress("127.0.0.1", "203.0.113.9:5678", LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("127.0.0.1", "[2001:db8::1]:443", LOOPBACK)).toBe("2001:db8::1");
    expect(clientAddress("127.0.0.1", "[2001:db8::1]", LOOPBACK)).toBe("2001:db8::1");
    expect(clientAddress("127.0.0.1", "203.0.113.9, 127.0.0.1:80", LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("127.0.0.1", "203.0.113.9, [::1]:80", LOOPBACK)).toBe("203.0.113.9");
    // An unbracketed IPv6 address keeps its last group: it is not a port.
    expect(clientAddress("127.0.0.1", "2001:db8::1:443", LOOPBACK)).toBe("2001:db8::1:443");
  });

  it("reads IPv6, and answers it in its canonical form", () => {
    expect(clientAddress("fd00::1", "2001:DB8:0:0:0:0:0:7", PROXIES)).toBe("2001:db8::7");
    expect(clientAddress("fd12:3456::1", "2001:db8::7, fd00::9", PROXIES)).toBe("2001:db8::7");
    expect(clientAddress("fe80::1", "2001:db8::7", PROXIES)).toBe("fe80::1");
    expect(clientAddress("::1", "2001:db8::7, ::1", LOOPBACK)).toBe("2001:db8::7");
  });

  it("matches ::ffff:a.b.c.d, as peer or entry, against IPv4 entries and ranges", () => {
    expect(clientAddress("::ffff:127.0.0.1", "203.0.113.9", LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("::ffff:10.0.0.5", "203.0.113.9", PROXIES)).toBe("203.0.113.9");
    expect(clientAddress("::ffff:192.168.3.4", "203.0.113.9", PROXIES)).toBe("203.0.113.9");
    expect(clientAddress("10.0.0.5", "203.0.113.9, ::ffff:192.168.3.4", PROXIES)).toBe("203.0.113.9");
    expect(clientAddress("10.0.0.5", "::ffff:203.0.113.9", PROXIES)).toBe("203.0.113.9");
    expect(clientAddress("::ffff:10.0.0.6", "203.0.113.9", PROXIES)).toBe("10.0.0.6");
    // A range written mapped matches the plain form too.
    const mapped = compileTrustedRanges(["::ffff:10.0.0.0/104"]);
    expect(clientAddress("10.1.2.3", "203.0.113.9", mapped)).toBe("203.0.113.9");
  });

  it("reads several X-Forwarded-For headers as one list, in order", () => {
    expect(clientAddress("127.0.0.1", ["1.1.1.1", "203.0.113.9, 127.0.0.1"], LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("127.0.0.1", ["203.0.113.9", "127.0.0.2"], LOOPBACK)).toBe("203.0.113.9");
    expect(clientAddress("127.0.0.1", ["203.0.113.9", "198.51.100.4"], LOOPBACK)).toBe("198.51.100.4");
    expect(clientAddress("127.0.0.1", [], LOOPBACK)).toBe("127.0.0.1");
  });

  it("skips empty list elements and spaces, as HTTP lists allow", () => {
    expect(clientAddress("127.0.0.1", " 203.0.113.9 ,, 127.0.0.1 ,", LOOPBACK)).toBe("203.0.113.9");
  });
});

describe("requestClientAddress", () => {
  const request = (remoteAddress: string | undefined, forwardedFor?: string) =>
    ({
      socket: { remoteAddress },
      headers: forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor },
    }) as unknown as IncomingMessage;

  it("reads the socket and the header, and decides once per request", () => {
    const req = request("127.0.0.1", "203.0.113.9");
    expect(requestClientAddress(req, LOOPBACK)).toBe("203.0.113.9");
    // The socket closing (its address gone) changes nothing once decided.
    (req.socket as { remoteAddress?: string }).remoteAddress = undefined;
    expect(requestClientAddress(req, LOOPBACK)).toBe("203.0.113.9");
    expect(requestClientAddress(request("127.0.0.1", "203.0.113.9"), NONE)).toBe("127.0.0.1");
  });

  it("compiles a configuration's ranges once", () => {
    const config = loadConfig({ TRUST_PROXY: "loopback" });
    expect(trustedRangesOf(config)).toBe(trustedRangesOf(config));
    expect(requestClientAddress(request("::1", "2001:db8::7"), trustedRangesOf(config))).toBe("2001:db8::7");
  });
});

describe("isLoopbackAddress", () => {
  it("is 127.0.0.0/8, ::1 and their mapped forms; nothing else", () => {
    for (const address of ["127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1"])
      expect(isLoopbackAddress(address), address).toBe(true);
    for (const address of ["10.0.0.1", "203.0.113.9", "::", "0.0.0.0", "::ffff:10.0.0.1", "unknown", "127.1", ""])
      expect(isLoopbackAddress(address), address).toBe(false);
  });
});
