// Firebase Cloud Messaging, HTTP v1 (https://firebase.google.com/docs/cloud-messaging/send/v1-api):
// one POST per device, authorised by an OAuth 2 access token that the service account gets
// with the JWT bearer grant (RFC 7523) from its token_uri. The token is cached until five
// minutes before it expires, and fetched again once when FCM answers 401.
import type { KeyObject } from "node:crypto";
import { SignJWT } from "jose";
import * as oidc from "openid-client";
import type { Clock } from "../../../clock.ts";
import { oncePer, type Logger } from "../../../logger.ts";
import { describeRequestError, mapLimit, parseJson, parseRetryAfter, postWithTimeout } from "../../../provider-http.ts";
import { badgeUpdateData, type PushOutcome, type PushProvider, type PushSend } from "../provider.ts";
import { PUSH_REQUEST_TIMEOUT_MS, retryAll, retryOutcome, scrubToken, type ClientOptions } from "./http.ts";

export const FCM_DEFAULT_URL = "https://fcm.googleapis.com";
export const FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging";
const JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/** A cached access token is replaced this long before it expires. */
const TOKEN_EARLY_REFRESH_MS = 5 * 60_000;
const CONCURRENCY = 50;

/** What the client uses of a service-account JSON file. */
export type FcmServiceAccount = {
  projectId: string;
  clientEmail: string;
  /** The account's RSA private key, already parsed. */
  privateKey: KeyObject;
  tokenUri: string;
};

export type FcmOptions = ClientOptions & {
  /** Base URL, without the /v1/... path. */
  url: string;
  account: FcmServiceAccount;
  clock: Clock;
  logger: Logger;
};

type FcmError = { error?: { code?: unknown; status?: unknown; message?: unknown; details?: unknown } };

export class FcmProvider implements PushProvider {
  readonly name = "fcm" as const;
  readonly batchSize = 500;
  readonly concurrentBatches = 1;
  private readonly timeoutMs: number;
  private readonly sendUrl: string;
  private readonly oauth: oidc.Configuration;
  private cached: { token: string; expiresAt: number } | undefined;
  private pending: Promise<string> | undefined;
  /** Warnings about the token endpoint, at most once per REPEATED_WARNING_MS. */
  private readonly warnTokenFailure = oncePer();

  constructor(private readonly options: FcmOptions) {
    this.timeoutMs = options.timeoutMs ?? PUSH_REQUEST_TIMEOUT_MS;
    const base = options.url.replace(/\/+$/, "");
    this.sendUrl = `${base}/v1/projects/${encodeURIComponent(options.account.projectId)}/messages:send`;
    const tokenUri = new URL(options.account.tokenUri);
    this.oauth = new oidc.Configuration(
      { issuer: tokenUri.origin, token_endpoint: tokenUri.href },
      options.account.clientEmail,
      undefined,
      oidc.None(),
    );
    this.oauth.timeout = Math.max(1, Math.ceil(this.timeoutMs / 1000));
    if (tokenUri.protocol === "http:") oidc.allowInsecureRequests(this.oauth);
  }

  async send(sends: PushSend[]): Promise<PushOutcome[]> {
    if (sends.length === 0) return [];
    let accessToken: string;
    try {
      accessToken = await this.accessToken();
    } catch (error) {
      this.tokenFailed(error);
      return retryAll(sends, "fcm: no access token");
    }
    return mapLimit(sends, CONCURRENCY, (send) => this.sendOne(send, accessToken, true));
  }

  private tokenFailed(error: unknown): void {
    if (this.warnTokenFailure()) {
      this.options.logger.warn({ provider: "fcm", err: error }, "push access token request failed");
    }
  }

  async close(): Promise<void> {
    // Nothing held open: fetch's connections are pooled by the runtime.
  }

  /** The cached access token, or a new one (one request at a time, shared by concurrent callers). */
  private accessToken(): Promise<string> {
    if (this.cached && this.options.clock.now().getTime() < this.cached.expiresAt - TOKEN_EARLY_REFRESH_MS) {
      return Promise.resolve(this.cached.token);
    }
    if (!this.pending) {
      this.pending = this.fetchAccessToken().finally(() => {
        this.pending = undefined;
      });
    }
    return this.pending;
  }

  private async fetchAccessToken(): Promise<string> {
    const { account, clock } = this.options;
    const issuedAt = Math.floor(clock.now().getTime() / 1000);
    const assertion = await new SignJWT({ scope: FCM_SCOPE })
      .setProtectedHeader({ alg: "RS256", typ: "JWT" })
      .setIssuer(account.clientEmail)
      .setAudience(account.tokenUri)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + 3600)
      .sign(account.privateKey);
    const response = await oidc.genericGrantRequest(this.oauth, JWT_BEARER_GRANT, { assertion });
    const expiresInSeconds = response.expiresIn() ?? 3600;
    this.cached = { token: response.access_token, expiresAt: clock.now().getTime() + expiresInSeconds * 1000 };
    return response.access_token;
  }

  private async sendOne(send: PushSend, accessToken: string, mayRefresh: boolean): Promise<PushOutcome> {
    const { target } = send;
    const deviceId = target.deviceId;
    const message = { message: fcmMessage(send) };
    let response: Awaited<ReturnType<typeof postWithTimeout>>;
    try {
      response = await postWithTimeout(
        this.sendUrl,
        {
          headers: {
            accept: "application/json",
            "content-type": "application/json",
            authorization: `Bearer ${accessToken}`,
          },
          body: JSON.stringify(message),
        },
        this.timeoutMs,
      );
    } catch (error) {
      return retryOutcome(deviceId, `fcm: ${describeRequestError(error)}`);
    }
    const { status } = response;
    if (status >= 200 && status < 300) return { deviceId, result: "sent" };

    if (status === 401 && mayRefresh) {
      // The token may have been revoked or expired early: forget it and try once with a new one.
      if (this.cached?.token === accessToken) this.cached = undefined;
      let fresh: string;
      try {
        fresh = await this.accessToken();
      } catch (error) {
        this.tokenFailed(error);
        return retryOutcome(deviceId, "fcm: no access token");
      }
      return this.sendOne(send, fresh, false);
    }

    const error = (parseJson(response.text) as FcmError | undefined)?.error;
    const errorCode = fcmErrorCode(error?.details);
    const errorStatus = typeof error?.status === "string" ? error.status : undefined;
    const label = errorCode ?? errorStatus ?? `HTTP ${status}`;
    if (status === 404 || errorCode === "UNREGISTERED") {
      return { deviceId, result: "unregistered", reason: `fcm: ${errorCode ?? errorStatus ?? "NOT_FOUND"}` };
    }
    if (status === 429 || status >= 500) {
      const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), this.options.clock.now());
      return retryOutcome(deviceId, `fcm: ${status} ${label}`, retryAfterMs);
    }
    const detail = typeof error?.message === "string" ? `: ${scrubToken(error.message, target.token)}` : "";
    return { deviceId, result: "failed", reason: `fcm: ${status} ${label}${detail}` };
  }
}

/**
 * The HTTP v1 `message` for one device. A notification carries the recipient's badge three ways:
 * `data.badge` (a string: FCM data values are strings), the Android notification's
 * `notification_count` (launchers that show badges read it) and the iOS `aps.badge`. A silent
 * badge update is a data message (no `notification`, normal priority) whose iOS form is APNs'
 * badge-only notification (push type alert, priority 5: a badge is a user-visible change, which
 * APNs' background type must not carry).
 */
export function fcmMessage({ target, notification, badge }: PushSend): Record<string, unknown> {
  if (!notification) {
    return {
      token: target.token,
      data: badgeUpdateData(badge),
      android: { priority: "NORMAL" },
      apns: { headers: { "apns-push-type": "alert", "apns-priority": "5" }, payload: { aps: { badge } } },
    };
  }
  const counted = badge !== undefined;
  return {
    token: target.token,
    notification: { title: notification.title, body: notification.body },
    data: counted ? { ...notification.data, badge: String(badge) } : notification.data,
    android: {
      priority: "HIGH",
      notification: { tag: notification.threadId, ...(counted && { notification_count: badge }) },
    },
    apns: {
      payload: { aps: { "thread-id": notification.threadId, sound: "default", ...(counted && { badge }) } },
    },
    webpush: { headers: { Urgency: "high" } },
  };
}

/** The errorCode of the FcmError entry in an error's details (UNREGISTERED, INVALID_ARGUMENT…). */
function fcmErrorCode(details: unknown): string | undefined {
  if (!Array.isArray(details)) return undefined;
  for (const detail of details as { "@type"?: unknown; errorCode?: unknown }[]) {
    if (typeof detail?.errorCode === "string") return detail.errorCode;
  }
  return undefined;
}
