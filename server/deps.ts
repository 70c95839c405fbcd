// What services, routes and workers are handed: built once in server/app.ts.
import type { Redis } from "ioredis";
import type { Database } from "../db/client.ts";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { EventBus } from "./events/bus.ts";
import type { EventRelay } from "./events/relay.ts";
import type { JobQueue } from "./jobs/definition.ts";
import type { JobOutbox } from "./jobs/outbox.ts";
import type { Keyring } from "./keyring.ts";
import type { Logger } from "./logger.ts";
import type { CredentialWatch } from "./services/accounts/credential-watch.ts";
import type { Presence } from "./services/presence/presence.ts";
import type { SingleUseStore } from "./services/single-use-store.ts";
import type { SocialProviders } from "./services/social/providers.ts";
import type { Throttle } from "./services/throttle.ts";
import type { FileStorage } from "./storage/file-storage.ts";

export type Deps = {
  config: Config;
  /** Seals, opens, signs and verifies secrets under APP_KEY (and APP_KEY_PREVIOUS). */
  keys: Keyring;
  db: Database;
  clock: Clock;
  logger: Logger;
  /** The queue itself: recurring schedules, and the outbox's hand-over. Enqueue a change's jobs with `enqueueJob`. */
  jobs: JobQueue;
  /** Hands committed job rows to the queue; wake it after a commit that wrote some. */
  jobOutbox: Pick<JobOutbox, "wake" | "flush">;
  events: EventBus;
  /**
   * Publishes committed events and feeds them to the consumers of the log (push, translation,
   * outbound webhooks); wake it after a commit that wrote some. `flush` waits for both.
   */
  relay: Pick<EventRelay, "wake" | "flush">;
  /** Ends connections and live streams whose credential is revoked. */
  credentials: CredentialWatch;
  /** Who is connected (live state in Redis or memory), presence watchers, last seen (docs/presence.md). */
  presence: Presence;
  throttle: Throttle;
  /** Short-lived single-use values (OAuth state): Redis when configured, else the database. */
  singleUse: SingleUseStore;
  social: SocialProviders;
  /** Attachment bytes: local files or S3, by STORAGE_DRIVER. */
  storage: FileStorage;
  /** Present when REDIS_URL is set. */
  redis: Redis | undefined;
};
