// E-mail verification by a signed link (contract, "Sign-in details"):
// {APP_URL}/api/v1/auth/email/verify/{id}/{sha1(email)}?expires=<unix>&signature=<hex>,
// the signature an HMAC-SHA256 over the path and expiry with a key derived from APP_KEY, valid
// 60 minutes. A link signed under an earlier key (APP_KEY_PREVIOUS) still opens.
import { createHash } from "node:crypto";
import { eq } from "drizzle-orm";
import { users, type User } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { notFound } from "../../errors.ts";
import { mailJobs } from "../../mail/jobs.ts";
import { enqueueJob } from "../../jobs/outbox.ts";
import { writeWithEvents } from "../../events/streams.ts";
import { userChanged } from "./tokens.ts";
import type { Executor } from "../../../db/client.ts";
import { safeEqual } from "../../crypto.ts";

export const VERIFICATION_LINK_LIFETIME_MS = 60 * 60 * 1000;
export const INVALID_VERIFICATION_LINK = "This verification link is invalid or has expired.";

export const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");

export function verificationLink(deps: Pick<Deps, "config" | "clock" | "keys">, user: User): string {
  const expires = Math.floor((deps.clock.now().getTime() + VERIFICATION_LINK_LIFETIME_MS) / 1000);
  const unsigned = `/api/v1/auth/email/verify/${user.id}/${sha1(user.email)}?expires=${expires}`;
  return `${deps.config.appUrl}${unsigned}&signature=${deps.keys.mac("email-link", unsigned)}`;
}

/** Queues the verification mail in `tx`: the registration's transaction, or the database on its own. */
export async function queueVerificationEmail(tx: Executor, now: Date, user: Pick<User, "id">): Promise<void> {
  await enqueueJob(tx, now, mailJobs.verifyEmail, { userId: user.id });
}

export async function sendVerificationEmail(deps: Deps, user: User): Promise<void> {
  await queueVerificationEmail(deps.db, deps.clock.now(), user);
}

/** Marks the e-mail verified; 404 for a tampered, expired or mismatched link. */
export async function verifyEmail(
  deps: Deps,
  input: { id: number; hash: string; expires: string; signature: string },
): Promise<User> {
  const unsigned = `/api/v1/auth/email/verify/${input.id}/${input.hash}?expires=${input.expires}`;
  const expiresAt = Number(input.expires) * 1000;
  if (
    !deps.keys.verifyMac("email-link", unsigned, input.signature) ||
    !Number.isFinite(expiresAt) ||
    expiresAt < deps.clock.now().getTime()
  ) {
    throw notFound(INVALID_VERIFICATION_LINK);
  }
  const [user] = await deps.db.select().from(users).where(eq(users.id, input.id)).limit(1);
  if (!user || !safeEqual(sha1(user.email), input.hash)) throw notFound(INVALID_VERIFICATION_LINK);
  if (user.emailVerifiedAt) return user;
  const now = deps.clock.now();
  return writeWithEvents(deps, async (tx, emit) => {
    const [updated] = await tx
      .update(users)
      .set({ emailVerifiedAt: now, updatedAt: now })
      .where(eq(users.id, user.id))
      .returning();
    emit(userChanged(user.id));
    return updated!;
  });
}
