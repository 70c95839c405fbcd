// Message history pages, newest first, by cursor: `before` is a message id (ids are
// time-ordered), `next_cursor` the id to pass next, or null at the beginning. Each message
// carries its translation for the reader (translation/readers.ts); one owed to them that
// nobody asked for yet is asked for now (a pending row and a job).
import { and, desc, eq, inArray, isNull, lt, sql, type SQL } from "drizzle-orm";
import { attachments, messageReactions, messages, users, type Attachment } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { toMessageRecord, type MessageRecord } from "../../records/message.ts";
import { requestTranslations, storedTranslations } from "../translation/jobs.ts";
import { readerLanguage, translationEnabled, translationOwed, translationView } from "../translation/readers.ts";

export const DEFAULT_PAGE = 50;

/** Who reads the page: the user, in a workspace (its member language applies) or a conversation (null). */
export type Reader = { userId: number; workspaceId: string | null };

export async function messagePage(
  deps: Pick<Deps, "db" | "config" | "clock" | "jobOutbox">,
  reader: Reader,
  scope: SQL,
  page: { limit?: number | undefined; before?: string | undefined },
): Promise<{ data: MessageRecord[]; meta: { next_cursor: string | null } }> {
  const { db } = deps;
  const limit = page.limit ?? DEFAULT_PAGE;
  const translating = translationEnabled(deps.config);
  const language = translating ? readerLanguage(db, reader.userId, reader.workspaceId) : undefined;
  const rows = await db
    .select({
      message: messages,
      author: { id: users.id, name: users.name, avatarUrl: users.avatarUrl },
      // The reader's own reactions (each reaction's `me`), in the page's one query.
      mine: sql<string[] | null>`case when ${messages.reactions} <> '[]'::jsonb then
        (select array_agg(${messageReactions.emoji}) from ${messageReactions}
          where ${messageReactions.messageId} = ${messages.id} and ${messageReactions.userId} = ${reader.userId}) end`,
    })
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
  const readIn = await language;
  const owed = readIn ? pageRows.filter((row) => translationOwed(translating, row.message, readIn)) : [];
  const stored = readIn
    ? await storedTranslations(
        db,
        owed.map((row) => row.message.id),
        readIn,
      )
    : new Map();
  if (readIn)
    await requestTranslations(
      deps,
      readIn,
      owed.filter((row) => !stored.has(row.message.id)).map((row) => row.message),
    );
  return {
    data: pageRows.map((row) =>
      toMessageRecord(
        row.message,
        row.author?.id ? row.author : null,
        filesByMessage.get(row.message.id) ?? [],
        deps.config.appUrl,
        readIn ? translationView(true, row.message, readIn, stored.get(row.message.id)) : null,
        row.mine ?? [],
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
