// Message history pages, newest first, by cursor: `before` is a message id (ids are
// time-ordered), `next_cursor` the id to pass next, or null at the beginning.
import { and, desc, eq, inArray, isNull, lt, type SQL } from "drizzle-orm";
import type { Executor } from "../../../db/client.ts";
import { attachments, messages, users, type Attachment } from "../../../db/schema/index.ts";
import { toMessageRecord, type MessageRecord } from "../../records/message.ts";

export const DEFAULT_PAGE = 50;

export async function messagePage(
  db: Executor,
  appUrl: string,
  scope: SQL,
  page: { limit?: number | undefined; before?: string | undefined },
): Promise<{ data: MessageRecord[]; meta: { next_cursor: string | null } }> {
  const limit = page.limit ?? DEFAULT_PAGE;
  const rows = await db
    .select({ message: messages, author: { id: users.id, name: users.name, avatarUrl: users.avatarUrl } })
    .from(messages)
    .leftJoin(users, eq(users.id, messages.authorUserId))
    .where(page.before ? and(scope, lt(messages.id, page.before)) : scope)
    .orderBy(desc(messages.id))
    .limit(limit + 1);
  const pageRows = rows.slice(0, limit);
  const files = pageRows.length
    ? await db
        .select()
        .from(attachments)
        .where(
          inArray(
            attachments.messageId,
            pageRows.map((row) => row.message.id),
          ),
        )
    : [];
  const filesByMessage = new Map<string, Attachment[]>();
  for (const file of files) filesByMessage.set(file.messageId!, [...(filesByMessage.get(file.messageId!) ?? []), file]);
  return {
    data: pageRows.map((row) =>
      toMessageRecord(
        row.message,
        row.author?.id ? row.author : null,
        filesByMessage.get(row.message.id) ?? [],
        appUrl,
      ),
    ),
    meta: { next_cursor: rows.length > limit ? pageRows.at(-1)!.message.id : null },
  };
}

/** Top-level messages of a channel, or the replies of one thread. */
export function channelScope(channelId: string, parentMessageId: string | undefined): SQL {
  return parentMessageId
    ? and(eq(messages.channelId, channelId), eq(messages.parentMessageId, parentMessageId))!
    : and(eq(messages.channelId, channelId), isNull(messages.parentMessageId))!;
}
