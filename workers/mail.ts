// Mail queue processor: renders the mail from current records and hands it to the transport.
// A transport failure throws, so the queue retries with backoff instead of losing the mail.
import { eq } from "drizzle-orm";
import { users } from "../db/schema/index.ts";
import type { Deps } from "../server/deps.ts";
import type { JobDefinition, JobHandlers } from "../server/jobs/definition.ts";
import { mailJobs } from "../server/mail/jobs.ts";
import { verifyEmailMail } from "../server/mail/templates.ts";
import type { MailTransport } from "../server/mail/transport.ts";
import { verificationLink } from "../server/services/accounts/email-verification.ts";

export function mailHandlers(deps: Deps, transport: MailTransport): JobHandlers {
  const handlers: JobHandlers = new Map();
  handlers.set(mailJobs.verifyEmail.name, {
    definition: mailJobs.verifyEmail as JobDefinition<unknown>,
    handle: async (payload) => {
      const { userId } = mailJobs.verifyEmail.payload.parse(payload);
      const [user] = await deps.db.select().from(users).where(eq(users.id, userId)).limit(1);
      if (!user || user.emailVerifiedAt) return;
      const mail = verifyEmailMail(user.preferredLanguage, user.name, verificationLink(deps, user));
      await transport.send({ to: user.email, ...mail });
    },
  });
  return handlers;
}
