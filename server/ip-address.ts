// IP address text, read one way for every caller (the SSRF guard, the client address).
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

export type IpAddress = ipaddr.IPv4 | ipaddr.IPv6;

/**
 * Strict address text only, unmapped (`::ffff:127.0.0.1` is 127.0.0.1); undefined when it is
 * none. net.isIP first: ipaddr.js also reads loose forms such as "127.1" or "0x7f.0.0.1" that
 * are not address text.
 */
export function parseIpAddress(text: string): IpAddress | undefined {
  if (isIP(text) === 0) return undefined;
  try {
    return ipaddr.process(text);
  } catch {
    return undefined;
  }
}
