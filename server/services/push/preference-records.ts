// The records of the notification-preferences endpoints (docs/push.md), as the API document
// names them.
import { z } from "zod";
import { CHANNEL_PUSH_LEVELS } from "../../../db/schema/index.ts";
import { CHANNEL_PUSH_SETTINGS } from "./preferences.ts";

export const channelNotificationPreferencesRecord = z
  .object({
    push: z
      .enum(CHANNEL_PUSH_SETTINGS)
      .describe("`all` messages, `mentions` only, `none`, or `default`: the user's own `channel_push`"),
    muted: z.boolean().describe("a muted channel pushes nothing and adds nothing to the badge"),
  })
  .meta({ id: "ChannelNotificationPreferences" });

export const conversationNotificationPreferencesRecord = z
  .object({
    muted: z.boolean().describe("a muted conversation pushes nothing and adds nothing to the badge"),
  })
  .meta({ id: "ConversationNotificationPreferences" });

export const userNotificationPreferencesRecord = z
  .object({
    channel_push: z
      .enum(CHANNEL_PUSH_LEVELS)
      .describe("the push level of every channel left at `default` (`mentions` unless set)"),
  })
  .meta({ id: "UserNotificationPreferences" });
