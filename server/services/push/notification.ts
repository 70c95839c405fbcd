// What a push notification says about a message (docs/push.md): the title names the sender
// and where ("Ada in #general", "Ada replied in #general", "Ada (direct message)", "Ada in
// Support chat" for a temporary room), the body
// is the text cut to what a lock screen shows, with its attachments named, and the data holds
// the ids an app opens the message with.
import type { Message } from "../../../db/schema/index.ts";
import type { PushNotification } from "./provider.ts";

/** About what iOS and Android show of a notification's body before "more". */
export const PUSH_BODY_MAX_CHARS = 178;

export type MessageForPush = {
  message: Pick<
    Message,
    "id" | "workspaceId" | "channelId" | "conversationId" | "roomId" | "parentMessageId" | "content"
  >;
  senderName: string;
  /** Null for a direct message or a room's. */
  channelName: string | null;
  /** A temporary room's name, for its messages. */
  roomName?: string | null;
  attachmentNames: string[];
};

/** Cuts by code points (never half a surrogate pair), marking the cut with an ellipsis. */
function cut(text: string, max: number): string {
  const characters = Array.from(text);
  return characters.length <= max
    ? text
    : `${characters
        .slice(0, max - 1)
        .join("")
        .trimEnd()}…`;
}

function attachmentsLine(names: string[]): string {
  if (names.length === 0) return "";
  return names.length === 1 ? `📎 ${names[0]}` : `📎 ${names.length} attachments`;
}

export function pushNotificationFor({
  message,
  senderName,
  channelName,
  roomName,
  attachmentNames,
}: MessageForPush): PushNotification {
  const title =
    message.roomId !== null
      ? `${senderName} in ${roomName ?? "a room"}`
      : channelName === null
        ? `${senderName} (direct message)`
        : `${senderName} ${message.parentMessageId ? "replied in" : "in"} #${channelName}`;
  const text = message.content.trim();
  const files = attachmentsLine(attachmentNames);
  const body =
    files === ""
      ? cut(text, PUSH_BODY_MAX_CHARS)
      : text === ""
        ? files
        : `${cut(text, PUSH_BODY_MAX_CHARS - files.length - 1)}\n${files}`;
  const data: Record<string, string> =
    message.roomId !== null
      ? { type: "message", message_id: message.id, room_id: message.roomId }
      : message.conversationId !== null
        ? { type: "message", message_id: message.id, conversation_id: message.conversationId }
        : {
            type: "message",
            message_id: message.id,
            workspace_id: message.workspaceId ?? "",
            channel_id: message.channelId ?? "",
            ...(message.parentMessageId && { parent_message_id: message.parentMessageId }),
          };
  return {
    title: cut(title, 120),
    body,
    data,
    threadId: message.roomId ?? message.conversationId ?? message.channelId ?? message.id,
  };
}
