// Events on a user's own stream (topic "user:<id>"). Later issues add message, membership
// and channel events to the same stream.
import { z } from "zod";
import type { User } from "../../db/schema/index.ts";
import type { EventBus } from "./bus.ts";
import { newId } from "../ids.ts";
import { toUserRecord, userRecord } from "../records/user.ts";
import { isoTimestamp } from "../clock.ts";

export const userEvent = z.discriminatedUnion("type", [
  z.object({
    id: z.string(),
    type: z.literal("user.updated"),
    created_at: z.string(),
    data: z.object({ user: userRecord }),
  }),
]);
export type UserEvent = z.infer<typeof userEvent>;

export const userTopic = (userId: number) => `user:${userId}`;

export async function publishUserUpdated(bus: EventBus, user: User, now: Date): Promise<void> {
  const event: UserEvent = {
    id: newId("event", now.getTime()),
    type: "user.updated",
    created_at: isoTimestamp(now),
    data: { user: toUserRecord(user) },
  };
  await bus.publish(userTopic(user.id), event);
}
