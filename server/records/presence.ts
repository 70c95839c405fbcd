import { z } from "zod";
import { PRESENCE_SETTINGS } from "../../db/schema/index.ts";
import { timestamp } from "./common.ts";

export const PRESENCE_STATUSES = ["online", "offline", "away", "dnd"] as const;

/** What others see of a user (docs/presence.md). */
export const presenceRecord = z
  .object({
    user_id: z.number().int(),
    status: z.enum(PRESENCE_STATUSES),
    last_seen_at: timestamp.nullable().describe("null: never connected (or only ever invisible)"),
    status_text: z.string().nullable(),
    status_emoji: z.string().nullable(),
  })
  .meta({ id: "Presence" });

/** The caller's own presence settings, and what others see of them now (`status`). */
export const ownPresenceRecord = z
  .object({
    setting: z.enum(PRESENCE_SETTINGS),
    dnd_until: timestamp.nullable(),
    status_text: z.string().nullable(),
    status_emoji: z.string().nullable(),
    status_expires_at: timestamp.nullable(),
    status: z.enum(PRESENCE_STATUSES).describe("what others see now"),
  })
  .meta({ id: "OwnPresence" });

/** The event `presence.onUsers` sends. */
export const presenceChangedEvent = z
  .object({
    type: z.literal("presence.changed"),
    data: z.object({ presence: presenceRecord }),
  })
  .meta({ id: "PresenceChanged" });
