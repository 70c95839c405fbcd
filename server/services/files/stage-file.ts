// POST /api/v1/files: an upload is stored first and recorded second, staged (no message) for
// its uploader until one of their messages claims it by id (post-message.ts claimAttachments).
// Unclaimed files are removed after a day (prune-staged.ts).
import { finished, Transform, type Readable } from "node:stream";
import { and, eq, isNull } from "drizzle-orm";
import type { z } from "zod";
import { attachments } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { purgeDeletedFiles } from "./purge-deleted.ts";
import { AppError } from "../../errors.ts";
import { newId, randomSecret } from "../../ids.ts";
import { toAttachmentRecord, type attachmentRecord } from "../../records/message.ts";

export const MAX_FILENAME_LENGTH = 255;
const FALLBACK_FILENAME = "file";
const FALLBACK_MIME_TYPE = "application/octet-stream";
const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;

export const uploadTooLarge = (limit: number) =>
  new AppError("payload_too_large", `The file must not be greater than ${limit} bytes.`);

/**
 * The name as a person would want it back: no directories, no control or bidirectional-override
 * characters (which can disguise an extension), at most 255 characters with the extension kept.
 */
export function sanitizeFilename(name: string | undefined): string {
  const base = (name ?? "").split(/[\\/]/).pop() ?? "";
  const cleaned = base
    .normalize("NFC")
    .replace(/[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, "")
    .replace(/\s+/g, " ")
    .trim();
  if (cleaned === "" || cleaned === "." || cleaned === "..") return FALLBACK_FILENAME;
  const characters = Array.from(cleaned);
  if (characters.length <= MAX_FILENAME_LENGTH) return cleaned;
  const dot = cleaned.lastIndexOf(".");
  const extension = dot > 0 ? Array.from(cleaned.slice(dot)) : [];
  const keep = extension.length > 0 && extension.length <= 16 ? extension : [];
  return characters.slice(0, MAX_FILENAME_LENGTH - keep.length).join("") + keep.join("");
}

/** The part's media type without parameters, or application/octet-stream when it is none. */
export function normaliseMimeType(mimeType: string | undefined): string {
  const type = (mimeType ?? "").split(";")[0]!.trim().toLowerCase();
  return MEDIA_TYPE.test(type) ? type : FALLBACK_MIME_TYPE;
}

/** Keys are random (unrelated to the public attachment id) and dated, for whoever browses the bucket. */
function newStorageKey(now: Date): string {
  const day = now.toISOString().slice(0, 10).replace(/-/g, "/");
  return `${day}/${randomSecret(18)}`;
}

export type Upload = {
  /** The bytes; read to the end unless the upload is refused (then the caller drains it). */
  content: Readable;
  filename: string | undefined;
  mimeType: string | undefined;
};

export async function stageFile(
  deps: Deps,
  uploaderId: number,
  upload: Upload,
): Promise<z.infer<typeof attachmentRecord>> {
  const limit = deps.config.maxUploadBytes;
  const now = deps.clock.now();
  const storageKey = newStorageKey(now);
  const mimeType = normaliseMimeType(upload.mimeType);

  // The size is known only once the bytes have passed: counting them on the way to storage
  // stops an oversized upload at the first byte too many, before it is all stored.
  let size = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      size += chunk.length;
      done(size > limit ? uploadTooLarge(limit) : null, chunk);
    },
  });
  // pipe() does not pass the source's failure on (an aborted or malformed request): do it here,
  // or the storage would wait for the end of a stream that never comes.
  finished(upload.content, (error) => {
    if (error) counted.destroy(error);
  });
  // The failure reaches the caller through put(); this listener only keeps a failure that
  // comes before the driver starts reading from being an unhandled 'error' event.
  counted.on("error", () => {});
  upload.content.pipe(counted);

  try {
    await deps.storage.put(storageKey, counted, { contentType: mimeType });
  } catch (error) {
    // Whatever the driver may have kept of it goes too: a refused upload stores nothing.
    await discard(deps, storageKey);
    throw size > limit ? uploadTooLarge(limit) : error;
  }

  const row = await deps.db
    .insert(attachments)
    .values({
      id: newId("attachment", now.getTime()),
      uploaderId,
      messageId: null,
      filename: sanitizeFilename(upload.filename),
      mimeType,
      size,
      storageKey,
      createdAt: now,
    })
    .returning()
    .then(
      ([inserted]) => inserted!,
      async (error: unknown) => {
        await discard(deps, storageKey);
        throw error;
      },
    );
  // Staged files download from the channel path (by their uploader only, see download.ts).
  return toAttachmentRecord(row, deps.config.appUrl, "channel");
}

/**
 * Takes back a file staged for a request that then failed (its form broke off after the file
 * part): the row, while no message has claimed it, and the bytes.
 */
export async function unstageFile(deps: Deps, attachmentId: string): Promise<void> {
  const removed = await deps.db
    .delete(attachments)
    .where(and(eq(attachments.id, attachmentId), isNull(attachments.messageId)))
    .returning({ id: attachments.id });
  // The deleted row queued its bytes in file_deletions (a trigger); they go now, before the
  // answer, through the same purge as every deleted attachment's.
  if (removed.length > 0) await purgeDeletedFiles(deps);
}

async function discard(deps: Deps, storageKey: string): Promise<void> {
  await deps.storage.delete(storageKey).catch((error: unknown) => {
    deps.logger.warn({ err: error, storageKey }, "could not delete the bytes of a failed upload");
  });
}
