// Events on a user's own stream.
import type { User } from "../../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { toUserRecord } from "../records/user.ts";
import { emitEvent, streams } from "./streams.ts";

export async function publishUserUpdated(deps: Deps, user: User): Promise<void> {
  await emitEvent(deps, { stream: streams.user(user.id), type: "user.updated", data: { user: toUserRecord(user) } });
}
