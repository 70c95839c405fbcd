// Presence (docs/presence.md): the caller's own setting and status, others' presence, and the
// live subscription to the users a client shows.
import { z } from "zod";
import { PRESENCE_SETTINGS } from "../db/schema/index.ts";
import { normalizeEmoji } from "../server/emoji.ts";
import { dataOf } from "../server/records/common.ts";
import { ownPresenceRecord, presenceRecord } from "../server/records/presence.ts";
import { getOwnPresence, listPresence, updateOwnPresence, watchPresence } from "../server/services/presence/answers.ts";
import { codePointLength } from "../server/services/search/text.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { PresenceStream } from "../server/trpc-live.ts";
import { MAX_INTEGER_ID } from "./inputs.ts";

const tags = ["Presence"];

/** The longest status text, in code points. */
export const MAX_STATUS_TEXT = 100;
/** Ids per GET /api/v1/presence, and per presence.onUsers subscription. */
export const MAX_PRESENCE_IDS = 200;
export const MAX_WATCHED_IDS = 500;

/** A time that must be ahead, as ISO 8601 with an offset (`2026-12-01T09:00:00Z`); null clears. */
const futureTimeInput = z
  .string()
  .nullable()
  .optional()
  .superRefine((value, ctx) => {
    if (value === null || value === undefined) return;
    if (!z.iso.datetime({ offset: true }).safeParse(value).success)
      ctx.addIssue({
        code: "custom",
        message: "The :attribute field must be a valid date (ISO 8601, with an offset).",
      });
    else if (Date.parse(value) <= Date.now())
      ctx.addIssue({ code: "custom", message: "The :attribute field must be a date after now." });
  })
  .transform((value) => (typeof value === "string" ? new Date(value) : value));

/** A positive integer id: a number, or its digits in a list. */
const isId = (id: number) => Number.isInteger(id) && id >= 1 && id <= MAX_INTEGER_ID;

/** `1,2,3`: 1 to 200 positive integer ids, digits only; anything else is a 422 on `user_ids`. */
const userIdListInput = z.string().transform((value, ctx) => {
  const parts = value.split(",");
  const ids = parts.map((part) => (/^\d+$/.test(part) ? Number(part) : Number.NaN));
  if (parts.length > MAX_PRESENCE_IDS || !ids.every(isId) || value === "") {
    ctx.addIssue({
      code: "custom",
      message: `The :attribute field must be a comma-separated list of 1 to ${MAX_PRESENCE_IDS} user ids.`,
    });
    return z.NEVER;
  }
  return ids;
});

/** 1 to 500 positive integer ids. */
const watchedIdsInput = z.array(z.number().int().min(1).max(MAX_INTEGER_ID)).min(1).max(MAX_WATCHED_IDS);

export const presenceRouter = router({
  get: authedProcedure
    .meta({
      openapi: {
        summary: "Get my presence",
        method: "GET",
        path: "/api/v1/me/presence",
        tags,
        description:
          "The caller's setting (`auto`, `away`, `dnd`, `invisible`), `dnd_until`, custom status, and `status`: what others see now. An expired dnd or status reads as gone at once.",
      },
    })
    .input(z.void())
    .output(dataOf(ownPresenceRecord))
    .query(async ({ ctx }) => ({ data: await getOwnPresence(ctx.deps, ctx.auth) })),

  update: authedProcedure
    .meta({
      openapi: {
        summary: "Change my presence",
        method: "PUT",
        path: "/api/v1/me/presence",
        tags,
        description: `Any of \`setting\`, \`dnd_until\` (only with \`dnd\`, in the future), \`status_text\` (at most ${MAX_STATUS_TEXT} characters), \`status_emoji\` (one emoji or a short name such as \`palm_tree\`) and \`status_expires_at\` (in the future; null: never). Fields not sent keep their value; null clears; a setting other than \`dnd\` clears \`dnd_until\`. When \`status_expires_at\` passes, the text, emoji and expiry are cleared; when \`dnd_until\` passes, the setting returns to \`auto\`.`,
      },
    })
    .input(
      z
        .object({
          setting: z.enum(PRESENCE_SETTINGS).optional(),
          dnd_until: futureTimeInput,
          status_text: z
            .string()
            .nullable()
            .optional()
            .refine((text) => typeof text !== "string" || codePointLength(text) <= MAX_STATUS_TEXT, {
              message: `The :attribute field must not be greater than ${MAX_STATUS_TEXT} characters.`,
            }),
          status_emoji: z
            .string()
            .max(256)
            .nullable()
            .optional()
            .transform((emoji, ctx) => {
              if (typeof emoji !== "string") return emoji;
              const normalized = normalizeEmoji(emoji);
              if (normalized === null) {
                ctx.addIssue({ code: "custom", message: "The :attribute field must be one emoji or a short name." });
                return z.NEVER;
              }
              return normalized;
            }),
          status_expires_at: futureTimeInput,
        })
        .superRefine((value, ctx) => {
          if (value.dnd_until && value.setting !== undefined && value.setting !== "dnd")
            ctx.addIssue({
              code: "custom",
              path: ["dnd_until"],
              message: "The dnd until field may only be set when the setting is dnd.",
            });
        }),
    )
    .output(dataOf(ownPresenceRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await updateOwnPresence(ctx.deps, ctx.auth, {
        setting: input.setting,
        dndUntil: input.dnd_until,
        statusText: input.status_text,
        statusEmoji: input.status_emoji,
        statusExpiresAt: input.status_expires_at,
      }),
    })),

  list: authedProcedure
    .meta({
      openapi: {
        summary: "Get people's presence",
        method: "GET",
        path: "/api/v1/presence",
        tags,
        description: `\`user_ids\`: 1 to ${MAX_PRESENCE_IDS} user ids, comma separated. Answers in the order asked, once each, for the caller and the users who share a workspace or a direct conversation with them; other and unknown ids are left out. An invisible user (the caller too) reads \`offline\`.`,
      },
    })
    .input(z.object({ user_ids: userIdListInput.describe("comma-separated user ids, such as 1,2,3") }))
    .output(dataOf(z.array(presenceRecord)))
    .query(async ({ ctx, input }) => ({ data: await listPresence(ctx.deps, ctx.auth, input.user_ids) })),

  onUsers: authedProcedure
    .input(z.object({ user_ids: watchedIdsInput }))
    .subscription(
      ({ ctx, input, signal }) => new PresenceStream(watchPresence(ctx.deps, ctx.auth, input.user_ids, signal)),
    ),
});
