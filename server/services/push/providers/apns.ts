// Apple Push Notification service over HTTP/2, token-based
// (https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns):
// one POST /3/device/<token> stream per device on one long-lived session, authorised by an
// ES256 provider token that is reused and replaced when it is 50 minutes old (Apple refuses
// tokens older than an hour and throttles replacing them more often than every 20 minutes).
import type { KeyObject } from "node:crypto";
import http2 from "node:http2";
import tls from "node:tls";
import { SignJWT } from "jose";
import type { Clock } from "../../../clock.ts";
import { oncePer, type Logger } from "../../../logger.ts";
import { describeRequestError, mapLimit, parseJson, parseRetryAfter } from "../../../provider-http.ts";
import { badgeUpdateData, type PushOutcome, type PushProvider, type PushSend } from "../provider.ts";
import { PUSH_REQUEST_TIMEOUT_MS, PushTimeoutError, retryAll, retryOutcome, type ClientOptions } from "./http.ts";

export const APNS_DEFAULT_URL = "https://api.push.apple.com";
/** A provider token is replaced once it is this old. */
export const APNS_TOKEN_MAX_AGE_MS = 50 * 60_000;
const CONCURRENCY = 100;

export type ApnsOptions = ClientOptions & {
  url: string;
  /** The .p8 signing key, already parsed (EC P-256). */
  key: KeyObject;
  keyId: string;
  teamId: string;
  topic: string;
  /** PEM of extra certificate authorities trusted besides the system's. */
  ca: string | undefined;
  clock: Clock;
  logger: Logger;
};

type ApnsResponse = { status: number; headers: http2.IncomingHttpHeaders; body: string };

/** "10": deliver now (a message); "5": when it suits the device's power (a badge update). */
type ApnsPriority = "10" | "5";

/**
 * The payload of one device's notification, with its badge, and its priority. A silent badge
 * update is `aps.badge` alone: Apple files a badge under the `alert` push type (a change the user
 * sees), and the `background` type (`content-available`) must carry no badge, alert or sound, so
 * the badge-only alert is APNs' own silent badge update; priority 5, as nothing needs the user now.
 */
export function apnsRequest({ notification, badge }: PushSend): {
  payload: Record<string, unknown>;
  priority: ApnsPriority;
} {
  if (!notification) return { payload: { ...badgeUpdateData(badge), aps: { badge } }, priority: "5" };
  return {
    payload: {
      ...notification.data,
      aps: {
        alert: { title: notification.title, body: notification.body },
        sound: "default",
        "thread-id": notification.threadId,
        ...(badge !== undefined && { badge }),
      },
    },
    priority: "10",
  };
}

export class ApnsProvider implements PushProvider {
  readonly name = "apns" as const;
  readonly batchSize = 500;
  readonly concurrentBatches = 1;
  private readonly timeoutMs: number;
  private readonly connectOptions: http2.SecureClientSessionOptions;
  private session: http2.ClientHttp2Session | undefined;
  private providerToken: { jwt: string; issuedAt: number } | undefined;
  private pendingToken: Promise<string> | undefined;
  private readonly warnConnection = oncePer();

  constructor(private readonly options: ApnsOptions) {
    this.timeoutMs = options.timeoutMs ?? PUSH_REQUEST_TIMEOUT_MS;
    this.connectOptions = options.ca ? { ca: [...tls.rootCertificates, options.ca] } : {};
  }

  async send(sends: PushSend[]): Promise<PushOutcome[]> {
    if (sends.length === 0) return [];
    let jwt: string;
    try {
      jwt = await this.token();
    } catch (error) {
      this.options.logger.warn({ provider: "apns", err: error }, "push provider token could not be made");
      return retryAll(sends, "apns: no provider token");
    }
    return mapLimit(sends, CONCURRENCY, (send) => this.sendOne(send, jwt, true));
  }

  async close(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    if (!session || session.closed || session.destroyed) return;
    await new Promise<void>((resolve) => session.close(() => resolve()));
  }

  /** The current provider token, or a new one when it is 50 minutes old (one signing at a time). */
  private token(): Promise<string> {
    const now = this.options.clock.now().getTime();
    if (this.providerToken && now - this.providerToken.issuedAt < APNS_TOKEN_MAX_AGE_MS) {
      return Promise.resolve(this.providerToken.jwt);
    }
    if (!this.pendingToken) {
      this.pendingToken = this.signToken(now).finally(() => {
        this.pendingToken = undefined;
      });
    }
    return this.pendingToken;
  }

  private async signToken(now: number): Promise<string> {
    const { key, keyId, teamId } = this.options;
    const jwt = await new SignJWT({})
      .setProtectedHeader({ alg: "ES256", kid: keyId })
      .setIssuer(teamId)
      .setIssuedAt(Math.floor(now / 1000))
      .sign(key);
    this.providerToken = { jwt, issuedAt: now };
    return jwt;
  }

  private async sendOne(send: PushSend, jwt: string, mayRenewToken: boolean): Promise<PushOutcome> {
    const { target } = send;
    const deviceId = target.deviceId;
    const { payload, priority } = apnsRequest(send);
    let response: ApnsResponse;
    try {
      response = await this.request(target.token, jwt, JSON.stringify(payload), priority);
    } catch (error) {
      return retryOutcome(deviceId, `apns: ${describeRequestError(error)}`);
    }
    const { status } = response;
    if (status === 200) return { deviceId, result: "sent" };
    const body = parseJson(response.body) as { reason?: unknown } | undefined;
    const reason = typeof body?.reason === "string" ? body.reason : `HTTP ${status}`;
    if (status === 410 || (status === 400 && reason === "BadDeviceToken")) {
      return { deviceId, result: "unregistered", reason: `apns: ${reason}` };
    }
    if (status === 403 && reason === "ExpiredProviderToken" && mayRenewToken) {
      if (this.providerToken?.jwt === jwt) this.providerToken = undefined;
      let fresh: string;
      try {
        fresh = await this.token();
      } catch (error) {
        this.options.logger.warn({ provider: "apns", err: error }, "push provider token could not be made");
        return retryOutcome(deviceId, "apns: no provider token");
      }
      return this.sendOne(send, fresh, false);
    }
    if (status === 429 || status >= 500) {
      const retryAfter = response.headers["retry-after"];
      const retryAfterMs = parseRetryAfter(
        typeof retryAfter === "string" ? retryAfter : undefined,
        this.options.clock.now(),
      );
      return retryOutcome(deviceId, `apns: ${status} ${reason}`, retryAfterMs);
    }
    return { deviceId, result: "failed", reason: `apns: ${status} ${reason}` };
  }

  /** The open session, or a new one when there is none or it was closed, went away or failed. */
  private connection(): http2.ClientHttp2Session {
    const current = this.session;
    if (current && !current.closed && !current.destroyed) return current;
    const session = http2.connect(this.options.url, this.connectOptions);
    const forget = () => {
      if (this.session === session) this.session = undefined;
    };
    session.on("error", (error) => {
      forget();
      if (this.warnConnection()) this.options.logger.warn({ provider: "apns", err: error }, "push connection failed");
    });
    session.on("goaway", forget);
    session.on("close", forget);
    this.session = session;
    return session;
  }

  /** One stream: resolves with the answer, rejects on a timeout, a reset or a connection error. */
  private request(deviceToken: string, jwt: string, body: string, priority: ApnsPriority): Promise<ApnsResponse> {
    return new Promise<ApnsResponse>((resolve, reject) => {
      let session: http2.ClientHttp2Session;
      let stream: http2.ClientHttp2Stream;
      try {
        session = this.connection();
        stream = session.request({
          ":method": "POST",
          ":path": `/3/device/${encodeURIComponent(deviceToken)}`,
          authorization: `bearer ${jwt}`,
          "apns-topic": this.options.topic,
          "apns-push-type": "alert",
          "apns-priority": priority,
          "content-type": "application/json",
        });
      } catch (error) {
        // The session was closing (e.g. after GOAWAY): the next send opens a new one.
        this.session = undefined;
        reject(error);
        return;
      }
      const timer = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        // A session that stops answering may be dead (half-open, or never connected): let its
        // other streams finish and open a new one for the next requests.
        if (this.session === session) this.session = undefined;
        if (session.connecting) session.destroy();
        else session.close();
        reject(new PushTimeoutError());
      }, this.timeoutMs);
      let headers: http2.IncomingHttpHeaders | undefined;
      const chunks: Buffer[] = [];
      stream.on("response", (responseHeaders) => {
        headers = responseHeaders;
      });
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        clearTimeout(timer);
        if (!headers) reject(new Error("stream ended without a response"));
        else resolve({ status: Number(headers[":status"]), headers, body: Buffer.concat(chunks).toString("utf8") });
      });
      stream.on("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
      stream.on("close", () => {
        clearTimeout(timer);
        reject(new Error("stream closed without a response"));
      });
      stream.end(body);
    });
  }
}
