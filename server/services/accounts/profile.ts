import { eq } from "drizzle-orm";
import { users, type Language, type User } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { publishUserUpdated } from "../../events/user-events.ts";

export async function updateProfile(
  deps: Deps,
  userId: number,
  patch: { name?: string | undefined; preferredLanguage?: Language | undefined; avatarUrl?: string | null | undefined },
): Promise<User> {
  const [user] = await deps.db
    .update(users)
    .set({
      ...(patch.name !== undefined && { name: patch.name }),
      ...(patch.preferredLanguage !== undefined && { preferredLanguage: patch.preferredLanguage }),
      ...(patch.avatarUrl !== undefined && { avatarUrl: patch.avatarUrl }),
      updatedAt: deps.clock.now(),
    })
    .where(eq(users.id, userId))
    .returning();
  await publishUserUpdated(deps, user!);
  return user!;
}
