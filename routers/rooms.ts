// Temporary rooms, the document's "external" group (docs/rooms.md): create, read, join, extend
// (a web session or a token with the ability temporary-rooms:extend), and talk: messages and
// live events.
import { z } from "zod";
import { dataOf } from "../server/records/common.ts";
import { messageRecord } from "../server/records/message.ts";
import { listRoomMessages, postRoomMessage, roomEvents } from "../server/services/rooms/room-messages.ts";
import { roomExtensionRecord, roomRecord } from "../server/records/room.ts";
import { createRoom, extendRoom, getRoom, joinRoom, MAX_EXTENSION_HOURS } from "../server/services/rooms/rooms.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { trackedStream } from "../server/trpc-live.ts";
import { booleanInput, nameInput } from "./inputs.ts";
import { resumable } from "./live.ts";
import { contentOrAttachments, messageBody, messagePageOutput, pageInput, postAnswer } from "./messages.ts";

const tags = ["Temporary rooms"];
// A path id like any other: one that names no room of the caller's is a 404, whatever its length.
const roomPath = z.object({ room_id: z.string() });
/** The document's code for an extension outside 1..24 hours. */
const EXCEEDS_LIMIT = "extension_hours_exceeds_limit";

export const roomsRouter = router({
  create: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Create a temporary room",
        method: "POST",
        path: "/api/v1/external/rooms",
        tags,
        description: "A room for `duration_hours` (1 to 24, default 24); share its room_id for others to join.",
      },
    })
    .input(z.object({ name: nameInput(120), duration_hours: z.number().int().min(1).max(24).optional() }))
    .output(dataOf(roomRecord))
    .mutation(async ({ ctx, input }) => ({ data: await createRoom(ctx.deps, ctx.auth.user.id, input) })),

  get: authedProcedure
    .meta({
      openapi: {
        summary: "Get a temporary room",
        method: "GET",
        path: "/api/v1/external/rooms/{room_id}",
        tags,
        description: "Its owner and members only (404 for anyone else, and once the room has expired).",
      },
    })
    .input(roomPath)
    .output(dataOf(roomRecord))
    .query(async ({ ctx, input }) => ({ data: await getRoom(ctx.deps, ctx.auth.user.id, input.room_id) })),

  join: authedProcedure
    .meta({
      openapi: {
        summary: "Join a temporary room",
        description:
          "Any signed-in user with the room_id, while the room lives (404 once it has expired). Joining twice changes nothing.",
        method: "POST",
        path: "/api/v1/external/rooms/{room_id}/join",
        tags,
      },
    })
    .input(roomPath)
    .output(dataOf(roomRecord))
    .mutation(async ({ ctx, input }) => ({ data: await joinRoom(ctx.deps, ctx.auth.user.id, input.room_id) })),

  messages: authedProcedure
    .meta({
      openapi: {
        summary: "List a temporary room's messages",
        method: "GET",
        path: "/api/v1/external/rooms/{room_id}/messages",
        tags,
        description:
          "Its members only. Newest first; `limit` 1..100 (default 50), `before` a message id. `after` a message of the room pages forward (oldest first, `meta.next_cursor` to pass as `after`); `around` one answers it with up to floor(limit / 2) messages on each side (newest first, `meta.before_cursor` and `meta.after_cursor`). At most one of `before`, `after`, `around`.",
      },
    })
    .input(roomPath.extend(pageInput))
    .output(messagePageOutput)
    .query(({ ctx, input }) =>
      listRoomMessages(ctx.deps, ctx.auth.user.id, input.room_id, {
        limit: input.limit,
        before: input.before,
        after: input.after,
        around: input.around,
      }),
    ),

  post: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Post a message to a temporary room",
        method: "POST",
        path: "/api/v1/external/rooms/{room_id}/messages",
        tags,
        description: "Its members only (404 otherwise, and once it has expired). No threads in rooms.",
      },
    })
    .input(
      roomPath
        .extend({ ...messageBody, skip_translation: booleanInput.nullable().optional() })
        .superRefine(contentOrAttachments),
    )
    .output(dataOf(messageRecord))
    .mutation(async ({ ctx, input }) =>
      postAnswer(
        ctx,
        await postRoomMessage(ctx.deps, ctx.auth.user, input.room_id, {
          content: input.content,
          attachmentIds: input.attachment_ids,
          skipTranslation: input.skip_translation,
          clientMessageId: input.client_message_id,
        }),
      ),
    ),

  /** Live: the room's messages, translations and its room.expiring / room.expired events; ends with room.expired. */
  onRoom: authedProcedure
    .input(roomPath.extend(resumable.shape))
    .subscription(async ({ ctx, input, signal }) =>
      trackedStream(
        await roomEvents(ctx.deps, ctx.auth, { roomId: input.room_id, lastEventId: input.lastEventId }, signal),
      ),
    ),

  extend: authedProcedure
    .meta({
      ability: "temporary-rooms:extend",
      openapi: {
        summary: "Extend a temporary room",
        method: "POST",
        path: "/api/v1/external/rooms/{room_id}/extend",
        tags,
        description:
          "The owner on personal_pro, while the room lives, at most 10 times, never past max_expires_at; else 403 with errors.code [temporary_room_extension_not_allowed]. extension_hours 1 to 24 (default 24).",
      },
    })
    .input(
      roomPath.extend({
        extension_hours: z.number().int().min(1, EXCEEDS_LIMIT).max(MAX_EXTENSION_HOURS, EXCEEDS_LIMIT).optional(),
      }),
    )
    .output(dataOf(roomExtensionRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await extendRoom(ctx.deps, ctx.auth.user.id, input.room_id, input.extension_hours),
    })),
});
