// The only way a message is created: by a user (REST or RPC) in a channel, a conversation or a
// temporary room, and by an inbound webhook. Its request costs PostgreSQL one statement (after
// the token check): data-modifying CTEs that check the right to post (the target policy's
// `postingRight`), insert the message, count a reply on its parent, claim its attachments, mark
// the conversation's last message and append the `message.created` event, all or nothing.
// Nothing else is written here: push, translation, outbound webhooks and whatever comes next
// read the event log (server/consumers/), so adding a feature never adds a statement to the post.
import { and, eq, inArray, isNull, sql, type Placeholder, type Query, type SQL } from "drizzle-orm";
import type { Database } from "../../../db/client.ts";
import { arrayLiteral, arrayParam, prepared, renderStatement, runRendered } from "../../../db/prepared.ts";
import { retryingRaces } from "../../../db/races.ts";
import {
  attachments,
  conversations,
  messages,
  type Attachment,
  type Language,
  type Message,
  type MessageType,
  type User,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { commitWithEvents, eventCte, eventPayload, EVENTS_WRITTEN, type EventEntry } from "../../events/streams.ts";
import { newId } from "../../ids.ts";
import { placeMemberIds } from "../../policy/audiences.ts";
import { messageStream, postingRight, type BoundTarget, type MessageTarget } from "../../policy/places.ts";
import { toMessageRecord, type MessageRecord } from "../../records/message.ts";
import { readerLanguageOf, translationEnabled, translationView } from "../translation/readers.ts";
import { messagePage } from "./history.ts";

export { messageStream, messageTargetOf, type MessageTarget } from "../../policy/places.ts";

export type MessageAuthor =
  | { type: "user"; user: Pick<User, "id" | "name" | "avatarUrl" | "preferredLanguage"> }
  | { type: "bot"; webhookId: string; name: string; avatarUrl: string | null };

/**
 * Rows a caller writes with the message, in its statement (an inbound webhook's idempotency key
 * and request log entry), as CTE bodies. `guard` runs when the author may post and must return a
 * row for the message to be written (a key already taken: nothing is written, and the result
 * says `guarded`); it must itself write only `where exists (select 1 from allowed)`. Each of
 * `after` must write only `where exists (select 1 from inserted)`: when the message was written.
 */
export type AlsoWrite = { guard?: SQL; after?: SQL[] };

export type PostMessageInput = {
  author: MessageAuthor;
  /** A user author must be a member or participant there (checked as the message is written). */
  target: MessageTarget;
  content?: string | undefined;
  attachmentIds?: string[] | undefined;
  parentMessageId?: string | null | undefined;
  type?: MessageType | null | undefined;
  skipTranslation?: boolean | null | undefined;
  /** The client's id for the message: a repeat by the same author in the same place posts nothing. */
  clientMessageId?: string | null | undefined;
  alsoWrite?: ((record: MessageRecord) => AlsoWrite) | undefined;
};

/**
 * What became of a post: written; a repeat of the author's `client_message_id` there (nothing
 * written, the first message); not allowed (the caller knows whether that is 404 or 403); or
 * stopped by the caller's guard.
 */
export type PostOutcome =
  | { kind: "posted"; record: MessageRecord }
  | { kind: "repeated"; record: MessageRecord }
  | { kind: "not_allowed" }
  | { kind: "guarded" };

type PostRow = {
  allowed: number;
  parent_found: number | null;
  claimable: string[] | null;
  guarded: number | null;
  inserted: boolean;
  language: Language | null;
  mentioned_user_ids: number[] | null;
  events_written: number;
};

/** `<@USER_ID>` mentions, in order, once each, and whether `<!channel>` or `<!here>` is there. */
export function parseMentions(content: string): { userIds: number[]; channel: boolean } {
  const userIds: number[] = [];
  for (const [, id] of content.matchAll(/<@(\d{1,10})>/g)) {
    const userId = Number(id);
    if (userId <= 2_147_483_647 && !userIds.includes(userId)) userIds.push(userId);
  }
  return { userIds, channel: /<!(?:channel|here)>/.test(content) };
}

/**
 * SQL selecting the mentioned users who are members of the place (and so read it), as an
 * integer array in the order mentioned: the contract's Mentions rule, for a post and an edit.
 */
export function mentionedMembers(db: Database, target: MessageTarget, userIds: number[]): SQL {
  return userIds.length === 0 ? sql`'{}'::integer[]` : mentionedMembersOf(db, target, arrayParam(userIds));
}

/** The same, with the ids as one array parameter (a placeholder in a statement built once). */
function mentionedMembersOf(db: Database, target: BoundTarget, userIds: SQL | Placeholder): SQL {
  return sql`(select coalesce(array_agg(c.id order by c.ord), '{}'::integer[])
    from unnest(${userIds}::integer[]) with ordinality c(id, ord)
    where c.id in (${placeMemberIds(db, target)}))`;
}

/**
 * Writes the message and its event in one statement. Returns null, writing nothing, when a
 * user author may not post to the target, or a bot's channel is not one of its workspace: the
 * caller knows which error to give. A bad parent or attachment is 422 (after the right to post).
 */
export async function postMessage(
  deps: Deps,
  input: PostMessageInput,
): Promise<{ record: MessageRecord; created: boolean } | null> {
  const outcome = await postMessageOutcome(deps, input);
  if (outcome.kind === "guarded") throw new Error("postMessage: a guard without postMessageOutcome");
  if (outcome.kind === "not_allowed") return null;
  return { record: outcome.record, created: outcome.kind === "posted" };
}

export async function postMessageOutcome(deps: Deps, input: PostMessageInput): Promise<PostOutcome> {
  const now = deps.clock.now();
  const { target } = input;
  const authorUser = input.author.type === "user" ? input.author.user : null;
  const message: Message = {
    id: newId("message", now.getTime()),
    workspaceId: target.kind === "channel" ? target.workspaceId : null,
    channelId: target.kind === "channel" ? target.channelId : null,
    conversationId: target.kind === "conversation" ? target.conversationId : null,
    roomId: target.kind === "room" ? target.roomId : null,
    authorUserId: authorUser?.id ?? null,
    authorWebhookId: input.author.type === "bot" ? input.author.webhookId : null,
    authorName: input.author.type === "bot" ? input.author.name : null,
    authorAvatarUrl: input.author.type === "bot" ? input.author.avatarUrl : null,
    content: input.content ?? "",
    type: input.type ?? "text",
    parentMessageId: input.parentMessageId ?? null,
    replyCount: 0,
    skipTranslation: input.skipTranslation ?? false,
    // The statement sets it for a user author: their member language there, else their own.
    language: null,
    clientMessageId: input.clientMessageId ?? null,
    // The statement keeps those of them who can read the message.
    mentionedUserIds: [],
    mentionsChannel: false,
    reactions: [],
    editedAt: null,
    deletedAt: null,
    createdAt: now,
    updatedAt: now,
  };
  const mentions = parseMentions(message.content);
  message.mentionsChannel = mentions.channel;
  if (message.parentMessageId && target.kind !== "channel")
    throw invalidField("parent_message_id", "Threads exist in channels only.");

  // The files are read before the statement (their details go into the event); the statement
  // claims them only if every one is still the poster's and unattached.
  const attachmentIds = input.attachmentIds ?? [];
  const files = await stagedFiles(deps.db, authorUser?.id ?? null, attachmentIds);
  const record = toMessageRecord(message, authorUser, files, deps.config.appUrl, null);
  const also = input.alsoWrite?.(record) ?? {};
  const event: EventEntry = { ...messageStream(message), type: "message.created", data: { message: record } };

  const shape: PostShape = {
    target: target.kind,
    bot: authorUser === null,
    parent: message.parentMessageId !== null,
    attachments: attachmentIds.length > 0,
    clientMessageId: message.clientMessageId !== null,
    mentions: mentions.userIds.length > 0,
  };
  // One statement that wrote nothing when it lost a deadlock (replies racing on their parent's
  // count), so it runs again: the post is not refused for another's timing.
  const row = await commitWithEvents(deps, () =>
    retryingRaces(
      () =>
        runRendered<PostRow>(deps.db, postQuery(deps.db, shape, also), {
          id: message.id,
          workspace_id: message.workspaceId,
          channel_id: message.channelId,
          conversation_id: message.conversationId,
          room_id: message.roomId,
          author_user_id: message.authorUserId,
          author_webhook_id: message.authorWebhookId,
          author_name: message.authorName,
          author_avatar_url: message.authorAvatarUrl,
          author_language: authorUser?.preferredLanguage ?? null,
          content: message.content,
          type: message.type,
          parent_message_id: message.parentMessageId,
          skip_translation: message.skipTranslation,
          client_message_id: message.clientMessageId,
          mentioned_user_ids: arrayLiteral(mentions.userIds),
          mentions_channel: message.mentionsChannel,
          attachment_ids: arrayLiteral(attachmentIds),
          attachment_count: attachmentIds.length,
          at: now.toISOString(),
          stream: event.stream,
          payload: JSON.stringify(eventPayload({ ...event, sourceLanguage: null })),
        }),
      { attempts: POST_ATTEMPTS },
    ),
  );
  if (!row || row.allowed === 0) return { kind: "not_allowed" };
  if (!row.inserted && message.clientMessageId !== null && authorUser) {
    // A repeat (also one that lost a race, or whose files the first post claimed): one read, on this path only.
    const first = await repeatedMessage(deps, authorUser.id, target, message.clientMessageId);
    if (first) return { kind: "repeated", record: first };
  }
  if (row.parent_found === 0)
    throw invalidField("parent_message_id", "The parent message must be a top-level message of this channel.");
  if (attachmentIds.length > 0 && !row.inserted) throw attachmentError(attachmentIds, row.claimable ?? []);
  if (row.guarded === 0) return { kind: "guarded" };
  if (!row.inserted) throw new Error("postMessage: the message was not written, for no known reason");

  message.language = authorUser ? readerLanguageOf(authorUser, row.language) : null;
  message.mentionedUserIds = row.mentioned_user_ids ?? [];
  // The author reads it in the language they wrote it in; a bot's post has no reader yet.
  const view =
    message.language === null
      ? null
      : translationView(translationEnabled(deps.config), message, message.language, undefined);
  return {
    kind: "posted",
    record: { ...record, mentioned_user_ids: message.mentionedUserIds, translation: view },
  };
}

/** The author's live message with this client_message_id in the place, as they read it, if any. */
async function repeatedMessage(
  deps: Deps,
  authorId: number,
  target: MessageTarget,
  clientMessageId: string,
): Promise<MessageRecord | undefined> {
  const place = messageTargetColumn(target);
  const page = await messagePage(
    deps,
    { userId: authorId, workspaceId: target.kind === "channel" ? target.workspaceId : null },
    and(
      eq(messages.authorUserId, authorId),
      eq(place.column, place.id),
      eq(messages.clientMessageId, clientMessageId),
      isNull(messages.deletedAt),
    )!,
    { limit: 1 },
  );
  return page.data[0];
}

/** The column that names a message's place, and its value for the target. */
function messageTargetColumn(target: MessageTarget) {
  if (target.kind === "channel") return { column: messages.channelId, id: target.channelId };
  if (target.kind === "conversation") return { column: messages.conversationId, id: target.conversationId };
  return { column: messages.roomId, id: target.roomId };
}

/** The poster's staged files, in the order given (only those still theirs and unattached). */
async function stagedFiles(db: Database, uploaderId: number | null, ids: string[]): Promise<Attachment[]> {
  if (ids.length === 0 || uploaderId === null) return [];
  const rows = await db
    .select()
    .from(attachments)
    .where(and(inArray(attachments.id, ids), eq(attachments.uploaderId, uploaderId), isNull(attachments.messageId)));
  const byId = new Map(rows.map((row) => [row.id, row]));
  // Missing or repeated ids: the statement claims nothing (422 after the right to post is known).
  return ids.flatMap((id) => byId.get(id) ?? []);
}

/** 422 attachment_ids.N for the first id that is not the poster's to claim (or repeats one before it). */
function attachmentError(ids: string[], claimable: string[]) {
  const index = ids.findIndex((id, position) => !claimable.includes(id) || ids.indexOf(id) !== position);
  return invalidField(
    `attachment_ids.${Math.max(index, 0)}`,
    "The attachment is not a file you uploaded, or it is already attached.",
  );
}

/** What decides the post statement's text: everything else about a post is a value. */
type PostShape = {
  target: MessageTarget["kind"];
  /** An inbound webhook's post (no author user). */
  bot: boolean;
  parent: boolean;
  attachments: boolean;
  clientMessageId: boolean;
  mentions: boolean;
};

/**
 * The post statement for this shape, rendered with placeholders for its values. Built once per
 * shape and kept, unless the caller writes rows of its own with it (an inbound webhook's), whose
 * SQL carries their values.
 */
/** A post's statement runs at most this often when it keeps losing deadlocks. */
const POST_ATTEMPTS = 4;

function postQuery(db: Database, shape: PostShape, also: AlsoWrite): Query {
  if (also.guard || (also.after?.length ?? 0) > 0) return renderStatement(postStatement(db, shape, also));
  return prepared(db, `post_message ${JSON.stringify(shape)}`, (db) => renderStatement(postStatement(db, shape, {})));
}

const value = (name: string) => sql.placeholder(name);

/** The target of a shape, its ids placeholders. */
function boundTarget(kind: MessageTarget["kind"]): BoundTarget {
  if (kind === "channel") return { kind, workspaceId: value("workspace_id"), channelId: value("channel_id") };
  if (kind === "conversation") return { kind, conversationId: value("conversation_id") };
  return { kind, roomId: value("room_id") };
}

/**
 * The post as one statement. Each write is gated on the one before it through the CTEs'
 * results, so that when any check fails nothing at all is written; the final select says which
 * check failed. Its text depends only on the shape of the post (target kind, parent, files,
 * caller's extra rows), so it is rendered once per shape and PostgreSQL plans each shape once
 * per connection; the values are placeholders (see `postMessageOutcome` for their names).
 */
function postStatement(db: Database, shape: PostShape, also: AlsoWrite): SQL {
  const target = boundTarget(shape.target);
  const ctes: SQL[] = [
    sql`allowed as (${postingRight(shape.bot ? { botOf: "channel" } : { userId: value("author_user_id") }, target, value("at"))})`,
  ];
  const conditions: SQL[] = [];
  if (shape.parent) {
    // Locked as its reply count's update would lock it: a delete of the parent waits, or this waits for it.
    ctes.push(sql`parent as (select id from ${messages} where id = ${value("parent_message_id")}
      and channel_id = ${value("channel_id")} and parent_message_id is null and deleted_at is null
      for no key update)`);
    conditions.push(sql`exists (select 1 from parent)`);
  }
  if (shape.attachments) {
    ctes.push(sql`claimable as (select id from ${attachments}
      where id = any(${value("attachment_ids")}::text[]) and uploader_id = ${value("author_user_id")}::integer and message_id is null
      for update)`);
    // Every id one claimable row: a missing, foreign or repeated id leaves the count short.
    conditions.push(sql`(select count(*) from claimable) = ${value("attachment_count")}::integer`);
  }
  if (also.guard) {
    ctes.push(sql`guard as (${also.guard})`);
    conditions.push(sql`exists (select 1 from guard)`);
  }
  const checked = conditions.length > 0 ? sql.join(conditions, sql` and `) : sql`true`;
  const mentioned = shape.mentions ? mentionedMembersOf(db, target, value("mentioned_user_ids")) : sql`'{}'::integer[]`;
  ctes.push(sql`inserted as (
    insert into ${messages} (id, workspace_id, channel_id, conversation_id, room_id, author_user_id, author_webhook_id,
      author_name, author_avatar_url, content, type, parent_message_id, reply_count, skip_translation, language,
      client_message_id, mentioned_user_ids, mentions_channel, created_at, updated_at)
    select ${value("id")}, ${value("workspace_id")}, ${value("channel_id")}, ${value("conversation_id")}, ${value("room_id")},
      ${value("author_user_id")}::integer, ${value("author_webhook_id")}, ${value("author_name")}, ${value("author_avatar_url")},
      ${value("content")}, ${value("type")}, ${value("parent_message_id")}, 0, ${value("skip_translation")}::boolean,
      ${shape.bot ? sql`null::text` : sql`coalesce(a.member_language, ${value("author_language")}::text)`},
      ${value("client_message_id")}::text, ${mentioned}, ${value("mentions_channel")}::boolean,
      ${value("at")}::timestamptz, ${value("at")}::timestamptz
    from (select * from allowed limit 1) a where ${checked}
    ${
      // A repeat of the author's client_message_id in the place writes nothing; a racing first
      // post is waited for, and the caller reads it after the statement.
      shape.clientMessageId
        ? sql`on conflict (author_user_id, coalesce(channel_id, conversation_id, room_id), client_message_id)
            where client_message_id is not null and deleted_at is null do nothing`
        : sql``
    }
    returning language, mentioned_user_ids)`);
  if (shape.parent) {
    ctes.push(sql`counted as (update ${messages} set reply_count = reply_count + 1
      where id = ${value("parent_message_id")} and exists (select 1 from inserted))`);
  }
  if (shape.attachments) {
    ctes.push(sql`claimed as (update ${attachments} set message_id = ${value("id")}
      where id in (select id from claimable) and exists (select 1 from inserted))`);
  }
  if (shape.target === "conversation") {
    ctes.push(sql`conversation as (update ${conversations} set last_message_id = ${value("id")}, updated_at = ${value("at")}::timestamptz
      where id = ${value("conversation_id")} and exists (select 1 from inserted))`);
  }
  for (const [index, after] of (also.after ?? []).entries()) ctes.push(sql`${sql.raw(`also_${index}`)} as (${after})`);
  // The event's source language is the message's, known only once the statement has read the membership.
  ctes.push(
    eventCte(sql`select ${value("stream")},
      jsonb_set(jsonb_set(${value("payload")}::jsonb, '{source_language}', coalesce(to_jsonb(inserted.language), 'null'::jsonb)),
        '{data,message,mentioned_user_ids}', to_jsonb(inserted.mentioned_user_ids)),
      ${value("at")}::timestamptz
    from inserted`),
  );
  return sql`with ${sql.join(ctes, sql`, `)}
    select (select count(*) from allowed)::integer as allowed,
      ${shape.parent ? sql`(select count(*) from parent)::integer` : sql`null::integer`} as parent_found,
      ${shape.attachments ? sql`(select array_agg(id) from claimable)` : sql`null::text[]`} as claimable,
      ${also.guard ? sql`(select count(*) from guard)::integer` : sql`null::integer`} as guarded,
      exists (select 1 from inserted) as inserted,
      (select language from inserted) as language,
      (select mentioned_user_ids from inserted) as mentioned_user_ids,
      ${EVENTS_WRITTEN}`;
}
