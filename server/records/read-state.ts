// The caller's read state as the API answers it (docs/unread.md): a place's position and counts,
// and everything unread at once.
import { z } from "zod";

export const placeCounts = z
  .object({
    last_read_message_id: z.string().nullable().describe("everything up to this message is read (null: nothing)"),
    unread_count: z.number().int().describe("top-level messages after the position, not yours (stops at 1000)"),
    mention_count: z.number().int().describe("messages after the position that mention you, replies included"),
  })
  .meta({ id: "ReadPosition" });

export const unreadSummaryRecord = z
  .object({
    total_mentions: z.number().int().describe("the app badge: mentions and direct messages outside muted places"),
    workspaces: z.array(
      z.object({ workspace_id: z.string(), unread_count: z.number().int(), mention_count: z.number().int() }),
    ),
    channels: z.array(
      z.object({
        workspace_id: z.string(),
        channel_id: z.string(),
        last_read_message_id: z.string().nullable(),
        unread_count: z.number().int(),
        mention_count: z.number().int(),
        muted: z.boolean(),
      }),
    ),
    conversations: z.array(
      z.object({
        conversation_id: z.string(),
        last_read_message_id: z.string().nullable(),
        unread_count: z.number().int(),
        mention_count: z.number().int(),
        muted: z.boolean(),
      }),
    ),
  })
  .meta({ id: "UnreadSummary" });

export type PlaceCounts = z.infer<typeof placeCounts>;
export type UnreadSummary = z.infer<typeof unreadSummaryRecord>;
