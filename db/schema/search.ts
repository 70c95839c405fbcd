import { index, integer, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { byteOrderedTextArray, timestamptz } from "./columns.ts";
import { messages } from "./messages.ts";

/**
 * The search index (docs/search.md): one row per message text a reader can search, its own
 * content (`source` 'content') or a stored translation (`source` the translation's language).
 * `lowered` is the text lower-cased by JavaScript's toLowerCase() (Unicode, not the database's C
 * locale); `keys` are its distinct one- and two-character pieces (code points, none with
 * whitespace), for a GIN index that finds candidates for any term, one character long or a
 * Thai word in a sentence without spaces; `strpos(lowered, term)` then confirms each. The keys
 * compare byte by byte (collation "C"): they are only matched for equality. Written by
 * the search consumer of the event log and by its backfill, never by the post.
 */
export const messageSearch = pgTable(
  "message_search",
  {
    messageId: text("message_id")
      .notNull()
      .references(() => messages.id, { onDelete: "cascade" }),
    /** 'content', or the language of the translation this row holds. */
    source: text("source").notNull(),
    /** Where the message was posted: its channel, conversation or room id. */
    placeId: text("place_id").notNull(),
    authorUserId: integer("author_user_id"),
    lowered: text("lowered").notNull(),
    keys: byteOrderedTextArray("keys").notNull(),
  },
  (table) => [
    primaryKey({ name: "message_search_pkey", columns: [table.messageId, table.source] }),
    index("message_search_place_idx").on(table.placeId, table.messageId),
    index("message_search_keys_idx").using("gin", table.keys),
  ],
);

/**
 * A backfill that walks the messages that existed before a consumer of the event log started
 * (newest first), so that it can resume where it stopped: `before` is the id it reached, null
 * until its first batch; `finished_at` is set when it is done.
 */
export const consumerBackfills = pgTable("consumer_backfills", {
  name: text("name").primaryKey(),
  before: text("before"),
  finishedAt: timestamptz("finished_at"),
});
