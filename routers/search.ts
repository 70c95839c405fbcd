// Message search (docs/search.md): one procedure, GET /api/v1/search/messages over REST.
import { z } from "zod";
import { searchPageRecord } from "../server/records/search.ts";
import { searchMessages } from "../server/services/search/search-messages.ts";
import { codePointLength } from "../server/services/search/text.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { integerIdInput } from "./inputs.ts";
import { pageInput } from "./messages.ts";

/** The longest `q`, in code points (the contract). */
export const MAX_QUERY_LENGTH = 200;

const queryInput = z.string().superRefine((q, ctx) => {
  if (q.trim().length === 0) ctx.addIssue({ code: "custom", message: "The :attribute field is required." });
  else if (codePointLength(q) > MAX_QUERY_LENGTH)
    ctx.addIssue({
      code: "custom",
      message: `The :attribute field must not be greater than ${MAX_QUERY_LENGTH} characters.`,
    });
});

export const searchRouter = router({
  messages: authedProcedure
    .meta({
      openapi: {
        summary: "Search messages",
        method: "GET",
        path: "/api/v1/search/messages",
        tags: ["Search"],
        description:
          "Messages the caller can read now, newest first, where every whitespace-separated term of `q` (1 to 200 characters) is found, case-insensitively and literally, anywhere in the content, or every term in the caller's own stored translation (`matched_in` says which). Any language, including those written without spaces; a single character is a term. Narrow with `workspace_id`, `channel_id`, `conversation_id`, `room_id` (404 when the caller cannot read it) and `author_id`. `limit` 1..100 (default 20); `before` the `meta.next_cursor` of the previous page.",
      },
    })
    .input(
      z.object({
        q: queryInput.describe("1 to 200 characters; every whitespace-separated term must be found"),
        workspace_id: z.string().optional().describe("only this workspace's channels"),
        channel_id: z.string().optional().describe("only this channel (its thread replies included)"),
        conversation_id: z.string().optional().describe("only this direct conversation"),
        room_id: z.string().optional().describe("only this temporary room"),
        author_id: integerIdInput.optional().describe("only this user's messages"),
        limit: pageInput.limit,
        before: pageInput.before,
      }),
    )
    .output(searchPageRecord)
    .query(({ ctx, input }) =>
      searchMessages(ctx.deps, ctx.auth.user.id, {
        q: input.q,
        workspaceId: input.workspace_id,
        channelId: input.channel_id,
        conversationId: input.conversation_id,
        roomId: input.room_id,
        authorId: input.author_id,
        limit: input.limit,
        before: input.before,
      }),
    ),
});
