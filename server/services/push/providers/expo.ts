// Expo's push service (https://docs.expo.dev/push-notifications/sending-notifications/):
// one POST of up to 100 messages, answered with one ticket per message in the same order.
// Receipts are not polled: a ticket's error is enough to drop dead tokens. Each message carries
// its recipient's `badge`; a silent badge update is a message with a badge and no title or body.
import type { Clock } from "../../../clock.ts";
import { oncePer, type Logger } from "../../../logger.ts";
import { describeRequestError, parseJson, parseRetryAfter, postWithTimeout } from "../../../provider-http.ts";
import { badgeUpdateData, type PushOutcome, type PushProvider, type PushSend } from "../provider.ts";
import { PUSH_REQUEST_TIMEOUT_MS, retryAll, retryOutcome, scrubToken, type ClientOptions } from "./http.ts";

export const EXPO_DEFAULT_URL = "https://exp.host/--/api/v2/push/send";

export type ExpoOptions = ClientOptions & {
  /** The full send URL. */
  url: string;
  accessToken: string | undefined;
  clock: Clock;
  logger: Logger;
};

type ExpoTicket = { status?: unknown; id?: unknown; message?: unknown; details?: { error?: unknown } };

export class ExpoProvider implements PushProvider {
  readonly name = "expo" as const;
  readonly batchSize = 100;
  /** As Expo's own SDK does. */
  readonly concurrentBatches = 6;
  private readonly timeoutMs: number;
  /** Warnings about an unavailable service, at most once per REPEATED_WARNING_MS. */
  private readonly warnUnavailable = oncePer();

  constructor(private readonly options: ExpoOptions) {
    this.timeoutMs = options.timeoutMs ?? PUSH_REQUEST_TIMEOUT_MS;
  }

  async send(sends: PushSend[]): Promise<PushOutcome[]> {
    if (sends.length === 0) return [];
    const messages = sends.map(expoMessage);
    const headers: Record<string, string> = { accept: "application/json", "content-type": "application/json" };
    if (this.options.accessToken) headers.authorization = `Bearer ${this.options.accessToken}`;

    let response: Awaited<ReturnType<typeof postWithTimeout>>;
    try {
      response = await postWithTimeout(this.options.url, { headers, body: JSON.stringify(messages) }, this.timeoutMs);
    } catch (error) {
      const reason = `expo: ${describeRequestError(error)}`;
      if (this.warnUnavailable()) this.options.logger.warn({ provider: "expo", reason }, "push request failed");
      return retryAll(sends, reason);
    }

    const body = parseJson(response.text) as { data?: unknown; errors?: unknown } | undefined;
    if (response.status === 429 || response.status >= 500) {
      const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), this.options.clock.now());
      if (this.warnUnavailable()) {
        this.options.logger.warn({ provider: "expo", status: response.status }, "push request refused for now");
      }
      return retryAll(sends, `expo: HTTP ${response.status}`, retryAfterMs);
    }
    if (response.status < 200 || response.status >= 300 || !Array.isArray(body?.data)) {
      const reason = `expo: HTTP ${response.status}${requestErrorCode(body?.errors)}`;
      this.options.logger.warn({ provider: "expo", status: response.status, reason }, "push request refused");
      return sends.map((send) => ({ deviceId: send.target.deviceId, result: "failed", reason }));
    }

    const tickets = body.data as ExpoTicket[];
    return sends.map((send, index) => this.outcome(send, tickets[index]));
  }

  async close(): Promise<void> {
    // Nothing held open: fetch's connections are pooled by the runtime.
  }

  private outcome(send: PushSend, ticket: ExpoTicket | undefined): PushOutcome {
    const deviceId = send.target.deviceId;
    if (ticket?.status === "ok") return { deviceId, result: "sent" };
    if (ticket?.status !== "error") return { deviceId, result: "failed", reason: "expo: no ticket for the message" };
    const code = typeof ticket.details?.error === "string" ? ticket.details.error : undefined;
    if (code === "DeviceNotRegistered")
      return { deviceId, result: "unregistered", reason: "expo: DeviceNotRegistered" };
    if (code === "MessageRateExceeded") return retryOutcome(deviceId, "expo: MessageRateExceeded");
    // Expo's message quotes the token ("ExponentPushToken[…] is not …"): only the code, or a scrubbed message.
    const message = typeof ticket.message === "string" ? scrubToken(ticket.message, send.target.token) : "error";
    return { deviceId, result: "failed", reason: `expo: ${code ?? message}` };
  }
}

/**
 * A notification with its badge (iOS shows it on the app icon), or a silent badge update: the
 * badge without title or body, which Expo delivers without showing or sounding anything.
 */
function expoMessage({ target, notification, badge }: PushSend) {
  if (!notification) return { to: target.token, badge, data: badgeUpdateData(badge), priority: "normal" };
  const message: Record<string, unknown> = {
    to: target.token,
    title: notification.title,
    body: notification.body,
    data: notification.data,
    sound: "default",
    priority: "high",
  };
  if (badge !== undefined) message.badge = badge;
  return message;
}

/** " (CODE)" of a whole-request error body `{errors: [{code, message}]}`, or "". */
function requestErrorCode(errors: unknown): string {
  if (!Array.isArray(errors)) return "";
  const code = (errors[0] as { code?: unknown } | undefined)?.code;
  return typeof code === "string" ? ` (${code})` : "";
}
