// The read-positions consumer: a top-level message moves its author's read position in its
// channel or conversation to it (docs/unread.md), so the post itself writes nothing for read
// state. It coalesces (Consumer.coalesceMs): at most once a second, it reads what was posted
// since and moves the authors' positions in one statement with its cursor; what it reads holding
// only replies, room messages and bot posts costs no write. The position moves forward only (a
// later `POST …/read` or a faster device may have passed it already).
import { arrayParam, runStatement } from "../../db/prepared.ts";
import { sql } from "drizzle-orm";
import type { Database } from "../../db/client.ts";
import { channelMembers, conversationReadStates } from "../../db/schema/index.ts";
import { createdMessages } from "./batch-places.ts";
import { batchResultOf, type BatchResult, type Consumer, type CursorMove, type LoggedEvent } from "./kit.ts";

export function readPositionsConsumer(deps: { db: Database }): Consumer {
  return {
    name: "read-positions",
    types: new Set(["message.created"]),
    // An author's position may follow their post by a second: one statement per second of posts,
    // not one per batch the relay positions.
    coalesceMs: 1_000,
    async handle(events: LoggedEvent[], move: CursorMove): Promise<BatchResult> {
      const posts = createdMessages(events)
        .map(({ record }) => record)
        .filter(
          (record) => record.author?.type === "user" && record.parent_message_id === null && record.room_id === null,
        );
      if (posts.length === 0) return "nothing";
      const authorId = (record: (typeof posts)[number]) => (record.author?.type === "user" ? record.author.id : null);
      // Prepared: the same text for every batch (each list is one parameter), planned once.
      const row = await runStatement<{ moved: number; jobs: number }>(
        deps.db,
        sql`
          with ${move.cte},
          newest as (select p.channel_id, p.conversation_id, p.author_id, max(p.id) as id
            from unnest(${arrayParam(posts.map((record) => record.id))}::text[],
              ${arrayParam(posts.map((record) => record.channel_id))}::text[],
              ${arrayParam(posts.map((record) => record.conversation_id))}::text[],
              ${arrayParam(posts.map(authorId))}::integer[]) as p(id, channel_id, conversation_id, author_id)
            where exists (select 1 from moved)
            group by p.channel_id, p.conversation_id, p.author_id),
          channel_positions as (update ${channelMembers} s set last_read_message_id = n.id from newest n
            where s.channel_id = n.channel_id and s.user_id = n.author_id
              and (s.last_read_message_id is null or s.last_read_message_id < n.id)),
          conversation_positions as (update ${conversationReadStates} s set last_read_message_id = n.id from newest n
            where s.conversation_id = n.conversation_id and s.user_id = n.author_id
              and (s.last_read_message_id is null or s.last_read_message_id < n.id))
          select (select count(*) from moved)::integer as moved, 0 as jobs`,
      );
      return batchResultOf(row);
    },
  };
}
