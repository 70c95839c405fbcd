// Mail queue processor: renders each mail from current records and hands it to the
// transport. A transport failure throws, so the queue retries with backoff instead of
// losing the mail. A mail whose code or token was replaced meanwhile is not sent.
import { eq } from "drizzle-orm";
import { oneTimeCodes, passwordResetTokens, users } from "../db/schema/index.ts";
import type { Deps } from "../server/deps.ts";
import { jobHandler, type JobHandlers } from "../server/jobs/definition.ts";
import { mailJobs } from "../server/mail/jobs.ts";
import { otpCodeMail, passwordResetMail, verifyEmailMail } from "../server/mail/templates.ts";
import type { MailTransport } from "../server/mail/transport.ts";
import { verificationLink } from "../server/services/accounts/email-verification.ts";

/** Where the reset link points: the frontend when there is one, else the API's own host. */
/** A secret a mail job carries, sealed when the job was queued (maybe under an earlier APP_KEY). */
function openMailSecret(deps: Deps, sealed: string): string {
  const opened = deps.keys.open("mail-secret", sealed);
  // Failing is right: the job is retried, and works once APP_KEY_PREVIOUS holds the sealing key.
  if (!opened)
    throw new Error("no configured key opens this mail's secret: set APP_KEY_PREVIOUS to the key that sealed it");
  return opened.value;
}

function resetLink(deps: Deps, token: string, email: string): string {
  const link = new URL("/reset-password", deps.config.frontendUrl ?? deps.config.appUrl);
  link.searchParams.set("token", token);
  link.searchParams.set("email", email);
  return link.toString();
}

export function mailHandlers(deps: Deps, transport: MailTransport): JobHandlers {
  const findUser = async (condition: ReturnType<typeof eq>) =>
    (await deps.db.select().from(users).where(condition).limit(1))[0];

  return new Map([
    jobHandler(mailJobs.verifyEmail, async ({ userId }) => {
      const user = await findUser(eq(users.id, userId));
      if (!user || user.emailVerifiedAt) return;
      const mail = verifyEmailMail(user.preferredLanguage, user.name, verificationLink(deps, user));
      await transport.send({ to: user.email, ...mail });
    }),

    jobHandler(mailJobs.otpCode, async ({ codeId, sealedCode, language }) => {
      const [code] = await deps.db.select().from(oneTimeCodes).where(eq(oneTimeCodes.id, codeId)).limit(1);
      if (!code) return;
      const user = await findUser(eq(users.email, code.email));
      const mail = otpCodeMail(user?.preferredLanguage ?? language, user?.name, openMailSecret(deps, sealedCode));
      await transport.send({ to: code.email, ...mail });
    }),

    jobHandler(mailJobs.passwordReset, async ({ resetId, userId, sealedToken }) => {
      const [reset] = await deps.db
        .select()
        .from(passwordResetTokens)
        .where(eq(passwordResetTokens.id, resetId))
        .limit(1);
      const user = await findUser(eq(users.id, userId));
      if (!reset || !user) return;
      const token = openMailSecret(deps, sealedToken);
      const mail = passwordResetMail(user.preferredLanguage, user.name, token, resetLink(deps, token, user.email));
      await transport.send({ to: user.email, ...mail });
    }),
  ]);
}
