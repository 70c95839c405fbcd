// The WebSocket door at /trpc under abuse: frames broken at the byte level (spoken over a bare
// TCP socket, handshake included), protocol garbage on a signed-in socket, a flood of
// subscriptions on one connection, a flood of connections that never sign in, and connection
// params that cannot be used. After each, the server must still be up and serving: /healthz
// answers 200, and a fresh signed-in socket runs a query. A crash would end the process in
// production; here the server runs inside the test process, so an uncaught exception is
// recorded (uncaughtExceptionMonitor) and fails the test that caused it.
import { createHash, randomBytes } from "node:crypto";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CONNECTION_PARAMS_TIMEOUT_MS,
  MAX_BATCH,
  MAX_PAYLOAD_BYTES,
  MAX_SUBSCRIPTIONS,
} from "../server/http/trpc-websocket.ts";
import { clientFrames } from "../server/http/trpc-ws-protocol.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { RawSocket, type Frame } from "./helpers/raw-socket.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();

/** Exceptions and rejections nothing handled: each would have ended a production process. */
const crashes: unknown[] = [];
const recordCrash = (error: unknown) => crashes.push(error);
beforeAll(() => {
  process.on("uncaughtExceptionMonitor", recordCrash);
  process.on("unhandledRejection", recordCrash);
});
afterAll(() => {
  process.off("uncaughtExceptionMonitor", recordCrash);
  process.off("unhandledRejection", recordCrash);
});

/** What an operator checks after an attack: the process is up, answers /healthz, and serves a signed-in socket. */
async function expectServing(user: RegisteredUser): Promise<void> {
  expect(crashes.splice(0)).toEqual([]);
  const health = await fetch(`${ctx.server.url}/healthz`);
  expect(health.status).toBe(200);
  const raw = await RawSocket.signedIn(ctx.server.url, user.token);
  try {
    raw.request("alive", "query", "me.get");
    const answer = await raw.next((frame) => frame.id === "alive");
    expect(answer.result?.data).toMatchObject({ id: user.id, email: user.email });
  } finally {
    raw.terminate();
  }
}

/** A deterministic PRNG (mulberry32), so that the random frames are the same on every run. */
function prng(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (below: number) => Math.floor(next() * below),
    bytes: (length: number) => Buffer.from(Array.from({ length }, () => Math.floor(next() * 256))),
  };
}

const OPCODES = { continuation: 0x0, text: 0x1, binary: 0x2, close: 0x8, ping: 0x9, pong: 0xa } as const;

type FrameSpec = {
  fin?: boolean;
  rsv1?: boolean;
  rsv2?: boolean;
  rsv3?: boolean;
  opcode: number;
  payload?: Buffer | string;
  /** Clients must mask; false sends the payload in the clear. */
  masked?: boolean;
  maskKey?: Buffer;
  /** The length the header announces, when it should lie about the payload. */
  announcedLength?: bigint;
};

/** One WebSocket frame as a client puts it on the wire (RFC 6455 §5.2), valid or not. */
function wireFrame(spec: FrameSpec): Buffer {
  const payload = typeof spec.payload === "string" ? Buffer.from(spec.payload) : (spec.payload ?? Buffer.alloc(0));
  const masked = spec.masked ?? true;
  const length = spec.announcedLength ?? BigInt(payload.length);
  const first =
    ((spec.fin ?? true) ? 0x80 : 0) |
    (spec.rsv1 ? 0x40 : 0) |
    (spec.rsv2 ? 0x20 : 0) |
    (spec.rsv3 ? 0x10 : 0) |
    (spec.opcode & 0x0f);
  let header: Buffer;
  if (length < 126n) header = Buffer.from([first, (masked ? 0x80 : 0) | Number(length)]);
  else if (length < 65536n) {
    header = Buffer.alloc(4);
    header[0] = first;
    header[1] = (masked ? 0x80 : 0) | 126;
    header.writeUInt16BE(Number(length), 2);
  } else {
    header = Buffer.alloc(10);
    header[0] = first;
    header[1] = (masked ? 0x80 : 0) | 127;
    header.writeBigUInt64BE(length, 2);
  }
  if (!masked) return Buffer.concat([header, payload]);
  const key = spec.maskKey ?? randomBytes(4);
  const body = Buffer.from(payload);
  for (let index = 0; index < body.length; index++) body[index]! ^= key[index % 4]!;
  return Buffer.concat([header, key, body]);
}

const closePayload = (code: number, reason = "") => {
  const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
  payload.writeUInt16BE(code, 0);
  payload.write(reason, 2);
  return payload;
};

/**
 * A WebSocket client written by hand over TCP: it does the upgrade itself and then sends
 * whatever bytes it is given, and reads the server's (unmasked) frames back.
 */
class WireSocket {
  /** The server's frames after the handshake. */
  readonly frames: { opcode: number; payload: Buffer }[] = [];
  ended = false;
  private pending = Buffer.alloc(0);

  private constructor(
    readonly socket: net.Socket,
    readonly response: string,
    rest: Buffer,
  ) {
    socket.on("data", (chunk: Buffer) => this.read(chunk));
    socket.on("close", () => (this.ended = true));
    this.read(rest);
  }

  /** Sends an upgrade request (any request: `request` replaces the default one) and waits for the response head. */
  static async connect(options: { path?: string; request?: (key: string) => string } = {}): Promise<WireSocket> {
    const { port } = new URL(ctx.server.url);
    const socket = net.connect(Number(port), "127.0.0.1");
    socket.on("error", () => {});
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    const key = randomBytes(16).toString("base64");
    const path = options.path ?? "/trpc?connectionParams=1";
    socket.write(
      options.request?.(key) ??
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    const { head, rest } = await new Promise<{ head: string; rest: Buffer }>((resolve) => {
      let received = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        const end = received.indexOf("\r\n\r\n");
        if (end === -1) return;
        socket.off("data", onData);
        socket.off("close", onClose);
        clearTimeout(silence);
        resolve({ head: received.subarray(0, end).toString("latin1"), rest: received.subarray(end + 4) });
      };
      // A server that drops the connection (or stays silent) without answering: an empty head.
      const onClose = () => {
        clearTimeout(silence);
        resolve({ head: received.toString("latin1"), rest: Buffer.alloc(0) });
      };
      const silence = setTimeout(onClose, 5_000);
      socket.on("data", onData);
      socket.once("close", onClose);
    });
    const wire = new WireSocket(socket, head, rest);
    if (socket.destroyed) wire.ended = true;
    if (head.startsWith("HTTP/1.1 101")) {
      const accept = createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
      expect(head).toContain(`Sec-WebSocket-Accept: ${accept}`);
    }
    return wire;
  }

  get status(): number | undefined {
    const match = /^HTTP\/1\.1 (\d{3})/.exec(this.response);
    return match ? Number(match[1]) : undefined;
  }

  send(...chunks: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(Buffer.concat(chunks));
  }

  /** The code of the server's close frame, if it sent one. */
  get closeCode(): number | undefined {
    const close = this.frames.find((frame) => frame.opcode === OPCODES.close);
    return close && close.payload.length >= 2 ? close.payload.readUInt16BE(0) : undefined;
  }

  texts(): string[] {
    return this.frames.filter((frame) => frame.opcode === OPCODES.text).map((frame) => frame.payload.toString());
  }

  /** Waits until the server has closed the TCP connection; returns its close frame's code. */
  async closedByServer(timeoutMs = 5_000): Promise<number | undefined> {
    await until(() => this.ended || undefined, "the server to close the connection", timeoutMs);
    return this.closeCode;
  }

  destroy(): void {
    this.socket.destroy();
  }

  private read(chunk: Buffer): void {
    this.pending = Buffer.concat([this.pending, chunk]);
    for (;;) {
      const buffer = this.pending;
      if (buffer.length < 2) return;
      let length = buffer[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buffer.length < 4) return;
        length = buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buffer.length < 10) return;
        length = Number(buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (buffer.length < offset + length) return;
      this.frames.push({ opcode: buffer[0]! & 0x0f, payload: buffer.subarray(offset, offset + length) });
      this.pending = buffer.subarray(offset + length);
    }
  }
}

describe("frames broken at the byte level", () => {
  it("speaks the protocol over the hand-made client when the frames are right (the control case)", async () => {
    const user = await registerUser(ctx.api);
    const wire = await WireSocket.connect();
    try {
      expect(wire.status).toBe(101);
      wire.send(
        wireFrame({ opcode: OPCODES.text, payload: clientFrames.connectionParams({ token: user.token }) }),
        wireFrame({ opcode: OPCODES.text, payload: clientFrames.request("wire", "query", "me.get") }),
        // A message in two fragments, with a ping between them.
        wireFrame({
          opcode: OPCODES.text,
          fin: false,
          payload: clientFrames.request("split", "query", "me.get").slice(0, 10),
        }),
        wireFrame({ opcode: OPCODES.ping, payload: "are you there" }),
        wireFrame({
          opcode: OPCODES.continuation,
          payload: clientFrames.request("split", "query", "me.get").slice(10),
        }),
      );
      await until(() => (wire.texts().length >= 2 ? true : undefined), "two answers");
      const answers = wire.texts().map((text) => JSON.parse(text));
      expect(answers).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            id: "wire",
            result: { type: "data", data: expect.objectContaining({ id: user.id }) },
          }),
          expect.objectContaining({
            id: "split",
            result: { type: "data", data: expect.objectContaining({ id: user.id }) },
          }),
        ]),
      );
      expect(wire.frames.find((frame) => frame.opcode === OPCODES.pong)?.payload.toString()).toBe("are you there");
      // A clean close is answered with the same code.
      wire.send(wireFrame({ opcode: OPCODES.close, payload: closePayload(1000, "bye") }));
      expect(await wire.closedByServer()).toBe(1000);
    } finally {
      wire.destroy();
    }
    await expectServing(user);
  });

  const text = (payload: string | Buffer, spec: Partial<FrameSpec> = {}) =>
    wireFrame({ opcode: OPCODES.text, payload, ...spec });
  const oneMiB = MAX_PAYLOAD_BYTES;
  /** Each is sent on a fresh connection (after valid connection params); the server must close it with `code`. */
  const broken: { name: string; frames: () => Buffer[]; code: number }[] = [
    // With no extension negotiated, RSV1 once made `ws` emit an error that ended the process.
    {
      name: "a text frame with RSV1 set and no extension negotiated",
      frames: () => [text("{}", { rsv1: true })],
      code: 1002,
    },
    { name: "a text frame with RSV2 set", frames: () => [text("{}", { rsv2: true })], code: 1002 },
    { name: "a text frame with RSV3 set", frames: () => [text("{}", { rsv3: true })], code: 1002 },
    { name: "an unmasked client frame", frames: () => [text("{}", { masked: false })], code: 1002 },
    {
      name: "a text frame with invalid UTF-8",
      frames: () => [text(Buffer.from([0x7b, 0xc3, 0x28, 0xff, 0x7d]))],
      code: 1007,
    },
    { name: "a reserved data opcode (0x3)", frames: () => [wireFrame({ opcode: 0x3, payload: "x" })], code: 1002 },
    { name: "a reserved control opcode (0xB)", frames: () => [wireFrame({ opcode: 0xb, payload: "x" })], code: 1002 },
    {
      name: "a fragmented control frame",
      frames: () => [wireFrame({ opcode: OPCODES.ping, fin: false, payload: "x" })],
      code: 1002,
    },
    {
      name: "a control frame with a payload above 125 bytes",
      frames: () => [wireFrame({ opcode: OPCODES.ping, payload: Buffer.alloc(126, 0x61) })],
      code: 1002,
    },
    {
      name: "a continuation frame with nothing to continue",
      frames: () => [wireFrame({ opcode: OPCODES.continuation, payload: "x" })],
      code: 1002,
    },
    {
      name: "a new text frame inside a fragmented message",
      frames: () => [text("[", { fin: false }), text("]")],
      code: 1002,
    },
    {
      name: "a close frame with a one-byte payload",
      frames: () => [wireFrame({ opcode: OPCODES.close, payload: Buffer.from([3]) })],
      code: 1002,
    },
    {
      name: "a close frame with an invalid code",
      frames: () => [wireFrame({ opcode: OPCODES.close, payload: closePayload(999) })],
      code: 1002,
    },
    {
      name: "a close frame with an invalid UTF-8 reason",
      frames: () => [
        wireFrame({ opcode: OPCODES.close, payload: Buffer.concat([closePayload(1000), Buffer.from([0xff])]) }),
      ],
      code: 1007,
    },
    {
      name: "a header announcing 2^53 - 1 bytes",
      frames: () => [text("", { announcedLength: 2n ** 53n - 1n })],
      code: 1009,
    },
    {
      name: "a header announcing 2^63 bytes",
      frames: () => [text("", { announcedLength: 2n ** 63n })],
      code: 1009,
    },
    { name: "a frame of 1 MiB + 1 byte", frames: () => [text(Buffer.alloc(oneMiB + 1, 0x20))], code: 1009 },
    {
      name: "a message above 1 MiB in two fragments",
      frames: () => [
        text(Buffer.alloc(oneMiB / 2 + 1, 0x20), { fin: false }),
        wireFrame({ opcode: 0, payload: Buffer.alloc(oneMiB / 2, 0x20) }),
      ],
      code: 1009,
    },
  ];

  for (const { name, frames, code } of broken) {
    it(`closes the connection (${code}) on ${name}, and keeps serving`, async () => {
      const user = await registerUser(ctx.api);
      const wire = await WireSocket.connect();
      try {
        expect(wire.status).toBe(101);
        wire.send(text(clientFrames.connectionParams({ token: user.token })), ...frames());
        expect(await wire.closedByServer()).toBe(code);
      } finally {
        wire.destroy();
      }
      await expectServing(user);
    });
  }

  it("refuses broken upgrade requests with an HTTP answer or by dropping them", async () => {
    const user = await registerUser(ctx.api);
    /** An upgrade request with the usual headers, some replaced or (undefined) left out. */
    const upgrade =
      ({
        method = "GET",
        path = "/trpc",
        headers = {},
      }: {
        method?: string;
        path?: string;
        headers?: Record<string, string | undefined>;
      }) =>
      (key: string) => {
        const all: Record<string, string | undefined> = {
          Host: "x",
          Upgrade: "websocket",
          Connection: "Upgrade",
          "Sec-WebSocket-Key": key,
          "Sec-WebSocket-Version": "13",
          ...headers,
        };
        const lines = Object.entries(all).flatMap(([name, value]) =>
          value === undefined ? [] : [`${name}: ${value}`],
        );
        return `${method} ${path} HTTP/1.1\r\n${lines.join("\r\n")}\r\n\r\n`;
      };
    const cases: { name: string; request: (key: string) => string; status: number | undefined }[] = [
      { name: "another path", request: upgrade({ path: "/elsewhere" }), status: undefined },
      { name: "no Sec-WebSocket-Key", request: upgrade({ headers: { "Sec-WebSocket-Key": undefined } }), status: 400 },
      {
        name: "a malformed Sec-WebSocket-Key",
        request: upgrade({ headers: { "Sec-WebSocket-Key": "short" } }),
        status: 400,
      },
      { name: "an unsupported version", request: upgrade({ headers: { "Sec-WebSocket-Version": "99" } }), status: 400 },
      { name: "an Upgrade that is not websocket", request: upgrade({ headers: { Upgrade: "h2c" } }), status: 400 },
      { name: "a POST", request: upgrade({ method: "POST", headers: { "Content-Length": "0" } }), status: 405 },
      {
        name: "an extension offer that was not asked for, and garbled",
        request: upgrade({
          headers: { "Sec-WebSocket-Extensions": "permessage-deflate; server_max_window_bits=99, x-garbage;;=" },
        }),
        status: 101,
      },
      {
        name: "a huge query string",
        request: upgrade({ path: `/trpc?connectionParams=1&${"q".repeat(8_000)}` }),
        status: 101,
      },
    ];
    for (const { name, request, status } of cases) {
      const wire = await WireSocket.connect({ request });
      try {
        expect(wire.status, name).toBe(status);
        if (status !== 101) await wire.closedByServer();
        else expect(wire.response, name).not.toMatch(/Sec-WebSocket-Extensions/i);
      } finally {
        wire.destroy();
      }
    }
    await expectServing(user);
  });

  // `new URL("//", base)` throws: unguarded in the "upgrade" listener, that ended the process
  // (and the socket was never released, so the server's close() hung).
  it('survives an upgrade request whose target is not a URL path ("//")', async () => {
    const user = await registerUser(ctx.api);
    const wire = await WireSocket.connect({ path: "//" });
    try {
      await wire.closedByServer();
    } finally {
      wire.destroy();
    }
    await expectServing(user);
  });

  it("survives a seeded batch of random frames and random bytes", async () => {
    const user = await registerUser(ctx.api);
    const random = prng(0x5eed_f00d);
    const wires: WireSocket[] = [];
    try {
      for (let connection = 0; connection < 40; connection++) {
        const wire = await WireSocket.connect();
        wires.push(wire);
        expect(wire.status).toBe(101);
        const chunks: Buffer[] = [];
        // Half the connections sign in first, so that their frames reach the protocol too.
        if (connection % 2 === 0) chunks.push(text(clientFrames.connectionParams({ token: user.token })));
        const count = 1 + random.int(6);
        for (let index = 0; index < count; index++) {
          const kind = random.int(5);
          if (kind === 0) {
            chunks.push(random.bytes(1 + random.int(64)));
          } else if (kind === 1) {
            // A request, well formed or cut short.
            const request = clientFrames.request(index, "query", random.int(2) ? "me.get" : "x.y", {
              input: random.int(1000),
            });
            chunks.push(text(request.slice(0, random.int(2) ? request.length : random.int(request.length))));
          } else {
            const payload = random.bytes(random.int(kind === 2 ? 200 : 20));
            chunks.push(
              wireFrame({
                fin: random.int(4) !== 0,
                rsv1: random.int(8) === 0,
                rsv2: random.int(8) === 0,
                rsv3: random.int(8) === 0,
                opcode: random.int(16),
                masked: random.int(8) !== 0,
                maskKey: random.bytes(4),
                payload,
                announcedLength:
                  random.int(6) === 0 ? BigInt(random.int(2 ** 31)) * BigInt(1 + random.int(2 ** 22)) : undefined,
              }),
            );
          }
        }
        wire.send(...chunks);
      }
      // Let the server read and refuse what it was given; most of it ends the connection.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(wires.filter((wire) => wire.ended).length).toBeGreaterThan(wires.length / 2);
    } finally {
      for (const wire of wires) wire.destroy();
    }
    await expectServing(user);
  });
});

describe("protocol garbage on a signed-in socket", () => {
  const parseError = {
    id: null,
    error: expect.objectContaining({ data: expect.objectContaining({ code: "PARSE_ERROR" }) }),
  };

  it("answers garbage with error frames and keeps the connection", async () => {
    const user = await registerUser(ctx.api);
    const raw = await RawSocket.signedIn(ctx.server.url, user.token);
    try {
      /** Sends `frame` and returns the frames it drew, once `done` holds for them. */
      const exchange = async (
        frame: string | Buffer,
        done: (frames: Frame[]) => boolean = (frames) => frames.length >= 1,
      ) => {
        const from = raw.frames.length;
        raw.sendText(frame);
        return until(
          () => (done(raw.frames.slice(from)) ? raw.frames.slice(from) : undefined),
          `the answer to ${String(frame).slice(0, 60)}`,
        );
      };

      const refusedWithParseError: (string | Buffer)[] = [
        "{not json",
        Buffer.from(clientFrames.request(1, "query", "me.get")),
        Buffer.from([0, 1, 2, 3, 255]),
        "42",
        '"text"',
        "null",
        "true",
        "{}",
        JSON.stringify({ method: "query", params: { path: "me.get" } }),
        JSON.stringify({ id: { nested: 1 }, method: "query", params: { path: "me.get" } }),
        JSON.stringify({ id: [1], method: "query", params: { path: "me.get" } }),
        JSON.stringify({ id: true, method: "query", params: { path: "me.get" } }),
        JSON.stringify({ id: null, method: "query", params: { path: "me.get" } }),
        JSON.stringify({ id: 1, method: "call", params: { path: "me.get" } }),
        JSON.stringify({ id: 1, method: "subscription.start", params: { path: "me.get" } }),
        JSON.stringify({ id: 1, method: "", params: { path: "me.get" } }),
        JSON.stringify({ id: 1, method: "query" }),
        JSON.stringify({ id: 1, method: "query", params: "me.get" }),
        JSON.stringify({ id: 1, method: "query", params: { path: 42 } }),
        JSON.stringify({ id: 1, method: "subscription", params: { path: "events.onUser", lastEventId: 42 } }),
        JSON.stringify({ id: 1, jsonrpc: "1.0", method: "query", params: { path: "me.get" } }),
        // A batch with one bad request: the whole batch is refused, none of it runs.
        JSON.stringify([JSON.parse(clientFrames.request(1, "query", "me.get")), "not a request"]),
        // 100,000 levels of nesting: unterminated, then well formed (an array of arrays, then an object of objects).
        "[".repeat(100_000),
        "[".repeat(100_000) + "]".repeat(100_000),
        '{"a":'.repeat(100_000) + "1" + "}".repeat(100_000),
      ];
      for (const frame of refusedWithParseError) {
        const frames = await exchange(frame);
        expect(frames, String(frame).slice(0, 80)).toEqual([parseError]);
      }

      // Nothing to answer: an empty batch, a stop for a subscription that does not exist, PONG.
      for (const frame of ["[]", clientFrames.stop("nobody"), "PONG"]) raw.sendText(frame);

      // Odd but valid ids are answered as they came.
      for (const id of ["", 0, -1, 1.5, 1e300, "x".repeat(10_000), '🙂 \u0000 "quoted"']) {
        const frames = await exchange(clientFrames.request(id, "query", "me.get"));
        expect(frames).toEqual([{ id, result: { type: "data", data: expect.objectContaining({ id: user.id }) } }]);
      }
      // A request with an unknown path or of a procedure of another type: NOT_FOUND.
      for (const [method, path] of [
        ["query", "no.such.procedure"],
        ["mutation", "me.get"],
        ["subscription", "me.get"],
        ["query", "events.onUser"],
        ["query", "__proto__"],
        ["query", "constructor.prototype"],
        ["query", ""],
      ] as const) {
        const frames = await exchange(clientFrames.request("path", method, path));
        expect(frames, `${method} ${path}`).toMatchObject([{ id: "path", error: { data: { code: "NOT_FOUND" } } }]);
      }

      // Deeply nested input to procedures that validate it, and to one that takes none (written
      // by hand: JSON.stringify cannot write 100,000 levels). A frame nested deeper than inputs
      // may be (server/http/json-limits.ts) is refused before parsing, like malformed JSON.
      const deepArray = "[".repeat(100_000) + "]".repeat(100_000);
      const deepObject = '{"workspace_id":'.repeat(50_000) + '"w"' + "}".repeat(50_000);
      for (const [id, method, path, nested] of [
        ["deep-typing", "mutation", "messages.typing", deepArray],
        ["deep-object", "mutation", "messages.typing", deepObject],
        ["deep-me", "query", "me.get", deepArray],
        ["deep-subscription", "subscription", "messages.onChannel", deepObject],
      ] as const) {
        const frames = await exchange(
          `{"id":"${id}","method":"${method}","params":{"path":"${path}","input":${nested}}}`,
        );
        expect(frames[0], id).toMatchObject({ id: null, error: { data: { code: "PARSE_ERROR" } } });
      }

      // A batch of MAX_BATCH is served; one request more and every request is refused.
      const batch = (size: number, prefix: string) =>
        JSON.stringify(
          Array.from({ length: size }, (_, index) =>
            JSON.parse(clientFrames.request(`${prefix}${index}`, "query", "me.get")),
          ),
        );
      const served = await exchange(batch(MAX_BATCH, "ok-"), (frames) => frames.length >= MAX_BATCH);
      expect(served).toHaveLength(MAX_BATCH);
      for (const frame of served) expect(frame.result?.data?.id).toBe(user.id);
      const refused = await exchange(batch(MAX_BATCH + 1, "over-"), (frames) => frames.length >= MAX_BATCH + 1);
      expect(refused.map((frame) => frame.id).sort()).toEqual(
        Array.from({ length: MAX_BATCH + 1 }, (_, index) => `over-${index}`).sort(),
      );
      for (const frame of refused)
        expect(frame.error).toMatchObject({
          message: "Batch call exceeds maximum size",
          data: { code: "BAD_REQUEST", httpStatus: 400 },
        });
      const refusedHuge = await exchange(batch(10_000, "huge-"), (frames) => frames.length >= 10_000);
      expect(refusedHuge.every((frame) => frame.error?.data?.code === "BAD_REQUEST")).toBe(true);

      // Huge inputs under 1 MiB: answered (here refused by validation), never fatal.
      const huge = "x".repeat(1_000_000);
      for (const [id, method, path, input] of [
        ["huge-me", "query", "me.get", huge],
        ["huge-typing", "mutation", "messages.typing", { workspace_id: huge, channel_id: "c" }],
        [
          "huge-keys",
          "mutation",
          "messages.typing",
          Object.fromEntries(Array.from({ length: 40_000 }, (_, index) => [`k${index}`, index])),
        ],
        ["huge-array", "query", "me.get", Array.from({ length: 100_000 }, (_, index) => index)],
      ] as const) {
        const frames = await exchange(clientFrames.request(id, method, path, { input }));
        expect(frames[0]!.id, id).toBe(id);
      }

      // Exactly MAX_PAYLOAD_BYTES is read and answered; the socket is still serving after all of it.
      const envelope = clientFrames.request("edge", "query", "me.get", { input: "" });
      const exact = clientFrames.request("edge", "query", "me.get", {
        input: "y".repeat(MAX_PAYLOAD_BYTES - Buffer.byteLength(envelope)),
      });
      expect(Buffer.byteLength(exact)).toBe(MAX_PAYLOAD_BYTES);
      expect((await exchange(exact))[0]!.id).toBe("edge");

      raw.request("still", "query", "me.get");
      expect((await raw.next((frame) => frame.id === "still")).result.data.id).toBe(user.id);
      expect(raw.texts).toEqual([]);
      expect(raw.closeCode).toBeUndefined();

      // One byte more: the frame is too big, and the connection is closed with 1009.
      raw.sendText(exact.replace('"edge"', '"edge1"'));
      expect(await raw.closed()).toBe(1009);
    } finally {
      raw.terminate();
    }
    await expectServing(user);
  });
});

describe("a flood of subscriptions on one connection", () => {
  it(`accepts ${MAX_SUBSCRIPTIONS} subscriptions, refuses the rest with TOO_MANY_REQUESTS, and releases them all on close`, async () => {
    const user = await registerUser(ctx.api);
    const { deps } = ctx.server.app;

    // Count what the subscriptions hold on the event bus and the credential watch: after the
    // connection closes, nothing may be left.
    const userTopic = `user:${user.id}`;
    let busListeners = 0;
    let credentialHolds = 0;
    const subscribe = deps.events.subscribe;
    const unsubscribe = deps.events.unsubscribe;
    const track = deps.credentials.track;
    const userListeners = new Set<unknown>();
    deps.events.subscribe = async function (this: typeof deps.events, topic, listener) {
      await subscribe.call(this, topic, listener);
      if (topic !== userTopic || userListeners.has(listener)) return;
      userListeners.add(listener);
      busListeners++;
    };
    deps.events.unsubscribe = function (this: typeof deps.events, topic, listener) {
      unsubscribe.call(this, topic, listener);
      if (topic === userTopic && userListeners.delete(listener)) busListeners--;
    };
    deps.credentials.track = function (this: typeof deps.credentials, credential, onRevoked) {
      const release = track.call(this, credential, onRevoked);
      if (credential.userId !== user.id) return release;
      credentialHolds++;
      let released = false;
      return () => {
        if (!released) credentialHolds--;
        released = true;
        release();
      };
    };

    const raw = await RawSocket.signedIn(ctx.server.url, user.token);
    try {
      const total = 3_000;
      global.gc?.();
      const rssBefore = process.memoryUsage().rss;
      for (let id = 1; id <= total; id++) raw.request(id, "subscription", "events.onUser");
      const answered = () =>
        new Set(raw.frames.filter((frame) => typeof frame.id === "number").map((frame) => frame.id));
      await until(() => (answered().size >= total ? true : undefined), `answers to ${total} subscriptions`, 20_000);
      const rssAfter = process.memoryUsage().rss;

      const started = raw.frames.filter((frame) => frame.result?.type === "started").map((frame) => frame.id);
      expect(started.sort((a, b) => a - b)).toEqual(Array.from({ length: MAX_SUBSCRIPTIONS }, (_, index) => index + 1));
      const refused = raw.frames.filter((frame) => frame.error);
      expect(refused).toHaveLength(total - MAX_SUBSCRIPTIONS);
      for (const frame of refused) {
        expect(frame.id).toBeGreaterThan(MAX_SUBSCRIPTIONS);
        expect(frame.error).toMatchObject({
          message: `At most ${MAX_SUBSCRIPTIONS} subscriptions may be open on one connection.`,
          data: { code: "TOO_MANY_REQUESTS", httpStatus: 429 },
        });
      }
      // A generous bound: 3000 requests must not cost the server a large heap.
      expect(rssAfter - rssBefore).toBeLessThan(256 * 1024 * 1024);
      await until(() => (busListeners === MAX_SUBSCRIPTIONS ? true : undefined), "one bus listener per subscription");
      // The connection's own: its subscriptions use its credential, watched once.
      expect(credentialHolds).toBe(1);

      // Stopping one frees its place; the limit holds again right after.
      raw.stop(1);
      await raw.next((frame) => frame.id === 1 && frame.result?.type === "stopped");
      raw.request(total + 1, "subscription", "events.onUser");
      await raw.next((frame) => frame.id === total + 1 && frame.result?.type === "started");
      raw.request(total + 2, "subscription", "events.onUser");
      expect((await raw.next((frame) => frame.id === total + 2)).error?.data?.code).toBe("TOO_MANY_REQUESTS");

      // The subscriptions are live: an event reaches every one of them.
      const events = raw.frames.length;
      expect((await ctx.api.patch("/api/v1/me", { name: "Flooded" }, { token: user.token })).status).toBe(200);
      await until(
        () =>
          raw.frames.slice(events).filter((frame) => frame.result?.type === "data").length >= MAX_SUBSCRIPTIONS
            ? true
            : undefined,
        "an event on every subscription",
      );
    } finally {
      raw.terminate();
    }
    try {
      await until(
        () => (busListeners === 0 && credentialHolds === 0 ? true : undefined),
        "the subscriptions to be released",
      );
    } finally {
      deps.events.subscribe = subscribe;
      deps.events.unsubscribe = unsubscribe;
      deps.credentials.track = track;
    }
    await expectServing(user);
  });
});

describe("connections that never sign in", () => {
  it(
    `are closed (1008) ${CONNECTION_PARAMS_TIMEOUT_MS / 1000} s after opening, 200 at once, while the server keeps serving`,
    async () => {
      const user = await registerUser(ctx.api);
      const opened = Date.now();
      const silent = await Promise.all(Array.from({ length: 200 }, () => RawSocket.open(ctx.server.url)));
      // One that signs in right away is not closed by the timer.
      const signedIn = await RawSocket.signedIn(ctx.server.url, user.token);
      try {
        await expectServing(user);
        // Not before their time: still open a second before it.
        await new Promise((resolve) => setTimeout(resolve, opened + CONNECTION_PARAMS_TIMEOUT_MS - 1_000 - Date.now()));
        expect(silent.filter((raw) => raw.closeCode !== undefined)).toHaveLength(0);

        await until(
          () => (silent.every((raw) => raw.closeCode !== undefined) ? true : undefined),
          "every silent socket to be closed",
          CONNECTION_PARAMS_TIMEOUT_MS + 5_000,
        );
        expect(new Set(silent.map((raw) => raw.closeCode))).toEqual(new Set([1008]));
        expect(new Set(silent.map((raw) => raw.closeReason))).toEqual(new Set(["connection params not received"]));

        signedIn.request("after", "query", "me.get");
        expect((await signedIn.next((frame) => frame.id === "after")).result.data.id).toBe(user.id);
        expect(signedIn.closeCode).toBeUndefined();
      } finally {
        for (const raw of silent) raw.terminate();
        signedIn.terminate();
      }
      await expectServing(user);
    },
    CONNECTION_PARAMS_TIMEOUT_MS + 20_000,
  );
});

describe("connection params the server cannot use", () => {
  it("are answered with an error frame (id null), then the socket is closed", async () => {
    const user = await registerUser(ctx.api);
    const cases: [string, string | Buffer][] = [
      ["data that is not an object", JSON.stringify({ method: "connectionParams", data: "token" })],
      ["data that is an array", JSON.stringify({ method: "connectionParams", data: [user.token] })],
      ["values that are not strings", JSON.stringify({ method: "connectionParams", data: { token: 42 } })],
      ["nested values", JSON.stringify({ method: "connectionParams", data: { token: { value: user.token } } })],
      ["no data", JSON.stringify({ method: "connectionParams" })],
      ["a message that is not an object", "42"],
      ["a message that is an array", JSON.stringify([{ method: "connectionParams", data: { token: user.token } }])],
      ["a message that is not JSON", "token=abc"],
      ["a binary frame", Buffer.from(clientFrames.connectionParams({ token: user.token }))],
    ];
    for (const [name, params] of cases) {
      const raw = await RawSocket.open(ctx.server.url);
      try {
        raw.sendText(params);
        const refused = await raw.next((frame) => frame.id === null);
        expect(refused.error, name).toMatchObject({ data: { code: "PARSE_ERROR", httpStatus: 400 } });
        expect(await raw.closed(), name).toBeDefined();
        expect(raw.frames, name).toHaveLength(1);
      } finally {
        raw.terminate();
      }
    }
    await expectServing(user);
  });
});
