// The file purge: a change that deletes attachments (a message with files, a channel, a room
// that expired) queues their storage keys in `file_deletions` in its own transaction (a trigger
// on `attachments`, migration 0006). This consumer empties storage of them once such a change's
// event is positioned, in the background: the kit's other consumers do not wait for storage.
// It writes nothing with its cursor; what it could not delete stays queued for the
// `files.purge-deleted` maintenance job (server/services/files/purge-deleted.ts), which also
// covers a crash between the commit and the purge. A message deleted without files passes by
// at no cost (its event says so: `deletes_files`).
import type { Database } from "../../db/client.ts";
import type { Logger } from "../logger.ts";
import { RunLoop } from "../run-loop.ts";
import { purgeDeletedFiles } from "../services/files/purge-deleted.ts";
import type { FileStorage } from "../storage/file-storage.ts";
import type { BatchResult, Consumer, LoggedEvent } from "./kit.ts";

export function filePurgeConsumer(deps: { db: Database; storage: FileStorage; logger: Logger }): Consumer {
  // One purge at a time: events that come while one runs ask for one more pass.
  const purge = new RunLoop(
    () =>
      purgeDeletedFiles(deps).then(
        () => false,
        (error: unknown) => {
          deps.logger.warn(
            { err: error },
            "could not delete the files of deleted attachments; the maintenance job will",
          );
          return false;
        },
      ),
    () => true,
  );
  return {
    name: "file-purge",
    types: new Set(["message.deleted", "channel.deleted", "room.expired"]),
    async handle(events: LoggedEvent[]): Promise<BatchResult> {
      if (events.some(({ payload }) => payload.type !== "message.deleted" || payload.deletes_files === true))
        purge.request();
      return "nothing";
    },
  };
}
