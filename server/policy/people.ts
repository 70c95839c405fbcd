// Who may see whom (presence, docs/presence.md): a user sees themselves, the people who share a
// workspace with them, and the other side of each of their direct conversations. Answered here
// once, for the presence answers and for live presence subscriptions.
import { sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../db/client.ts";
import { conversations, workspaceMembers } from "../../db/schema/index.ts";
import { rowsOf } from "../../db/client.ts";

/**
 * SQL true when `viewerId` may see the user whose id is the SQL expression `person` (an
 * existing user: join users for that).
 */
export function maySee(viewerId: number, person: SQL): SQL {
  return sql`(${person} = ${viewerId}
    or exists (select 1 from ${workspaceMembers} mine join ${workspaceMembers} theirs
      on theirs.workspace_id = mine.workspace_id
      where mine.user_id = ${viewerId} and theirs.user_id = ${person})
    or exists (select 1 from ${conversations} c
      where (c.user_a_id = ${viewerId} and c.user_b_id = ${person})
         or (c.user_b_id = ${viewerId} and c.user_a_id = ${person})))`;
}

/** The workspaces whose membership changes may change whom `userId` sees. */
export async function workspaceIdsOf(db: Executor, userId: number): Promise<string[]> {
  const rows = rowsOf<{ workspace_id: string }>(
    await db.execute(sql`select workspace_id from ${workspaceMembers} where user_id = ${userId}`),
  );
  return rows.map((row) => row.workspace_id);
}
