// The places of a batch of message.created events as SQL rows: `unnest(...) as m(id, kind,
// place_id, workspace_id, author_id, language)`, which the target policy's batch rules
// (server/policy/places.ts) read as `m`.
import { arrayParam } from "../../db/prepared.ts";
import { sql, type SQL } from "drizzle-orm";
import { jobOutbox } from "../../db/schema/index.ts";
import type { MessageRecord } from "../records/message.ts";
import type { LoggedEvent } from "./kit.ts";

export type CreatedMessage = {
  record: MessageRecord;
  sourceLanguage: string | null;
  /** Its event's position and type (message.created, or message.updated for an edit). */
  position: number;
  type: string;
};

/** The messages of message.created events, and of message.updated ones when `edited` is set. */
export function createdMessages(events: LoggedEvent[], options: { edited?: boolean } = {}): CreatedMessage[] {
  return events.flatMap((event) =>
    event.payload.type === "message.created" || (options.edited && event.payload.type === "message.updated")
      ? [
          {
            record: (event.payload.data as { message: MessageRecord }).message,
            sourceLanguage: event.payload.source_language ?? null,
            position: event.position,
            type: event.payload.type,
          },
        ]
      : [],
  );
}

export function messageRows(messages: CreatedMessage[]): SQL {
  const place = ({ record }: CreatedMessage) =>
    record.room_id !== null
      ? { kind: "room", id: record.room_id }
      : record.conversation_id !== null
        ? { kind: "conversation", id: record.conversation_id }
        : { kind: "channel", id: record.channel_id };
  return sql`unnest(${arrayParam(messages.map(({ record }) => record.id))}::text[],
      ${arrayParam(messages.map((message) => place(message).kind))}::text[],
      ${arrayParam(messages.map((message) => place(message).id))}::text[],
      ${arrayParam(messages.map(({ record }) => record.workspace_id))}::text[],
      ${arrayParam(messages.map(({ record }) => (record.author?.type === "user" ? record.author.id : null)))}::integer[],
      ${arrayParam(messages.map(({ sourceLanguage }) => sourceLanguage))}::text[])
    as m(id, kind, place_id, workspace_id, author_id, language)`;
}

/**
 * The jobs of a consumer's batch of messages, as a data-modifying statement for a CTE of its one
 * statement: one `jobName` job per `chunk` of the CTE `owed` (columns `id`, `position`,
 * `chunk`), its payload the chunk's message ids in position order (`messageIds`), its id
 * `<idPrefix>-p<position of its first message's event>` (positions are never reused, so an id
 * never meets another job's); one row returned per job written.
 */
export function messageJobsInsert(jobName: string, idPrefix: string, now: string): SQL {
  return sql`insert into ${jobOutbox} (name, payload, job_id, created_at)
    select ${jobName}, jsonb_build_object('messageIds', jsonb_agg(o.id order by o.position)),
      ${`${idPrefix}-p`}::text || min(o.position)::text, ${now}::timestamptz
    from owed o group by o.chunk
    on conflict (job_id) do nothing
    returning 1`;
}
