// What can be done to a message after it is posted, the same for every kind of place: edit,
// delete, react, take a reaction back, and list who reacted (the contract's "Messages after
// they are posted"). One router per kind of place (`channelMessage`, `directMessage`,
// `roomMessage`), each procedure served as RPC and at its REST path under the message's own path.
import { z } from "zod";
import { normalizeEmoji } from "../server/emoji.ts";
import { invalidField } from "../server/errors.ts";
import type { MessageTarget } from "../server/policy/places.ts";
import { dataOf } from "../server/records/common.ts";
import { messageRecord } from "../server/records/message.ts";
import { deleteMessage, editMessage } from "../server/services/messaging/message-changes.ts";
import { addReaction, listReactions, removeReaction } from "../server/services/messaging/reactions.ts";
import { authedProcedure, router } from "../server/trpc.ts";

// A path id like the place's own: one that names no message the caller can read is a 404 (the
// contract's "a message the caller cannot read is 404"), whatever its shape.
const messageId = z.string().max(255);
const emojiInput = z.string().max(256);

/** A reaction's emoji as stored: 422 `emoji` when it is neither one emoji nor a short name. */
function emojiOf(input: string): string {
  const emoji = normalizeEmoji(input);
  if (emoji === null) throw invalidField("emoji", "The emoji must be one emoji or a short name such as thumbsup.");
  return emoji;
}

const reactionList = z.object({
  data: z.array(
    z.object({
      emoji: z.string(),
      count: z.number().int(),
      user_ids: z.array(z.number().int()).describe("the first 100, in the order they reacted"),
    }),
  ),
  meta: z.object({}),
});

type PlaceShape<Shape extends Record<string, z.ZodString>> = {
  /** The place's path parameters. */
  input: z.ZodObject<Shape>;
  /** Its messages' path, up to `/messages`. */
  path: `/${string}`;
  /** The place the path names. */
  target(input: Record<string, string>): MessageTarget;
  tag: string;
  /** Who besides the author may delete. */
  moderators: string;
};

/** The fields every verb reads from its input, whatever the place's own path parameters. */
type Given = Record<string, string> & { message_id: string; emoji: string; content?: string };

function messageActions<Shape extends Record<string, z.ZodString>>(place: PlaceShape<Shape>) {
  const given = (input: unknown) => input as Given;
  const at = `${place.path}/{message_id}` as const;
  const tags = [place.tag];
  const messageInput = place.input.extend({ message_id: messageId });
  const reactionInput = messageInput.extend({ emoji: emojiInput });
  return router({
    edit: authedProcedure
      .meta({
        openapi: {
          summary: "Edit a message",
          description:
            "Its author only (403 for anyone else, and for a bot's message). `content` follows the create rules; the same text is a no-op. Readers get `message.updated`, and the message is translated again.",
          method: "PATCH",
          path: at,
          tags,
        },
      })
      .input(
        messageInput.extend({ content: z.string().max(40_000).optional(), attachment_ids: z.unknown().optional() }),
      )
      .output(dataOf(messageRecord))
      .mutation(async ({ ctx, input }) => {
        const { message_id, content } = given(input);
        return {
          data: await editMessage(ctx.deps, ctx.auth.user.id, place.target(given(input)), message_id, content ?? ""),
        };
      }),

    delete: authedProcedure
      .meta({
        successStatus: 204,
        openapi: {
          summary: "Delete a message",
          description: `Its author, ${place.moderators}. A thread parent with replies stays as a tombstone. Its files, translations and reactions go with it. Readers get \`message.deleted\`.`,
          method: "DELETE",
          path: at,
          tags,
        },
      })
      .input(messageInput)
      .output(z.void())
      .mutation(async ({ ctx, input }) => {
        await deleteMessage(ctx.deps, ctx.auth.user.id, place.target(given(input)), given(input).message_id);
      }),

    react: authedProcedure
      .meta({
        openapi: {
          summary: "React to a message",
          description:
            "Anyone who may post there. `emoji` is one Unicode emoji or a short name `[a-z0-9_+-]{1,64}`; reacting twice counts once; at most 50 different emoji per message (422 `emoji`). Readers get `reaction.added`.",
          method: "PUT",
          path: `${at}/reactions/{emoji}`,
          tags,
        },
      })
      .input(reactionInput)
      .output(dataOf(messageRecord))
      .mutation(async ({ ctx, input }) => {
        const { message_id, emoji } = given(input);
        return {
          data: await addReaction(ctx.deps, ctx.auth.user.id, place.target(given(input)), message_id, emojiOf(emoji)),
        };
      }),

    unreact: authedProcedure
      .meta({
        successStatus: 204,
        openapi: {
          summary: "Take back a reaction",
          description: "The caller's own; one they do not have is 204 too. Readers get `reaction.removed`.",
          method: "DELETE",
          path: `${at}/reactions/{emoji}`,
          tags,
        },
      })
      .input(reactionInput)
      .output(z.void())
      .mutation(async ({ ctx, input }) => {
        const { message_id, emoji } = given(input);
        await removeReaction(ctx.deps, ctx.auth.user.id, place.target(given(input)), message_id, emojiOf(emoji));
      }),

    reactions: authedProcedure
      .meta({
        openapi: {
          summary: "Who reacted to a message",
          description: "Per emoji in the message's order: its count and the first 100 users in the order they reacted.",
          method: "GET",
          path: `${at}/reactions`,
          tags,
        },
      })
      .input(messageInput)
      .output(reactionList)
      .query(async ({ ctx, input }) => ({
        data: await listReactions(ctx.deps, ctx.auth.user.id, place.target(given(input)), given(input).message_id),
        meta: {},
      })),
  });
}

export const channelMessageRouter = messageActions({
  input: z.object({ workspace_id: z.string(), channel_id: z.string() }),
  path: "/api/v1/workspaces/{workspace_id}/channels/{channel_id}/messages",
  target: (input) => ({ kind: "channel", workspaceId: input.workspace_id!, channelId: input.channel_id! }),
  tag: "Messages",
  moderators: "or the workspace's owners and admins",
});

export const directMessageRouter = messageActions({
  input: z.object({ conversation_id: z.string() }),
  path: "/api/v1/direct-conversations/{conversation_id}/messages",
  target: (input) => ({ kind: "conversation", conversationId: input.conversation_id! }),
  tag: "Direct chat",
  moderators: "and nobody else",
});

export const roomMessageRouter = messageActions({
  input: z.object({ room_id: z.string() }),
  path: "/api/v1/external/rooms/{room_id}/messages",
  target: (input) => ({ kind: "room", roomId: input.room_id! }),
  tag: "Temporary rooms",
  moderators: "or the room's owner",
});
