// The consumers of the event log this server runs (server/consumers/kit.ts says how). A new
// feature that follows changes joins here: a consumer with its types and its batch handler.
import type { Database } from "../../db/client.ts";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import { translationEnabled } from "../services/translation/readers.ts";
import type { FileStorage } from "../storage/file-storage.ts";
import { filePurgeConsumer } from "./file-purge.ts";
import { ConsumerKit, type Consumer } from "./kit.ts";
import { outboundConsumer } from "./outbound-webhooks.ts";
import { pushConsumer } from "./push.ts";
import { readPositionsConsumer } from "./read-positions.ts";
import { searchConsumer } from "./search.ts";
import { translationConsumer } from "./translation.ts";

export function createConsumers(deps: {
  db: Database;
  clock: Clock;
  logger: Logger;
  config: Config;
  storage: FileStorage;
}): ConsumerKit {
  const consumers: Consumer[] = [
    readPositionsConsumer(deps),
    pushConsumer(deps),
    outboundConsumer(deps),
    searchConsumer(deps),
    filePurgeConsumer(deps),
  ];
  if (translationEnabled(deps.config)) consumers.push(translationConsumer(deps));
  return new ConsumerKit(deps, consumers);
}
