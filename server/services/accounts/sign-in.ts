// Password sign-in, shared by the app variant (bearer token) and the web variant (cookie).
import { eq } from "drizzle-orm";
import type { Executor } from "../../../db/client.ts";
import { users, type TokenKind, type User } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { AppError, invalidField } from "../../errors.ts";
import { writeWithEvents, type EmitEvents } from "../../events/streams.ts";
import { hashPassword, verifyPassword } from "./passwords.ts";
import { issueToken, userChanged } from "./tokens.ts";

export const INVALID_CREDENTIALS = "These credentials do not match our records.";
export const ACCOUNT_INACTIVE = "Account is inactive.";

// Verifying against a real hash when the e-mail is unknown keeps the answer's timing from
// telling which e-mails have accounts.
let dummyHash: Promise<string> | undefined;
const getDummyHash = () => (dummyHash ??= hashPassword("not-a-real-password-but-a-timing-equaliser"));

export const normaliseEmail = (email: string) => email.trim().toLowerCase();

export const accountInactive = () => new AppError("forbidden", ACCOUNT_INACTIVE);

/** Checks e-mail and password under the login throttle; returns the active user. */
export async function verifyCredentials(
  deps: Deps,
  input: { email: string; password: string; ip: string },
): Promise<User> {
  const email = normaliseEmail(input.email);
  const throttleKey = `${email}|${input.ip}`;
  await deps.throttle.hit("login", throttleKey);
  const [user] = await deps.db.select().from(users).where(eq(users.email, email)).limit(1);
  const passwordMatches = user?.passwordHash
    ? await verifyPassword(user.passwordHash, input.password)
    : (await verifyPassword(await getDummyHash(), input.password), false);
  if (!user || !passwordMatches) throw invalidField("email", INVALID_CREDENTIALS);
  if (!user.isActive) throw accountInactive();
  await deps.throttle.reset("login", throttleKey);
  return user;
}

/**
 * Ends every successful sign-in (password, OTP, social, registration): records last_login_at
 * and issues the token, inside the caller's transaction, and reports the user's row changed
 * through `emit`. Web sessions expire after two weeks; bearer tokens live until revoked.
 */
export async function recordSignIn(
  tx: Executor,
  emit: EmitEvents,
  user: User,
  options: { kind: Extract<TokenKind, "sign_in" | "session">; deviceName?: string | null | undefined; now: Date },
): Promise<{ user: User; plaintext: string }> {
  const [updated] = await tx.update(users).set({ lastLoginAt: options.now }).where(eq(users.id, user.id)).returning();
  emit(userChanged(user.id));
  const { plaintext } = await issueToken(tx, {
    userId: user.id,
    kind: options.kind,
    name: options.deviceName?.trim() || (options.kind === "session" ? "web session" : "sign-in"),
    abilities: ["*"],
    expiresAt: options.kind === "session" ? new Date(options.now.getTime() + WEB_SESSION_LIFETIME_MS) : null,
    now: options.now,
  });
  return { user: updated!, plaintext };
}

export function completeSignIn(
  deps: Deps,
  user: User,
  options: { kind: Extract<TokenKind, "sign_in" | "session">; deviceName?: string | null | undefined },
): Promise<{ user: User; plaintext: string }> {
  const now = deps.clock.now();
  return writeWithEvents(deps, (tx, emit) => recordSignIn(tx, emit, user, { ...options, now }));
}

export const WEB_SESSION_LIFETIME_MS = 14 * 24 * 60 * 60 * 1000;
