// Social sign-in and account linking (API document, "Social sign-in"; contract, "Sign-in
// details"). A flow starts with a redirect URL carrying state, PKCE (S256) and, for OIDC, a
// nonce; those are kept server-side for 10 minutes and taken once by the callback.
import { and, asc, eq, ne } from "drizzle-orm";
import * as oidc from "openid-client";
import type { Transaction } from "../../../db/client.ts";
import { socialAccounts, users, type SocialAccount, type User } from "../../../db/schema/index.ts";
import type { SocialProviderConfig } from "../../config.ts";
import type { Auth } from "../../auth.ts";
import type { Deps } from "../../deps.ts";
import { invalidField, notFound, unprocessable } from "../../errors.ts";
import { LOST_TO_CONCURRENCY, retryingRaces } from "../../../db/races.ts";
import { writeWithEvents } from "../../events/streams.ts";
import { accountInactive, recordSignIn } from "../accounts/sign-in.ts";
import type { SocialProfile } from "./providers.ts";

export const STATE_LIFETIME_MS = 10 * 60 * 1000;
export const INVALID_STATE = "The state is invalid or has expired.";
export const ALREADY_LINKED_TO_YOU = "This social account is already linked to your account.";
export const ALREADY_LINKED_TO_OTHER = "This social account is already linked to another user.";
export const SOCIAL_ACCOUNT_NOT_FOUND = "Social account not found.";
export const LAST_SIGN_IN_METHOD = "This is your last way to sign in: set a password before unlinking it.";

/** app: the app variant's sign-in; web: the cookie variant's; link: linking to a signed-in user. */
type Purpose = "app" | "web" | "link";

type StoredState = {
  provider: string;
  purpose: Purpose;
  userId: number | null;
  codeVerifier: string;
  nonce: string | null;
  redirectUri: string;
};

const stateKey = (state: string) => `oauth-state:${state}`;

/** Where the provider sends the browser back: our own web callback, or the app's page. */
export function redirectUriFor(deps: Deps, provider: SocialProviderConfig, purpose: Purpose): string {
  if (purpose === "web") return `${deps.config.appUrl}/api/v1/auth/web/social/${provider.name}/callback`;
  return (
    provider.redirectUri ?? `${deps.config.frontendUrl ?? deps.config.appUrl}/auth/social/${provider.name}/callback`
  );
}

export async function startSocialAuthorization(
  deps: Deps,
  providerName: string,
  purpose: Purpose,
  userId: number | null = null,
): Promise<string> {
  const provider = deps.social.provider(providerName);
  const state = oidc.randomState();
  const stored: StoredState = {
    provider: provider.name,
    purpose,
    userId,
    codeVerifier: oidc.randomPKCECodeVerifier(),
    nonce: deps.social.isOpenIdConnect(provider) ? oidc.randomNonce() : null,
    redirectUri: redirectUriFor(deps, provider, purpose),
  };
  const url = await deps.social.authorizationUrl(provider, { ...stored, state });
  await deps.singleUse.put(stateKey(state), stored, STATE_LIFETIME_MS);
  return url;
}

/** Checks the state (when given: unknown, reused, expired or foreign is 422) and exchanges the code. */
async function profileFromCallback(
  deps: Deps,
  providerName: string,
  input: { code: string; state?: string | undefined },
  purpose: Purpose,
  userId: number | null,
): Promise<{ provider: SocialProviderConfig; profile: SocialProfile }> {
  const provider = deps.social.provider(providerName);
  let stored: StoredState | undefined;
  if (input.state) {
    stored = (await deps.singleUse.take(stateKey(input.state))) as StoredState | undefined;
    if (!stored || stored.provider !== provider.name || stored.purpose !== purpose || stored.userId !== userId) {
      throw invalidField("state", INVALID_STATE);
    }
  }
  const profile = await deps.social.exchange(provider, {
    code: input.code,
    state: input.state ?? null,
    redirectUri: stored?.redirectUri ?? redirectUriFor(deps, provider, purpose),
    codeVerifier: stored?.codeVerifier ?? null,
    nonce: stored?.nonce ?? null,
  });
  return { provider, profile };
}

function snapshot(profile: SocialProfile, now: Date) {
  return { providerEmail: profile.email, name: profile.name, avatar: profile.avatar, updatedAt: now };
}

/**
 * Signs in the user linked to the provider account, or links it to the user with the same
 * verified e-mail, or creates the user (verified e-mail, no password).
 */
export async function signInWithSocial(
  deps: Deps,
  providerName: string,
  input: { code: string; state?: string | undefined; deviceName?: string | undefined },
  variant: "app" | "web",
): Promise<{ user: User; plaintext: string }> {
  const { provider, profile } = await profileFromCallback(deps, providerName, input, variant, null);
  const now = deps.clock.now();
  // Two first sign-ins of one identity at once (a double tap, two devices) both find no
  // account and both create one: the unique indexes on users.email and on the provider
  // account let one commit and fail the other, which then runs again and finds the winner's
  // account, so both sign in to one account.
  return retryingSignInRaces(() =>
    writeWithEvents(deps, async (tx, emit) => {
      const user = await userForProfile(tx, provider.name, profile, now);
      if (!user.isActive) throw accountInactive();
      return recordSignIn(tx, emit, user, {
        kind: variant === "web" ? "session" : "sign_in",
        deviceName: input.deviceName,
        now,
      });
    }),
  );
}

/**
 * Enough for a burst of simultaneous callbacks: each may lose once to the account's creation and
 * again to a deadlock with one signing in through the new link (its unique check waits for that
 * one's update of the link while holding the user row that one wants).
 */
const RACE_ATTEMPTS = 6;

/**
 * Runs a transaction again when it lost a race: on a unique index (the other one committed
 * the same row first; the next run sees it) or a deadlock (PostgreSQL ended this one so the
 * other could go on: one creating the link while another signs in through it). Only the
 * transaction is repeated, never the provider's code exchange (codes are single use).
 */
function retryingSignInRaces<T>(transaction: () => Promise<T>): Promise<T> {
  return retryingRaces(transaction, { attempts: RACE_ATTEMPTS, codes: RACE_CODES });
}

/** unique_violation, and what any statement may lose to concurrency. */
const RACE_CODES = new Set(["23505", ...LOST_TO_CONCURRENCY]);

async function userForProfile(tx: Transaction, provider: string, profile: SocialProfile, now: Date): Promise<User> {
  const [linked] = await tx
    .select({ account: socialAccounts, user: users })
    .from(socialAccounts)
    .innerJoin(users, eq(users.id, socialAccounts.userId))
    .where(and(eq(socialAccounts.provider, provider), eq(socialAccounts.providerUserId, profile.subject)))
    .limit(1);
  if (linked) {
    await tx.update(socialAccounts).set(snapshot(profile, now)).where(eq(socialAccounts.id, linked.account.id));
    return linked.user;
  }
  if (!profile.email) throw invalidField("email", "The provider did not share an e-mail address.");

  const [existing] = await tx.select().from(users).where(eq(users.email, profile.email)).limit(1);
  let user: User | undefined;
  if (existing) {
    // Linking by e-mail only on the provider's word that the address is verified: otherwise
    // anyone could claim an account by adding its e-mail to a provider profile.
    if (!profile.emailVerified) {
      throw invalidField(
        "email",
        "An account with this e-mail exists: sign in and link this provider from your account.",
      );
    }
    const [otherOfProvider] = await tx
      .select({ id: socialAccounts.id, providerUserId: socialAccounts.providerUserId })
      .from(socialAccounts)
      .where(and(eq(socialAccounts.userId, existing.id), eq(socialAccounts.provider, provider)))
      .limit(1);
    // This very provider account, linked by a simultaneous sign-in since the first lookup.
    if (otherOfProvider?.providerUserId === profile.subject) return existing;
    if (otherOfProvider)
      throw invalidField("provider", `This account is already linked to another ${provider} account.`);
    [user] = existing.emailVerifiedAt
      ? [existing]
      : await tx
          .update(users)
          .set({ emailVerifiedAt: now, updatedAt: now })
          .where(eq(users.id, existing.id))
          .returning();
  } else {
    [user] = await tx
      .insert(users)
      .values({
        name: profile.name ?? profile.email.split("@")[0]!,
        email: profile.email,
        emailVerifiedAt: profile.emailVerified ? now : null,
        avatarUrl: profile.avatar,
        createdAt: now,
        updatedAt: now,
      })
      .returning();
  }
  await tx.insert(socialAccounts).values({
    userId: user!.id,
    provider,
    providerUserId: profile.subject,
    ...snapshot(profile, now),
    createdAt: now,
  });
  return user!;
}

/** Links the provider account to the signed-in user. */
export async function linkSocialAccount(
  deps: Deps,
  auth: Auth,
  providerName: string,
  input: { code: string; state?: string | undefined },
): Promise<SocialAccount> {
  const { provider, profile } = await profileFromCallback(deps, providerName, input, "link", auth.user.id);
  const now = deps.clock.now();
  // Two link callbacks at once (a double tap; two tabs; two users with one provider account)
  // both find no link and both insert: a unique index lets one commit and fails the other,
  // which runs again and finds the winner's link, so it answers the documented 422 (already
  // linked to you, or to another user; or another account of this provider), never a 500.
  return retryingSignInRaces(() =>
    deps.db.transaction(async (tx) => {
      const [linked] = await tx
        .select()
        .from(socialAccounts)
        .where(and(eq(socialAccounts.provider, provider.name), eq(socialAccounts.providerUserId, profile.subject)))
        .limit(1);
      if (linked) throw unprocessable(linked.userId === auth.user.id ? ALREADY_LINKED_TO_YOU : ALREADY_LINKED_TO_OTHER);
      const [sameProvider] = await tx
        .select({ providerUserId: socialAccounts.providerUserId })
        .from(socialAccounts)
        .where(and(eq(socialAccounts.userId, auth.user.id), eq(socialAccounts.provider, provider.name)))
        .limit(1);
      // This very provider account, linked by a simultaneous callback since the first lookup.
      if (sameProvider?.providerUserId === profile.subject) throw unprocessable(ALREADY_LINKED_TO_YOU);
      if (sameProvider)
        throw unprocessable(`Your account is already linked to another ${provider.name} account. Unlink it first.`);
      const [account] = await tx
        .insert(socialAccounts)
        .values({
          userId: auth.user.id,
          provider: provider.name,
          providerUserId: profile.subject,
          ...snapshot(profile, now),
          createdAt: now,
        })
        .returning();
      return account!;
    }),
  );
}

export async function listSocialAccounts(deps: Deps, userId: number): Promise<SocialAccount[]> {
  return deps.db.select().from(socialAccounts).where(eq(socialAccounts.userId, userId)).orderBy(asc(socialAccounts.id));
}

/** Unlinks; refuses to remove the last way to sign in (no password, no other provider). */
export async function unlinkSocialAccount(deps: Deps, auth: Auth, providerName: string): Promise<void> {
  const provider = deps.social.provider(providerName);
  await deps.db.transaction(async (tx) => {
    // Locking the user serialises two unlinks racing to remove the last two methods.
    const [user] = await tx.select().from(users).where(eq(users.id, auth.user.id)).for("update");
    const [account] = await tx
      .select()
      .from(socialAccounts)
      .where(and(eq(socialAccounts.userId, auth.user.id), eq(socialAccounts.provider, provider.name)))
      .limit(1);
    if (!account) throw notFound(SOCIAL_ACCOUNT_NOT_FOUND);
    const [other] = await tx
      .select({ id: socialAccounts.id })
      .from(socialAccounts)
      .where(and(eq(socialAccounts.userId, auth.user.id), ne(socialAccounts.id, account.id)))
      .limit(1);
    if (!user?.passwordHash && !other) throw unprocessable(LAST_SIGN_IN_METHOD);
    await tx.delete(socialAccounts).where(eq(socialAccounts.id, account.id));
  });
}
