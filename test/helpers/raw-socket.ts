// A bare `ws` socket speaking tRPC's WebSocket protocol frame by frame (the frames come from
// server/http/trpc-ws-protocol.ts, the host's own vocabulary), for tests that must see exactly
// what travels: errors, close codes, frames the typed client would hide.
import WebSocket from "ws";
import {
  clientFrames,
  PING,
  PONG,
  trpcSocketUrl,
  type ClientRequestMethod,
  type RequestId,
} from "../../server/http/trpc-ws-protocol.ts";
import { until } from "./wait.ts";

export type Frame = Record<string, any>;

export class RawSocket {
  readonly frames: Frame[] = [];
  /** Text frames that were not JSON (PING/PONG excluded). */
  readonly texts: string[] = [];
  closeCode: number | undefined;
  closeReason = "";

  private constructor(readonly socket: WebSocket) {
    socket.on("message", (data, isBinary) => {
      const text = data.toString();
      if (!isBinary && text === PING) socket.send(PONG);
      else if (text !== PONG) {
        try {
          this.frames.push(JSON.parse(text));
        } catch {
          this.texts.push(text);
        }
      }
    });
    socket.on("close", (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString();
    });
    socket.on("error", () => {});
  }

  /** Opens a socket to `baseUrl`'s /trpc, announcing connection params unless told not to. */
  static async open(baseUrl: string, options: { connectionParams?: boolean } = {}): Promise<RawSocket> {
    const socket = new WebSocket(trpcSocketUrl(baseUrl, options));
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve());
      socket.once("error", reject);
    });
    return new RawSocket(socket);
  }

  /** Opens a socket and signs it in with connection params `{ token }`. */
  static async signedIn(baseUrl: string, token: string): Promise<RawSocket> {
    const raw = await RawSocket.open(baseUrl);
    raw.sendText(clientFrames.connectionParams({ token }));
    return raw;
  }

  sendText(text: string | Buffer): void {
    this.socket.send(text);
  }

  request(
    id: RequestId,
    method: ClientRequestMethod,
    path: string,
    options?: { input?: unknown; lastEventId?: string; jsonrpc?: "2.0" },
  ): void {
    this.sendText(clientFrames.request(id, method, path, options));
  }

  stop(id: RequestId): void {
    this.sendText(clientFrames.stop(id));
  }

  /** Waits for the first frame (after `from`) that matches. */
  async next(match: (frame: Frame) => boolean, from = 0, timeoutMs = 5_000): Promise<Frame> {
    return until(() => this.frames.slice(from).find(match), "a matching frame", timeoutMs);
  }

  dataFrames(id: RequestId): Frame[] {
    return this.frames.filter((frame) => frame.id === id && frame.result?.type === "data");
  }

  async closed(timeoutMs = 5_000): Promise<number> {
    return until(() => this.closeCode, "the socket to close", timeoutMs);
  }

  terminate(): void {
    this.socket.terminate();
  }
}
