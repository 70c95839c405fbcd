// GET /api/v1/message-attachments/{id}/download and /direct-message-attachments/{id}/download.
// An attachment is as visible as its message: a channel's to the workspace members who can see
// the channel, a conversation's to its two participants, a room's to its members while it
// lives (at the channel path); a staged file to its uploader only
// (at the channel path, where its record points). Anything else, the wrong path included, is
// 404 as if the attachment did not exist.
import { eq } from "drizzle-orm";
import { attachments, messages, type Attachment } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { AppError, notFound } from "../../errors.ts";
import { FileNotStoredError, type StoredObject } from "../../storage/file-storage.ts";
import { messageTargetOf, requireReadable } from "../../policy/places.ts";

export const ATTACHMENT_NOT_FOUND = "Attachment not found.";

export type AttachmentKind = "channel" | "direct";

export type AttachmentDownload = StoredObject & { attachment: Attachment };

/** The access rules of the message's channel or conversation, with their 404s told as the attachment's. */
async function asAttachmentNotFound<T>(check: Promise<T>): Promise<T> {
  try {
    return await check;
  } catch (error) {
    if (error instanceof AppError && error.kind === "not_found") throw notFound(ATTACHMENT_NOT_FOUND);
    throw error;
  }
}

export async function openAttachment(
  deps: Deps,
  userId: number,
  attachmentId: string,
  kind: AttachmentKind,
): Promise<AttachmentDownload> {
  const [row] = await deps.db
    .select({ attachment: attachments, message: messages })
    .from(attachments)
    .leftJoin(messages, eq(messages.id, attachments.messageId))
    .where(eq(attachments.id, attachmentId))
    .limit(1);
  if (!row) throw notFound(ATTACHMENT_NOT_FOUND);
  const { attachment, message } = row;

  if (!message) {
    if (kind !== "channel" || attachment.uploaderId !== userId) throw notFound(ATTACHMENT_NOT_FOUND);
  } else {
    // A direct message's files download from the direct path; a room's from the channel path,
    // as its members' other messages' do.
    const place = messageTargetOf(message);
    if (kind !== (place.kind === "conversation" ? "direct" : "channel")) throw notFound(ATTACHMENT_NOT_FOUND);
    await asAttachmentNotFound(requireReadable(deps, userId, place));
  }

  try {
    return { attachment, ...(await deps.storage.get(attachment.storageKey)) };
  } catch (error) {
    // The row outlived its bytes (a prune or a delete raced this request): nothing to serve.
    if (error instanceof FileNotStoredError) throw notFound(ATTACHMENT_NOT_FOUND);
    throw error;
  }
}
