// Message history pages by cursor (ids are time-ordered, compared as text):
// - `before` (or none): newest first, the `limit` messages older than it; `next_cursor` is the id
//   to pass as `before` next, or null at the beginning.
// - `after`: oldest first, the `limit` messages newer than it; `next_cursor` is the id to pass as
//   `after` next, or null at the end.
// - `around`: that message with up to floor(limit / 2) messages on each side, newest first;
//   `before_cursor` (the oldest on the page) and `after_cursor` (the newest), each null when
//   nothing lies beyond.
// `before`, `after` and `around` exclude each other (422 on the later key); an `after` or `around`
// that is not a message of the place (the anchor scope: a channel's top-level history takes its
// thread replies too, as positions) is a 422 on its key (`before` is a bare position, as ever).
// Each message carries its translation for the reader (translation/readers.ts); one owed to them
// that nobody asked for yet is asked for now (a pending row and a job).
import { and, asc, desc, eq, gt, inArray, isNull, lt, sql, type SQL } from "drizzle-orm";
import { unionAll } from "drizzle-orm/pg-core";
import {
  attachments,
  messageReactions,
  messages,
  users,
  type Attachment,
  type Language,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { toMessageRecord, type MessageRecord } from "../../records/message.ts";
import { requestTranslations, storedTranslations } from "../translation/jobs.ts";
import { readerLanguage, translationEnabled, translationOwed, translationView } from "../translation/readers.ts";

export const DEFAULT_PAGE = 50;

/**
 * Who reads the page: the user, in a workspace (its member language applies) or a conversation
 * (null); `language`, their reading language there when the caller knows it already.
 */
export type Reader = { userId: number; workspaceId: string | null; language?: Language | undefined };

/** What a history request asks for: at most one of `before`, `after` and `around`. */
export type PageRequest = {
  limit?: number | undefined;
  before?: string | undefined;
  after?: string | undefined;
  around?: string | undefined;
};

/** `next_cursor` on `before` (and default) and `after` pages; the two cursors on `around` pages. */
export type PageMeta = { next_cursor: string | null } | { before_cursor: string | null; after_cursor: string | null };

export type MessagePage = { data: MessageRecord[]; meta: PageMeta };

/** The 422 for keys sent together: the later one of before, after, around (Laravel's missing_with). */
function exclusiveCursors(page: PageRequest): void {
  if (page.around !== undefined && (page.before !== undefined || page.after !== undefined)) {
    const present = [page.before !== undefined && "before", page.after !== undefined && "after"].filter(Boolean);
    throw invalidField("around", `The around field must be missing when ${present.join(" / ")} is present.`);
  }
  if (page.after !== undefined && page.before !== undefined)
    throw invalidField("after", "The after field must be missing when before is present.");
}

const notInScope = (key: "after" | "around") => invalidField(key, `The selected ${key} is invalid.`);

/**
 * A page of the messages `scope` lists. `anchorScope` is where an `after` or `around` message may
 * come from (the scope itself unless given): a channel's top-level history takes any message of
 * the channel, a thread reply included, since a reply's id is a position like any other (a read
 * position, a search hit). An `after` page starts after it; an `around` page shows it with the
 * listed messages on each side of its id.
 */
export async function messagePage(
  deps: Pick<Deps, "db" | "config" | "clock" | "jobOutbox">,
  reader: Reader,
  scope: SQL,
  page: PageRequest,
  anchorScope: SQL = scope,
): Promise<MessagePage> {
  exclusiveCursors(page);
  const { db } = deps;
  const limit = page.limit ?? DEFAULT_PAGE;
  const translating = translationEnabled(deps.config);
  const language = translating ? (reader.language ?? readerLanguage(db, reader.userId, reader.workspaceId)) : undefined;
  // The page's rows in one statement: each message with its author and the reader's own
  // reactions (each reaction's `me`).
  const rowsWhere = (where: SQL | undefined) =>
    db
      .select({
        message: messages,
        author: { id: users.id, name: users.name, avatarUrl: users.avatarUrl },
        mine: sql<string[] | null>`case when ${messages.reactions} <> '[]'::jsonb then
          (select array_agg(${messageReactions.emoji}) from ${messageReactions}
            where ${messageReactions.messageId} = ${messages.id} and ${messageReactions.userId} = ${reader.userId}) end`,
      })
      .from(messages)
      .leftJoin(users, eq(users.id, messages.authorUserId))
      .where(where)
      .$dynamic();
  type Row = Awaited<ReturnType<typeof rowsWhere>>[number];

  let pageRows: Row[];
  let meta: PageMeta;
  if (page.after !== undefined) {
    const after = page.after;
    // One statement: the anchor when it is a message of the place (the check, folded in), and up
    // to `limit` + 1 newer listed ones (the extra one tells whether another page follows).
    const rows = await unionAll(
      rowsWhere(and(anchorScope, eq(messages.id, after))).limit(1),
      rowsWhere(and(scope, gt(messages.id, after)))
        .orderBy(asc(messages.id))
        .limit(limit + 1),
    );
    if (!rows.some((row) => row.message.id === after)) throw notInScope("after");
    const newer = rows.filter((row) => row.message.id > after).sort((a, b) => (a.message.id < b.message.id ? -1 : 1));
    pageRows = newer.slice(0, limit);
    meta = { next_cursor: newer.length > limit ? pageRows.at(-1)!.message.id : null };
  } else if (page.around !== undefined) {
    const around = page.around;
    const half = Math.floor(limit / 2);
    // One statement: up to half + 1 older listed messages, the anchor (a message of the place),
    // and up to half + 1 newer listed ones.
    const rows = await unionAll(
      rowsWhere(and(scope, lt(messages.id, around)))
        .orderBy(desc(messages.id))
        .limit(half + 1),
      rowsWhere(and(anchorScope, eq(messages.id, around))).limit(1),
      rowsWhere(and(scope, gt(messages.id, around)))
        .orderBy(asc(messages.id))
        .limit(half + 1),
    );
    const anchor = rows.find((row) => row.message.id === around);
    if (!anchor) throw notInScope("around");
    const older = rows.filter((row) => row.message.id < around).sort((a, b) => (a.message.id < b.message.id ? 1 : -1));
    const newer = rows.filter((row) => row.message.id > around).sort((a, b) => (a.message.id < b.message.id ? -1 : 1));
    const olderShown = older.slice(0, half);
    const newerShown = newer.slice(0, half);
    pageRows = [...newerShown.reverse(), anchor, ...olderShown];
    meta = {
      before_cursor: older.length > half ? pageRows.at(-1)!.message.id : null,
      after_cursor: newer.length > half ? pageRows[0]!.message.id : null,
    };
  } else {
    const rows = await rowsWhere(page.before ? and(scope, lt(messages.id, page.before)) : scope)
      .orderBy(desc(messages.id))
      .limit(limit + 1);
    pageRows = rows.slice(0, limit);
    meta = { next_cursor: rows.length > limit ? pageRows.at(-1)!.message.id : null };
  }

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
    meta,
  };
}

/** Every message of a channel, replies included: where a top-level page's `after` or `around` may point. */
export function channelAnchorScope(channelId: string): SQL {
  return eq(messages.channelId, channelId);
}

/** Top-level messages of a channel, or the replies of one thread. */
export function channelScope(channelId: string, parentMessageId: string | undefined): SQL {
  return parentMessageId
    ? and(eq(messages.channelId, channelId), eq(messages.parentMessageId, parentMessageId))!
    : and(eq(messages.channelId, channelId), isNull(messages.parentMessageId))!;
}
