// Mail goes out through nodemailer: SMTP when SMTP_URL is set; otherwise each message is
// written as an .eml file under DATA_DIR/mail/ (and its subject and recipient logged), so a
// developer on a fresh machine can read the mail the service sends.
import { mkdir, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import nodemailer from "nodemailer";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";

export type OutgoingMail = { to: string; subject: string; text: string; html: string };

export interface MailTransport {
  send(mail: OutgoingMail): Promise<void>;
  close(): void;
}

export function createMailTransport(config: Config, logger: Logger): MailTransport {
  if (config.mail.smtpUrl) {
    const transporter = nodemailer.createTransport(config.mail.smtpUrl);
    return {
      async send(mail) {
        await transporter.sendMail({ from: config.mail.from, ...mail });
        logger.info({ to: mail.to, subject: mail.subject }, "mail sent by SMTP");
      },
      close: () => transporter.close(),
    };
  }
  const outbox = path.join(config.dataDir, "mail");
  const transporter = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "unix" });
  return {
    async send(mail) {
      const info = await transporter.sendMail({ from: config.mail.from, ...mail });
      await mkdir(outbox, { recursive: true });
      const file = path.join(outbox, `${Date.now()}-${info.messageId.replace(/[^A-Za-z0-9.@-]/g, "")}.eml`);
      // Written aside, then renamed: whoever watches the folder never sees half a message.
      await writeFile(`${file}.partial`, info.message as Buffer);
      await rename(`${file}.partial`, file);
      logger.info({ to: mail.to, subject: mail.subject, file }, "mail written to the outbox");
    },
    close: () => transporter.close(),
  };
}
