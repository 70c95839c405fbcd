// The seam between push delivery and the three push services (Expo, FCM, APNs). The worker
// (delivery.ts) decides who gets what; a provider only speaks its service's HTTP API and says,
// per device, what happened, so the worker can delete dead devices and retry only the ones
// that may still succeed.

export const PUSH_PROVIDERS = ["expo", "fcm", "apns"] as const;
export type PushProviderName = (typeof PUSH_PROVIDERS)[number];

export const PUSH_PLATFORMS = ["ios", "android", "web"] as const;
export type PushPlatform = (typeof PUSH_PLATFORMS)[number];

export type PushNotification = {
  title: string;
  body: string;
  /** String values only (FCM's data map allows nothing else); ids the app opens the message with. */
  data: Record<string, string>;
  /** Groups notifications of one channel or conversation (APNs thread-id, Android tag). */
  threadId: string;
};

export type PushTarget = {
  /** Our device id (push_devices.id), echoed in the outcome. */
  deviceId: string;
  /** The provider's token, in the clear (decrypted just for the send; never logged). */
  token: string;
  platform: PushPlatform;
};

/**
 * One device's push: a notification with the recipient's badge (`total_mentions`, what the app
 * icon shows), or the badge alone: a silent badge update (after a read lowered it), which shows
 * nothing and makes no sound. The badge is per recipient; the notification is shared.
 */
export type PushSend =
  | { target: PushTarget; notification: PushNotification; badge?: number | undefined }
  | { target: PushTarget; notification?: undefined; badge: number };

/** The `data` of a silent badge update, with the badge as a string (FCM data holds strings only). */
export const badgeUpdateData = (badge: number): Record<string, string> => ({ type: "badge", badge: String(badge) });

export type PushOutcome =
  /** The service accepted it. */
  | { deviceId: string; result: "sent" }
  /** The service says the token is dead (Expo DeviceNotRegistered, FCM UNREGISTERED/404, APNs 410/BadDeviceToken): delete the device. */
  | { deviceId: string; result: "unregistered"; reason: string }
  /** Worth trying again later: 429, 5xx, a timeout or a connection error. `retryAfterMs` from Retry-After when the service sent one. */
  | { deviceId: string; result: "retry"; reason: string; retryAfterMs?: number }
  /** Refused for a reason trying again cannot fix (another 4xx): logged, not retried. */
  | { deviceId: string; result: "failed"; reason: string };

export interface PushProvider {
  readonly name: PushProviderName;
  /** The most sends one `send` call takes (Expo: 100 per request). */
  readonly batchSize: number;
  /**
   * How many `send` calls may run at once. Expo takes several requests in parallel; FCM and
   * APNs run their own bounded concurrency inside one batch (one request or stream per device).
   */
  readonly concurrentBatches: number;
  /**
   * Sends each notification to its device; resolves with one outcome per send, in the order of
   * `sends` (one device may get several notifications in one call),
   * and never rejects for a per-device failure (a whole request that fails is "retry" for each).
   */
  send(sends: PushSend[]): Promise<PushOutcome[]>;
  close(): Promise<void>;
}
