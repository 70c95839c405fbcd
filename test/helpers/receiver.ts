// A webhook receiver for tests and benchmarks: a real HTTP server on 127.0.0.1 that records
// every request (headers and exact body) and answers 200 (after `delayMs`, when given), unless
// told to `fail(status, {times, body})`, to `hang()` (never answer), or to answer another body. `verify` checks a request's
// X-Service-Signature against a secret as a receiver would.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { FakeMode } from "./fake-mode.ts";
import { until } from "./wait.ts";

export type ReceivedRequest = { path: string; headers: IncomingHttpHeaders; body: string; json: any };
export type ReceiverFailOptions = { times?: number; body?: string };

export type Receiver = {
  /** The base URL; add a path of your own. */
  url: string;
  requests: ReceivedRequest[];
  fail(status: number, options?: ReceiverFailOptions): void;
  hang(): void;
  recover(): void;
  /** The answer's body from now on (e.g. a big one). */
  answerWith(body: string): void;
  /** Resolves with the requests once at least `count` arrived whose path starts with `path`. */
  waitFor(count: number, path?: string, timeoutMs?: number): Promise<ReceivedRequest[]>;
  /** Resolves with the first request to `path` whose body contains `text` (other deliveries may come first). */
  waitForBody(path: string, text: string, timeoutMs?: number): Promise<ReceivedRequest>;
  stop(): Promise<void>;
};

export async function startReceiver(options: { delayMs?: number } = {}): Promise<Receiver> {
  const mode = new FakeMode<ReceiverFailOptions>();
  const requests: ReceivedRequest[] = [];
  let answer = '{"ok":true}';
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", async () => {
      if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
      const body = Buffer.concat(chunks).toString("utf8");
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      requests.push({ path: request.url ?? "/", headers: request.headers, body, json });
      const next = mode.next();
      if (next === "hang") return;
      if (next) {
        response.writeHead(next.status, { "content-type": "text/plain" });
        return response.end(next.options.body ?? `failing with ${next.status}`);
      }
      response.writeHead(200, { "content-type": "application/json" });
      response.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    fail: (status, options) => mode.fail(status, options),
    hang: () => mode.hang(),
    recover: () => mode.recover(),
    answerWith: (body) => {
      answer = body;
    },
    waitFor: (count, path = "/", timeoutMs = 10_000) =>
      until(
        () => {
          const matching = requests.filter((request) => request.path.startsWith(path));
          return matching.length >= count ? matching : undefined;
        },
        `${count} webhook deliveries to ${path}`,
        timeoutMs,
      ),
    waitForBody: (path, text, timeoutMs = 10_000) =>
      until(
        () => requests.find((request) => request.path.startsWith(path) && request.body.includes(text)),
        `a webhook delivery to ${path} containing ${JSON.stringify(text)}`,
        timeoutMs,
      ),
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Whether a request's X-Service-Signature (`t=…,v1=…`) is the HMAC-SHA256 of `<t>.<body>` under `secret`. */
export function verify(request: ReceivedRequest, secret: string): boolean {
  const header = String(request.headers["x-service-signature"] ?? "");
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!match) return false;
  const expected = createHmac("sha256", secret).update(`${match[1]}.${request.body}`).digest();
  return timingSafeEqual(expected, Buffer.from(match[2]!, "hex"));
}
