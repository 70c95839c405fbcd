// A real SMTP server in the test process (smtp-server), for SMTP_URL to point at. It keeps
// every message it accepts, parsed with mailparser, and can be stopped and started again on
// the same port to test delivery retries.
import type { AddressInfo } from "node:net";
import { simpleParser, type ParsedMail } from "mailparser";
import { SMTPServer } from "smtp-server";

export type CapturedMail = { to: string; subject: string; text: string; html: string; raw: ParsedMail };

export type FakeSmtp = {
  url: string;
  port: number;
  messages: CapturedMail[];
  /** Resolves with the first message to `address` (after `after` of them) that arrives within the timeout. */
  waitForMail(address: string, options?: { after?: number; timeoutMs?: number }): Promise<CapturedMail>;
  mailsTo(address: string): CapturedMail[];
  stop(): Promise<void>;
  start(): Promise<void>;
};

export async function startFakeSmtp(): Promise<FakeSmtp> {
  const messages: CapturedMail[] = [];
  let server: SMTPServer | undefined;
  let port = 0;

  const create = () =>
    new SMTPServer({
      authOptional: true,
      disabledCommands: ["STARTTLS", "AUTH"],
      logger: false,
      onData(stream, _session, callback) {
        simpleParser(stream).then(
          (parsed) => {
            const to = [parsed.to ?? []].flat().flatMap((address) => address.value.map((entry) => entry.address ?? ""));
            messages.push({
              to: to.join(","),
              subject: parsed.subject ?? "",
              text: parsed.text ?? "",
              html: String(parsed.html || ""),
              raw: parsed,
            });
            callback();
          },
          (error: Error) => callback(error),
        );
      },
    });

  const smtp: FakeSmtp = {
    get url() {
      return `smtp://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    messages,
    mailsTo: (address) => messages.filter((mail) => mail.to.split(",").includes(address)),
    async waitForMail(address, options = {}) {
      const deadline = Date.now() + (options.timeoutMs ?? 15_000);
      while (Date.now() < deadline) {
        const mail = smtp.mailsTo(address)[options.after ?? 0];
        if (mail) return mail;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`no mail to ${address} arrived`);
    },
    async start() {
      server = create();
      await new Promise<void>((resolve, reject) => {
        server!.once("error", reject);
        server!.listen(port, "127.0.0.1", () => resolve());
      });
      port = (server.server.address() as AddressInfo).port;
    },
    async stop() {
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
      server = undefined;
    },
  };
  await smtp.start();
  return smtp;
}
