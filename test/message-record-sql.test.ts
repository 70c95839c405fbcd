// The message record has two makers: toMessageRecord() in the application, and
// messageRecordSql() in PostgreSQL, for the event an edit writes in its own statement. They must
// agree field for field: here one message with a user author, a file, reactions, mentions and a
// client_message_id goes through both, on this run's database.
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import { rowsOf } from "../db/client.ts";
import { messageRecordSql } from "../server/records/message.ts";
import { createWorkspaceWithGeneral, registerUser } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

it("messageRecordSql() builds exactly the record toMessageRecord() builds (without the reader's view)", async () => {
  const owner = await registerUser(ctx.api, { name: "Rec Ord" });
  const { workspaceId, channelId } = await createWorkspaceWithGeneral(ctx.api, owner);
  const form = new FormData();
  form.append("file", new Blob(["hello"], { type: "text/plain" }), "hello.txt");
  const staged = await fetch(`${ctx.server.url}/api/v1/files`, {
    method: "POST",
    headers: { Authorization: `Bearer ${owner.token}`, Accept: "application/json" },
    body: form,
  });
  expect(staged.status).toBe(201);
  const fileId = ((await staged.json()) as { data: { id: string } }).data.id;
  const path = `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`;
  const posted = await ctx.api.post(
    path,
    { content: `Hello <@${owner.id}> <!channel>`, attachment_ids: [fileId], client_message_id: "record-1" },
    { token: owner.token },
  );
  expect(posted.status, JSON.stringify(posted.body)).toBe(201);
  const id: string = posted.body.data.id;
  expect((await ctx.api.put(`${path}/${id}/reactions/tada`, undefined, { token: owner.token })).status).toBe(200);
  expect((await ctx.api.patch(`${path}/${id}`, { content: "Edited <@0>" }, { token: owner.token })).status).toBe(200);

  const history = await ctx.api.get(path, { token: owner.token });
  const fromApplication = history.body.data.find((message: { id: string }) => message.id === id);
  const [row] = rowsOf<{ record: Record<string, unknown> }>(
    await ctx.server.app.deps.db.execute(
      sql`select ${messageRecordSql("m", ctx.server.config.appUrl)} as record from messages m where m.id = ${id}`,
    ),
  );
  const fromDatabase = typeof row!.record === "string" ? JSON.parse(row!.record) : row!.record;
  expect(fromDatabase).toEqual({
    ...fromApplication,
    translation: null,
    reactions: fromApplication.reactions.map(({ emoji, count }: { emoji: string; count: number }) => ({
      emoji,
      count,
    })),
  });
  expect(fromApplication.attachments).toHaveLength(1);
  expect(fromApplication.reactions).toEqual([{ emoji: "tada", count: 1, me: true }]);
  expect(fromApplication.edited_at).not.toBeNull();
});
