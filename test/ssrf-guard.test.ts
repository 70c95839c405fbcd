// The SSRF guard for outbound webhooks (server/ssrf-guard.ts): which addresses are refused,
// the check when a URL is saved, and the guarded POST: refused targets are never connected to
// (the local receivers below count every connection and request), the connect-time DNS check,
// no redirects, one timeout, a bounded response body and keep-alive reuse.
import dns from "node:dns";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  checkTarget,
  guardedLookup,
  guardedPost,
  isPublicAddress,
  refusalOf,
  RefusedTargetError,
} from "../server/ssrf-guard.ts";

type Local = {
  port: number;
  requests: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[];
  connections: number;
};

const servers: http.Server[] = [];

/** A tiny receiver on 127.0.0.1 that counts connections and records requests before `answer` runs. */
async function startLocal(answer: (response: http.ServerResponse) => void): Promise<Local> {
  const local: Local = { port: 0, requests: [], connections: 0 };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      local.requests.push({ method: request.method!, url: request.url!, headers: request.headers, body });
      answer(response);
    });
  });
  server.on("connection", () => local.connections++);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  local.port = (server.address() as AddressInfo).port;
  return local;
}

afterEach(async () => {
  vi.restoreAllMocks();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Makes dns.lookup (the callback form, used at connect time) answer these names with these addresses. */
function fakeDns(answers: Record<string, string[]>): void {
  const real = dns.lookup;
  vi.spyOn(dns, "lookup").mockImplementation(((hostname: string, options: never, callback: never) => {
    const addresses = answers[hostname];
    if (addresses === undefined) return real(hostname, options, callback);
    const found = addresses.map((address) => ({ address, family: net.isIP(address) }));
    process.nextTick(() => (callback as (error: null, found: dns.LookupAddress[]) => void)(null, found));
  }) as typeof dns.lookup);
}

const post = { headers: { "content-type": "application/json" }, body: '{"event":"ping"}' };
const open = { timeoutMs: 5_000, allowPrivate: true, maxResponseBytes: 1024 };
const guarded = { ...open, allowPrivate: false };

describe("isPublicAddress and refusalOf", () => {
  const refused = [
    "127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd00:ec2::254",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "224.0.0.1",
  ];
  it.each(refused)("refuses %s", (address) => {
    expect(isPublicAddress(address)).toBe(false);
    expect(refusalOf(address)).toEqual(expect.any(String));
  });

  it.each(["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111"])("lets %s through", (address) => {
    expect(isPublicAddress(address)).toBe(true);
    expect(refusalOf(address)).toBeNull();
  });

  it("says why in plain words, judging an IPv4-mapped address as its IPv4 address", () => {
    expect(refusalOf("127.0.0.1")).toBe("a loopback address");
    expect(refusalOf("::ffff:127.0.0.1")).toBe("a loopback address");
    expect(refusalOf("::ffff:10.0.0.1")).toBe("a private address");
    expect(refusalOf("169.254.169.254")).toBe("a link-local address (cloud metadata lives there)");
    expect(refusalOf("fd00:ec2::254")).toBe("a unique-local address");
    expect(refusalOf("100.64.0.1")).toBe("a carrier-grade NAT address");
    expect(refusalOf("::")).toBe("an unspecified address");
    expect(refusalOf("224.0.0.1")).toBe("a multicast address");
  });

  it("refuses text that is not an IP address, loose IPv4 forms included", () => {
    for (const text of ["", "localhost", "127.1", "2130706433", "1.2.3.4.5", "::g"]) {
      expect(isPublicAddress(text)).toBe(false);
    }
  });
});

describe("checkTarget", () => {
  const privateUrls = [
    "http://127.0.0.1/",
    "http://10.0.0.5/",
    "http://169.254.169.254/latest/meta-data",
    "http://[::1]:8080/",
    "http://localhost/",
  ];
  it.each(privateUrls)("refuses %s, and lets it through with allowPrivate", async (url) => {
    await expect(checkTarget(url, { allowPrivate: false })).rejects.toThrow(RefusedTargetError);
    await expect(checkTarget(url, { allowPrivate: true })).resolves.toBeUndefined();
  });

  it("says what the address is", async () => {
    await expect(checkTarget("http://127.0.0.1/", { allowPrivate: false })).rejects.toThrow(
      "127.0.0.1 is a loopback address.",
    );
    await expect(checkTarget("http://[::1]:8080/", { allowPrivate: false })).rejects.toThrow(
      "::1 is a loopback address.",
    );
    await expect(checkTarget("http://localhost/", { allowPrivate: false })).rejects.toThrow(
      /^localhost resolves to (127\.0\.0\.1|::1), a loopback address\.$/,
    );
  });

  it("refuses anything but http and https, even with allowPrivate", async () => {
    for (const url of ["ftp://example.com/", "file:///etc/passwd", "not a url"]) {
      for (const allowPrivate of [false, true]) {
        await expect(checkTarget(url, { allowPrivate })).rejects.toThrow(
          new RefusedTargetError("The url must be an http or https URL."),
        );
      }
    }
  });

  it("refuses a name that resolves to a private address among public ones, or does not resolve", async () => {
    vi.spyOn(dns.promises, "lookup").mockImplementation((async (hostname: string) => {
      if (hostname === "mixed.example") {
        return [
          { address: "93.184.216.34", family: 4 },
          { address: "10.0.0.1", family: 4 },
        ];
      }
      if (hostname === "public.example") return [{ address: "93.184.216.34", family: 4 }];
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    }) as never);
    await expect(checkTarget("https://mixed.example/hook", { allowPrivate: false })).rejects.toThrow(
      "mixed.example resolves to 10.0.0.1, a private address.",
    );
    await expect(checkTarget("https://nowhere.example/", { allowPrivate: false })).rejects.toThrow(
      "nowhere.example could not be resolved.",
    );
    await expect(checkTarget("https://public.example/hook", { allowPrivate: false })).resolves.toBeUndefined();
  });
});

describe("guardedLookup", () => {
  const lookup = (hostname: string, options: dns.LookupOptions) =>
    new Promise<{ error: Error | null; address: unknown; family: unknown }>((resolve) =>
      guardedLookup(hostname, options, (error, address, family) => resolve({ error, address, family })),
    );

  it("refuses localhost in both callback forms", async () => {
    for (const options of [{ all: true }, {}]) {
      const { error } = await lookup("localhost", options);
      expect(error).toBeInstanceOf(RefusedTargetError);
      expect(error!.message).toMatch(/^localhost resolves to .*, a loopback address\.$/);
    }
  });

  it("answers a public address as an array with all, as (address, family) without", async () => {
    expect(await lookup("8.8.8.8", { all: true })).toEqual({
      error: null,
      address: [{ address: "8.8.8.8", family: 4 }],
      family: undefined,
    });
    expect(await lookup("8.8.8.8", {})).toEqual({ error: null, address: "8.8.8.8", family: 4 });
  });

  it("refuses a name if any of its addresses is not public", async () => {
    fakeDns({ "mixed.example": ["93.184.216.34", "127.0.0.1"] });
    const { error } = await lookup("mixed.example", { all: true });
    expect(error?.message).toBe("mixed.example resolves to 127.0.0.1, a loopback address.");
  });

  it.each([true, false])(
    "is what net.connect uses (autoSelectFamily %s): localhost is refused, nothing connects",
    async (autoSelectFamily) => {
      const local = await startLocal((response) => response.end());
      const socket = net.connect({ host: "localhost", port: local.port, lookup: guardedLookup, autoSelectFamily });
      const error = await new Promise<Error>((resolve) => socket.on("error", resolve));
      expect(error).toBeInstanceOf(RefusedTargetError);
      expect(local.connections).toBe(0);
    },
  );

  it.each([true, false])(
    "hands net a public address in the form it asked for (autoSelectFamily %s)",
    async (autoSelectFamily) => {
      fakeDns({ "hooks.example": ["93.184.216.34"] });
      const socket = net.connect({ host: "hooks.example", port: 443, lookup: guardedLookup, autoSelectFamily });
      // Destroyed on 'lookup', before net connects: no packet leaves the machine.
      const [error, address, family] = await new Promise<unknown[]>((resolve) =>
        socket.once("lookup", (...args: unknown[]) => {
          socket.destroy();
          resolve(args);
        }),
      );
      expect({ error, address, family }).toEqual({ error: null, address: "93.184.216.34", family: 4 });
    },
  );
});

describe("guardedPost", () => {
  it("refuses a private IP literal and a name that resolves to loopback; the receiver gets nothing", async () => {
    const local = await startLocal((response) => response.end("ok"));
    for (const url of [
      `http://127.0.0.1:${local.port}/`,
      `http://localhost:${local.port}/`,
      `https://localhost:${local.port}/`,
      `http://[::ffff:127.0.0.1]:${local.port}/`,
    ]) {
      await expect(guardedPost(url, post, guarded)).rejects.toThrow(RefusedTargetError);
    }
    expect(local.requests).toHaveLength(0);
    expect(local.connections).toBe(0);
  });

  it("checks the name again at connect time, so a DNS answer that changed after checkTarget is caught", async () => {
    const local = await startLocal((response) => response.end("ok"));
    vi.spyOn(dns.promises, "lookup").mockResolvedValue([{ address: "93.184.216.34", family: 4 }] as never);
    await checkTarget(`http://rebind.example:${local.port}/`, { allowPrivate: false });
    fakeDns({ "rebind.example": ["127.0.0.1"] });
    await expect(guardedPost(`http://rebind.example:${local.port}/`, post, guarded)).rejects.toThrow(
      "rebind.example resolves to 127.0.0.1, a loopback address.",
    );
    expect(local.connections).toBe(0);
  });

  it("never hands a guarded request a pooled socket opened with allowPrivate", async () => {
    const local = await startLocal((response) => response.end("ok"));
    const url = `http://localhost:${local.port}/`;
    expect((await guardedPost(url, post, open)).status).toBe(200);
    await expect(guardedPost(url, post, guarded)).rejects.toThrow(RefusedTargetError);
    expect(local.requests).toHaveLength(1);
  });

  it("returns the status and body of a 200", async () => {
    const local = await startLocal((response) =>
      response.writeHead(200, { "content-type": "text/plain" }).end("thanks"),
    );
    const result = await guardedPost(`http://127.0.0.1:${local.port}/hook`, post, open);
    expect(result).toEqual({ status: 200, body: "thanks", truncated: false, durationMs: expect.any(Number) });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
  });

  it("sends the headers and the exact body", async () => {
    const local = await startLocal((response) => response.end());
    const body = '{"text":"héllo ✓ 😀","n":1}';
    await guardedPost(
      `http://127.0.0.1:${local.port}/in?x=1`,
      { headers: { "content-type": "application/json", "x-signature": "t=1,v1=abc" }, body },
      open,
    );
    expect(local.requests).toHaveLength(1);
    const [received] = local.requests;
    expect(received).toMatchObject({ method: "POST", url: "/in?x=1", body });
    expect(received!.headers["content-type"]).toBe("application/json");
    expect(received!.headers["x-signature"]).toBe("t=1,v1=abc");
    expect(received!.headers["content-length"]).toBe(String(Buffer.byteLength(body)));
  });

  it("returns a redirect as it is and does not follow it", async () => {
    const elsewhere = await startLocal((response) => response.end("followed"));
    const local = await startLocal((response) =>
      response.writeHead(302, { location: `http://127.0.0.1:${elsewhere.port}/` }).end(),
    );
    const result = await guardedPost(`http://127.0.0.1:${local.port}/`, post, open);
    expect(result.status).toBe(302);
    expect(elsewhere.requests).toHaveLength(0);
    expect(elsewhere.connections).toBe(0);
  });

  it("rejects with a TimeoutError when the receiver never answers", async () => {
    const local = await startLocal(() => {});
    const started = performance.now();
    const error = await guardedPost(`http://127.0.0.1:${local.port}/`, post, { ...open, timeoutMs: 300 }).catch(
      (caught: unknown) => caught,
    );
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toBe("TimeoutError");
    expect(elapsed).toBeGreaterThanOrEqual(280);
    expect(elapsed).toBeLessThan(2_000);
  });

  it("rejects with a TimeoutError when the body stalls after the headers", async () => {
    const local = await startLocal((response) => {
      response.writeHead(200);
      response.write("partial");
    });
    const error = await guardedPost(`http://127.0.0.1:${local.port}/`, post, { ...open, timeoutMs: 300 }).catch(
      (caught: unknown) => caught,
    );
    expect((error as Error).name).toBe("TimeoutError");
  });

  it("reads a 2 MB body only up to maxResponseBytes", async () => {
    const local = await startLocal((response) => response.end("a".repeat(2 * 1024 * 1024)));
    const result = await guardedPost(`http://127.0.0.1:${local.port}/`, post, open);
    expect(result.status).toBe(200);
    expect(result.truncated).toBe(true);
    expect(result.body).toBe("a".repeat(1024));
  });

  it("drops the connection of an endless body once maxResponseBytes is passed", async () => {
    let closed!: Promise<void>;
    const local = await startLocal((response) => {
      closed = new Promise((resolve) => response.socket!.on("close", resolve));
      const chunk = "x".repeat(16 * 1024);
      const more = () => {
        while (!response.destroyed && response.write(chunk));
        if (!response.destroyed) response.once("drain", more);
      };
      more();
    });
    const result = await guardedPost(`http://127.0.0.1:${local.port}/`, post, open);
    expect(result).toMatchObject({ status: 200, truncated: true, body: "x".repeat(1024) });
    await closed; // the client hung up: without that the stream would never end and this test times out
  }, 5_000);

  it("reuses one keep-alive connection for sequential posts", async () => {
    const local = await startLocal((response) => response.end("ok"));
    for (let i = 0; i < 3; i++) {
      expect((await guardedPost(`http://127.0.0.1:${local.port}/`, post, open)).status).toBe(200);
    }
    expect(local.requests).toHaveLength(3);
    expect(local.connections).toBe(1);
  });

  it("refuses a URL that is not http or https", async () => {
    await expect(guardedPost("ftp://example.com/", post, open)).rejects.toThrow(
      "The url must be an http or https URL.",
    );
  });
});
