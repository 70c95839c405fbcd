// Whose language is what, and what a reader is shown of a message's translation: the one
// place every door asks (history pages, the post response, live events, the worker).
//
// A reader's language in a workspace is their member preferred_language there when set, else
// their user preferred_language; in a direct conversation it is the user's.
import { eq, sql, type SQL } from "drizzle-orm";
import { rowsOf, type Executor } from "../../../db/client.ts";
import {
  users,
  workspaceMembers,
  type Language,
  type Message,
  type MessageTranslation,
} from "../../../db/schema/index.ts";
import type { Config } from "../../config.ts";
import type { BusEvent, StreamEvent } from "../../events/streams.ts";
import type { MessageRecord } from "../../records/message.ts";
import { hasProse } from "./protect.ts";

export function readerLanguageOf(user: { preferredLanguage: Language }, memberLanguage: Language | null): Language {
  return memberLanguage ?? user.preferredLanguage;
}

/**
 * SQL for the language of user `userId` where they read: a workspace (its member row), or a
 * conversation or room (null); null when there is no such user. For a statement that also
 * answers in the reader's view (an edit, a reaction). `workspaceId` may be a column (SQL), null
 * in the rows of a conversation or room.
 */
export function userReaderLanguageSql(userId: number, workspaceId: string | SQL | null): SQL<Language | null> {
  const memberLanguage =
    workspaceId === null
      ? sql`null::text`
      : sql`(select ${workspaceMembers.preferredLanguage} from ${workspaceMembers}
          where ${workspaceMembers.workspaceId} = ${workspaceId} and ${workspaceMembers.userId} = ${userId})`;
  return sql<Language | null>`coalesce(${memberLanguage}, (select ${users.preferredLanguage} from ${users} where ${users.id} = ${userId}))`;
}

/** The caller's language where they read: a workspace (its member row), or a conversation (null). */
export async function readerLanguage(db: Executor, userId: number, workspaceId: string | null): Promise<Language> {
  const [row] = rowsOf<{ language: Language | null }>(
    await db.execute(sql`select ${userReaderLanguageSql(userId, workspaceId)} as language`),
  );
  return row?.language ?? "en";
}

export type TranslationView = MessageRecord["translation"];

/**
 * What one reader is shown: null when this server does not translate (TRANSLATION_PROVIDER
 * none); "skipped" when the author asked for none; "not_needed" when the message is already in
 * the reader's language or has nothing to translate (only code, links or mentions); else the
 * stored translation's state ("pending" until the worker is done, "done" with the text, or
 * "failed"). A message with no translation row for the reader's language is "pending" when one
 * has been asked for (see requestTranslations), which the caller does for the reads it serves.
 */
export function translationView(
  enabled: boolean,
  message: Pick<Message, "skipTranslation" | "language" | "content">,
  readerLanguage: Language,
  stored: Pick<MessageTranslation, "status" | "content"> | undefined,
): TranslationView {
  if (!enabled) return null;
  if (message.skipTranslation) return { language: readerLanguage, content: null, status: "skipped" };
  if (message.language === readerLanguage || !hasProse(message.content))
    return { language: readerLanguage, content: null, status: "not_needed" };
  if (!stored) return { language: readerLanguage, content: null, status: "pending" };
  return {
    language: readerLanguage,
    content: stored.status === "done" ? stored.content : null,
    status: stored.status,
  };
}

/** Whether a reader of `readerLanguage` is owed a translation of the message (none stored yet). */
export function translationOwed(
  enabled: boolean,
  message: Pick<Message, "skipTranslation" | "language" | "content">,
  readerLanguage: Language,
): boolean {
  return enabled && !message.skipTranslation && message.language !== readerLanguage && hasProse(message.content);
}

export const translationEnabled = (config: Pick<Config, "translation">) => config.translation.provider !== "none";

/**
 * The languages one live subscriber reads in, kept current as they change them: loaded when
 * the subscription starts, then updated from the `user.updated` and `member.updated` events
 * about them that the subscription sees (it follows the user's own stream for that).
 */
export class ReaderLanguages {
  private userLanguage: Language = "en";
  private readonly memberLanguages = new Map<string, Language | null>();

  constructor(
    private readonly userId: number,
    private readonly enabled: boolean,
  ) {}

  async load(db: Executor): Promise<this> {
    const rows = await db
      .select({
        user: users.preferredLanguage,
        workspaceId: workspaceMembers.workspaceId,
        member: workspaceMembers.preferredLanguage,
      })
      .from(users)
      .leftJoin(workspaceMembers, eq(workspaceMembers.userId, users.id))
      .where(eq(users.id, this.userId));
    for (const row of rows) {
      this.userLanguage = row.user;
      if (row.workspaceId !== null) this.memberLanguages.set(row.workspaceId, row.member);
    }
    return this;
  }

  languageFor(event: Pick<StreamEvent, "workspace_id">): Language {
    return (event.workspace_id && this.memberLanguages.get(event.workspace_id)) || this.userLanguage;
  }

  /** Notes a change of the subscriber's languages. Called for every event the subscription receives. */
  observe(event: StreamEvent): void {
    if (event.type === "user.updated" && event.data.user.id === this.userId) {
      this.userLanguage = event.data.user.preferred_language;
    } else if (
      (event.type === "member.updated" || event.type === "member.joined") &&
      event.data.member.user_id === this.userId &&
      event.workspace_id
    ) {
      this.memberLanguages.set(event.workspace_id, event.data.member.preferred_language);
    }
  }

  /**
   * The event as this subscriber sees it: a new message carries the translation state for
   * their language; a translation.ready is shown in their language (one event may announce
   * several), or not at all when it has none for them (null: not delivered).
   * One object per distinct view of an event, so its JSON is still made once per view.
   */
  present({ event, sourceLanguage, otherTranslations }: BusEvent): StreamEvent | null {
    if (event.type === "translation.ready") {
      const language = this.languageFor(event);
      if (event.data.language === language) return event;
      // The message's other languages stored with it: each reader's view made once per language.
      const other = otherTranslations?.find((translation) => translation.language === language);
      return other ? viewOf(event, language, () => ({ ...event, data: other })) : null;
    }
    if (event.type !== "message.created" && event.type !== "message.updated") return event;
    const { message } = event.data;
    const language = this.languageFor(event);
    // The view depends on the event and the language only: worked out (the content's prose
    // looked for) once per language, not once per subscriber.
    return viewOf(event, this.enabled ? language : "", () => {
      const view = translationView(
        this.enabled,
        { skipTranslation: message.skip_translation, language: sourceLanguage ?? null, content: message.content },
        language,
        undefined,
      );
      return { ...event, data: { message: { ...message, translation: view } } } as StreamEvent;
    });
  }
}

/** Each event's views, by the reader's language (one when the server does not translate); they go with the event. */
const presented = new WeakMap<StreamEvent, Map<string, StreamEvent>>();

/** The view of `event` for `key`, made by `make` the first time it is asked for. */
function viewOf(event: StreamEvent, key: string, make: () => StreamEvent): StreamEvent {
  let views = presented.get(event);
  if (!views) presented.set(event, (views = new Map()));
  let seen = views.get(key);
  if (!seen) views.set(key, (seen = make()));
  return seen;
}
