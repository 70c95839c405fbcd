import { eq } from "drizzle-orm";
import { users, type Language, type User } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { streams, writeWithEvents } from "../../events/streams.ts";
import { toUserRecord } from "../../records/user.ts";
import { userChanged } from "./tokens.ts";

export async function updateProfile(
  deps: Deps,
  userId: number,
  patch: { name?: string | undefined; preferredLanguage?: Language | undefined; avatarUrl?: string | null | undefined },
): Promise<User> {
  return writeWithEvents(deps, async (tx, emit) => {
    const [user] = await tx
      .update(users)
      .set({
        ...(patch.name !== undefined && { name: patch.name }),
        ...(patch.preferredLanguage !== undefined && { preferredLanguage: patch.preferredLanguage }),
        ...(patch.avatarUrl !== undefined && { avatarUrl: patch.avatarUrl }),
        updatedAt: deps.clock.now(),
      })
      .where(eq(users.id, userId))
      .returning();
    emit(
      { stream: streams.user(userId), type: "user.updated", data: { user: toUserRecord(user!) } },
      userChanged(userId),
    );
    return user!;
  });
}
