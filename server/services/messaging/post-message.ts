// The only way a message is created: by a user (REST or RPC) in a channel, a conversation or a
// temporary room, and by an inbound webhook. Its request costs PostgreSQL one statement (after
// the token check): data-modifying CTEs that check the right to post (the target policy's
// `postingRight`), insert the message, count a reply on its parent, claim its attachments, mark
// the conversation's last message and append the `message.created` event, all or nothing.
// Nothing else is written here: push, translation, outbound webhooks and whatever comes next
// read the event log (server/consumers/), so adding a feature never adds a statement to the post.
import { and, eq, inArray, isNull, sql, type SQL } from "drizzle-orm";
import type { Database } from "../../../db/client.ts";
import { arrayParam, runStatement } from "../../../db/prepared.ts";
import {
  attachments,
  conversations,
  messages,
  streamEvents,
  type Attachment,
  type Language,
  type Message,
  type MessageType,
  type User,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField } from "../../errors.ts";
import { eventPayload, type EventEntry } from "../../events/streams.ts";
import { newId } from "../../ids.ts";
import { placeMemberIds } from "../../policy/audiences.ts";
import { messageStream, postingRight, type MessageTarget } from "../../policy/places.ts";
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
  if (userIds.length === 0) return sql`'{}'::integer[]`;
  return sql`(select coalesce(array_agg(c.id order by c.ord), '{}'::integer[])
    from unnest(${arrayParam(userIds)}::integer[]) with ordinality c(id, ord)
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

  const statement = postStatement({
    message,
    rightToPost: postingRight(authorUser ? { userId: authorUser.id } : { botOf: "channel" }, target, now),
    authorLanguage: authorUser?.preferredLanguage ?? null,
    mentioned: mentionedMembers(deps.db, target, mentions.userIds),
    attachmentIds,
    event: { ...event, sourceLanguage: null },
    also,
  });
  const row = await runStatement<PostRow>(deps.db, statement);
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
  deps.relay.wake();

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

/**
 * The post as one statement. Each write is gated on the one before it through the CTEs'
 * results, so that when any check fails nothing at all is written; the final select says which
 * check failed. Its text depends only on the shape of the post (target kind, parent, files,
 * caller's extra rows), so PostgreSQL plans each shape once per connection.
 */
function postStatement(input: {
  message: Message;
  rightToPost: SQL;
  authorLanguage: Language | null;
  mentioned: SQL;
  attachmentIds: string[];
  event: EventEntry & { sourceLanguage: null };
  also: AlsoWrite;
}): SQL {
  const { message, attachmentIds, also } = input;
  const at = message.createdAt.toISOString();
  const ctes: SQL[] = [sql`allowed as (${input.rightToPost})`];
  const conditions: SQL[] = [];
  if (message.parentMessageId) {
    // Locked as its reply count's update would lock it: a delete of the parent waits, or this waits for it.
    ctes.push(sql`parent as (select id from ${messages} where id = ${message.parentMessageId}
      and channel_id = ${message.channelId} and parent_message_id is null and deleted_at is null
      for no key update)`);
    conditions.push(sql`exists (select 1 from parent)`);
  }
  if (attachmentIds.length > 0) {
    ctes.push(sql`claimable as (select id from ${attachments}
      where id = any(${arrayParam(attachmentIds)}::text[]) and uploader_id = ${message.authorUserId}::integer and message_id is null
      for update)`);
    // Every id one claimable row: a missing, foreign or repeated id leaves the count short.
    conditions.push(sql`(select count(*) from claimable) = ${attachmentIds.length}::integer`);
  }
  if (also.guard) {
    ctes.push(sql`guard as (${also.guard})`);
    conditions.push(sql`exists (select 1 from guard)`);
  }
  const checked = conditions.length > 0 ? sql.join(conditions, sql` and `) : sql`true`;
  ctes.push(sql`inserted as (
    insert into ${messages} (id, workspace_id, channel_id, conversation_id, room_id, author_user_id, author_webhook_id,
      author_name, author_avatar_url, content, type, parent_message_id, reply_count, skip_translation, language,
      client_message_id, mentioned_user_ids, mentions_channel, created_at, updated_at)
    select ${message.id}, ${message.workspaceId}, ${message.channelId}, ${message.conversationId}, ${message.roomId},
      ${message.authorUserId}::integer, ${message.authorWebhookId}, ${message.authorName}, ${message.authorAvatarUrl},
      ${message.content}, ${message.type}, ${message.parentMessageId}, 0, ${message.skipTranslation}::boolean,
      ${message.authorUserId === null ? sql`null::text` : sql`coalesce(a.member_language, ${input.authorLanguage}::text)`},
      ${message.clientMessageId}::text, ${input.mentioned}, ${message.mentionsChannel}::boolean,
      ${at}::timestamptz, ${at}::timestamptz
    from (select * from allowed limit 1) a where ${checked}
    ${
      // A repeat of the author's client_message_id in the place writes nothing; a racing first
      // post is waited for, and the caller reads it after the statement.
      message.clientMessageId === null
        ? sql``
        : sql`on conflict (author_user_id, coalesce(channel_id, conversation_id, room_id), client_message_id)
            where client_message_id is not null and deleted_at is null do nothing`
    }
    returning language, mentioned_user_ids)`);
  if (message.parentMessageId) {
    ctes.push(sql`counted as (update ${messages} set reply_count = reply_count + 1
      where id = ${message.parentMessageId} and exists (select 1 from inserted))`);
  }
  if (attachmentIds.length > 0) {
    ctes.push(sql`claimed as (update ${attachments} set message_id = ${message.id}
      where id in (select id from claimable) and exists (select 1 from inserted))`);
  }
  if (message.conversationId) {
    ctes.push(sql`conversation as (update ${conversations} set last_message_id = ${message.id}, updated_at = ${at}::timestamptz
      where id = ${message.conversationId} and exists (select 1 from inserted))`);
  }
  for (const [index, after] of (also.after ?? []).entries()) ctes.push(sql`${sql.raw(`also_${index}`)} as (${after})`);
  // The event's source language is the message's, known only once the statement has read the membership.
  ctes.push(sql`event as (insert into ${streamEvents} (stream, payload, created_at)
    select ${input.event.stream},
      jsonb_set(jsonb_set(${JSON.stringify(eventPayload(input.event))}::jsonb, '{source_language}', coalesce(to_jsonb(inserted.language), 'null'::jsonb)),
        '{data,message,mentioned_user_ids}', to_jsonb(inserted.mentioned_user_ids)),
      ${at}::timestamptz
    from inserted)`);
  return sql`with ${sql.join(ctes, sql`, `)}
    select (select count(*) from allowed)::integer as allowed,
      ${message.parentMessageId ? sql`(select count(*) from parent)::integer` : sql`null::integer`} as parent_found,
      ${attachmentIds.length > 0 ? sql`(select array_agg(id) from claimable)` : sql`null::text[]`} as claimable,
      ${also.guard ? sql`(select count(*) from guard)::integer` : sql`null::integer`} as guarded,
      exists (select 1 from inserted) as inserted,
      (select language from inserted) as language,
      (select mentioned_user_ids from inserted) as mentioned_user_ids`;
}
