// Mail is a queued job (in-process without Redis, BullMQ with it): the verification mail that
// registration sends, the signed link in it, the resend endpoint, and the in-process queue's
// retries.
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { simpleParser } from "mailparser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineJob, jobHandler, PermanentJobError, type JobHandlers } from "../server/jobs/definition.ts";
import { InProcessJobQueue } from "../server/jobs/in-process.ts";
import { createLogger } from "../server/logger.ts";
import { restClient } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { startTestServer, useTestServer, type TestServer } from "./helpers/server.ts";

const APP_URL = "https://chat.example.test";

const ctx = useTestServer({ APP_URL });

// ---- Reading the outbox ------------------------------------------------------------------

type Mail = { file: string; subject: string; to: string; text: string; html: string };

const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");

/** The .eml files of the outbox, parsed with mailparser. */
async function readOutbox(dataDir = ctx.server.config.dataDir): Promise<Mail[]> {
  const outbox = path.join(dataDir, "mail");
  const files = await readdir(outbox).catch(() => [] as string[]);
  const mails: Mail[] = [];
  for (const name of files.filter((file) => file.endsWith(".eml")).sort()) {
    const parsed = await simpleParser(await readFile(path.join(outbox, name)));
    mails.push({
      file: name,
      subject: parsed.subject ?? "",
      to: [parsed.to ?? []]
        .flat()
        .map((address) => address.text)
        .join(","),
      text: parsed.text ?? "",
      html: parsed.html || "",
    });
  }
  return mails;
}

const mailsTo = async (email: string, dataDir?: string) =>
  (await readOutbox(dataDir)).filter((mail) => mail.to.toLowerCase().includes(email.toLowerCase()));

/** Polls the outbox until `count` mails to the address are there (generous deadline). */
async function waitForMails(email: string, count = 1, timeoutMs = 10_000, dataDir?: string): Promise<Mail[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const mails = await mailsTo(email, dataDir);
    if (mails.length >= count) return mails;
    if (Date.now() > deadline)
      throw new Error(`expected ${count} mail(s) to ${email} within ${timeoutMs} ms, found ${mails.length}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

type Link = { url: URL; id: string; hash: string; expires: string; signature: string };

function verificationLinkIn(text: string, baseUrl = APP_URL): Link {
  const escaped = baseUrl.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  const match = new RegExp(
    `${escaped}/api/v1/auth/email/verify/(\\d+)/([0-9a-f]{40})\\?expires=(\\d+)&signature=([0-9a-f]+)`,
  ).exec(text);
  if (!match) throw new Error(`no verification link in:\n${text}`);
  return { url: new URL(match[0]), id: match[1]!, hash: match[2]!, expires: match[3]!, signature: match[4]! };
}

const linkPath = (link: Link) => link.url.pathname + link.url.search;

async function latestLink(user: RegisteredUser, count = 1): Promise<Link> {
  const mails = await waitForMails(user.email, count);
  return verificationLinkIn(mails.at(-1)!.text);
}

// ---- The verification mail ---------------------------------------------------------------

describe("the verification mail", () => {
  it("is sent after registration, in the user's language, with text and HTML parts and the signed link", async () => {
    const user = await registerUser(ctx.api, { name: "Hanako", preferred_language: "ja" });
    const [mail] = await waitForMails(user.email);
    expect(mail!.to).toContain(user.email);
    // Both a text part and an HTML part.
    expect(mail!.text).not.toBe("");
    expect(mail!.html).toContain("<p>");
    expect(mail!.subject).toBe("メールアドレスの確認");
    expect(mail!.text).toContain("Hanako 様");
    expect(mail!.text).toContain("メールアドレスを確認してください");
    expect(mail!.html).toContain("Hanako 様");

    const link = verificationLinkIn(mail!.text);
    expect(link.id).toBe(String(user.id));
    expect(link.hash).toBe(sha1(user.email));
    expect(link.signature).toMatch(/^[0-9a-f]{64}$/);
    // Valid for 60 minutes from now.
    const minutesLeft = (Number(link.expires) * 1000 - ctx.server.clock.now().getTime()) / 60_000;
    expect(minutesLeft).toBeGreaterThan(55);
    expect(minutesLeft).toBeLessThanOrEqual(60);
    // The HTML part links to the same address (HTML-escaped).
    expect(mail!.html).toContain(link.url.toString().replace(/&/g, "&amp;"));
  });

  it("is in English by default", async () => {
    const user = await registerUser(ctx.api, { name: "Ann" });
    const [mail] = await waitForMails(user.email);
    expect(mail!.subject).toBe("Verify your e-mail address");
    expect(mail!.text).toContain("Hello Ann,");
    verificationLinkIn(mail!.text);
  });
});

describe("GET /api/v1/auth/email/verify/{id}/{hash}", () => {
  it("verifies the e-mail address with the mailed link", async () => {
    const user = await registerUser(ctx.api);
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.email_verified_at).toBeNull();
    const link = await latestLink(user);

    const response = await ctx.api.get(linkPath(link));
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: expect.any(String) });
    const me = await ctx.api.get("/api/v1/me", { token: user.token });
    expect(me.body.email_verified_at).toMatch(/^\d{4}-\d{2}-\d{2}T.*\+00:00$/);

    // Opening it again is harmless.
    expect((await ctx.api.get(linkPath(link))).status).toBe(200);
  });

  it("answers 404 {message} for a tampered signature, a wrong hash, a wrong id or missing parts", async () => {
    const user = await registerUser(ctx.api);
    const other = await registerUser(ctx.api);
    const link = await latestLink(user);
    const flipped = link.signature.slice(0, -1) + (link.signature.endsWith("0") ? "1" : "0");
    const candidates = [
      `/api/v1/auth/email/verify/${link.id}/${link.hash}?expires=${link.expires}&signature=${flipped}`,
      `/api/v1/auth/email/verify/${link.id}/${sha1(other.email)}?expires=${link.expires}&signature=${link.signature}`,
      `/api/v1/auth/email/verify/${other.id}/${link.hash}?expires=${link.expires}&signature=${link.signature}`,
      `/api/v1/auth/email/verify/${link.id}/${link.hash}?expires=${Number(link.expires) + 3600}&signature=${link.signature}`,
      `/api/v1/auth/email/verify/${link.id}/${link.hash}?expires=${link.expires}`,
      `/api/v1/auth/email/verify/${link.id}/${link.hash}`,
    ];
    for (const candidate of candidates) {
      const response = await ctx.api.get(candidate);
      expect(response.status, candidate).toBe(404);
      expect(response.body).toEqual({ message: expect.any(String) });
    }
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.email_verified_at).toBeNull();
  });

  it("answers 404 for a correctly signed link whose hash is not the user's e-mail", async () => {
    // Signed with the server's key, so only the hash check can refuse it.
    const user = await registerUser(ctx.api);
    const link = await latestLink(user);
    const unsigned = `/api/v1/auth/email/verify/${user.id}/${sha1("someone-else@example.test")}?expires=${link.expires}`;
    const signature = ctx.server.app.deps.keys.mac("email-link", unsigned);
    const response = await ctx.api.get(`${unsigned}&signature=${signature}`);
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ message: expect.any(String) });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.email_verified_at).toBeNull();
  });

  it("answers 404 for a link opened after 60 minutes", async () => {
    const user = await registerUser(ctx.api);
    const link = await latestLink(user);
    ctx.server.clock.advance(61 * 60 * 1000);
    const response = await ctx.api.get(linkPath(link));
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ message: expect.any(String) });
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.email_verified_at).toBeNull();
  });
});

describe("POST /api/v1/auth/email/verification-notification", () => {
  it("sends a new link to an unverified user, and that link works", async () => {
    const user = await registerUser(ctx.api);
    await waitForMails(user.email, 1);
    const response = await ctx.api.post("/api/v1/auth/email/verification-notification", undefined, {
      token: user.token,
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: expect.any(String) });
    const link = await latestLink(user, 2);
    expect((await ctx.api.get(linkPath(link))).status).toBe(200);
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).body.email_verified_at).not.toBeNull();
  });

  it("answers 200 {message} to a verified user and sends nothing", async () => {
    const user = await registerUser(ctx.api);
    const link = await latestLink(user);
    expect((await ctx.api.get(linkPath(link))).status).toBe(200);

    const response = await ctx.api.post("/api/v1/auth/email/verification-notification", undefined, {
      token: user.token,
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: expect.any(String) });

    // A mail queued after the answer arrives; by then nothing more has gone to the verified user.
    const sentinel = await registerUser(ctx.api);
    await waitForMails(sentinel.email);
    expect(await mailsTo(user.email)).toHaveLength(1);
  });

  it("needs a token", async () => {
    expect((await ctx.api.post("/api/v1/auth/email/verification-notification")).status).toBe(401);
  });
});

describe("with FRONTEND_URL", () => {
  let frontend: TestServer;
  beforeAll(async () => {
    frontend = await startTestServer({ FRONTEND_URL: "http://app.example.test", APP_URL });
  });
  afterAll(() => frontend?.close());

  it("redirects the verification link to the frontend", async () => {
    const frontendApi = restClient(frontend.url);
    const user = await registerUser(frontendApi);
    const [mail] = await waitForMails(user.email, 1, 10_000, frontend.config.dataDir);
    const link = verificationLinkIn(mail!.text);
    const response = await fetch(frontend.url + linkPath(link), { redirect: "manual" });
    expect(response.status).toBe(302);
    expect(response.headers.get("location")).toMatch(/^http:\/\/app\.example\.test/);
    expect((await frontendApi.get("/api/v1/me", { token: user.token })).body.email_verified_at).not.toBeNull();
  });
});

// ---- The in-process queue ----------------------------------------------------------------

describe("InProcessJobQueue", () => {
  const logger = createLogger("silent");
  const payload = z.object({ n: z.number() });
  const flaky = defineJob({ queue: "mail", name: "test.flaky", payload, attempts: 3, backoffMs: 10 });
  const permanent = defineJob({ queue: "mail", name: "test.permanent", payload, attempts: 5, backoffMs: 10 });
  const slow = defineJob({ queue: "mail", name: "test.slow", payload, attempts: 1, backoffMs: 10 });
  const sentinel = defineJob({ queue: "mail", name: "test.sentinel", payload, attempts: 1, backoffMs: 10 });

  function deferred() {
    let resolve!: () => void;
    const promise = new Promise<void>((settle) => (resolve = settle));
    return { promise, resolve };
  }

  /** A queue whose sentinel job resolves a promise: enqueued with a delay longer than any retry. */
  function queueWith(handlers: JobHandlers) {
    const sentinelRan = deferred();
    handlers.set(...jobHandler(sentinel, async () => sentinelRan.resolve()));
    const queue = new InProcessJobQueue(() => handlers, logger);
    return { queue, sentinelRan: sentinelRan.promise };
  }

  it("retries a failing job with backoff until it succeeds, then runs it no more", async () => {
    const calls: { attempt: number; jobId: string; n: number }[] = [];
    const succeeded = deferred();
    const { queue, sentinelRan } = queueWith(
      new Map([
        jobHandler(flaky, async ({ n }, info) => {
          calls.push({ ...info, n });
          if (calls.length < 3) throw new Error(`failure ${calls.length}`);
          succeeded.resolve();
        }),
      ]),
    );
    await queue.enqueue(flaky, { n: 7 });
    await succeeded.promise;
    // The sentinel fires well after any further retry would have (10, 20, 40 ms).
    await queue.enqueue(sentinel, { n: 0 }, { delayMs: 500 });
    await sentinelRan;
    expect(calls.map((call) => call.attempt)).toEqual([1, 2, 3]);
    expect(new Set(calls.map((call) => call.jobId)).size).toBe(1);
    expect(calls.every((call) => call.n === 7)).toBe(true);
    await queue.close();
  });

  it("does not retry a PermanentJobError", async () => {
    let calls = 0;
    const failed = deferred();
    const { queue, sentinelRan } = queueWith(
      new Map([
        jobHandler(permanent, async () => {
          calls++;
          failed.resolve();
          throw new PermanentJobError("the record is gone");
        }),
      ]),
    );
    await queue.enqueue(permanent, { n: 1 });
    await failed.promise;
    await queue.enqueue(sentinel, { n: 0 }, { delayMs: 500 });
    await sentinelRan;
    expect(calls).toBe(1);
    await queue.close();
  });

  it("refuses a payload that does not match the job's schema", async () => {
    const { queue } = queueWith(new Map());
    await expect(queue.enqueue(flaky, { n: "seven" } as never)).rejects.toThrow();
    await queue.close();
  });

  it("runs a job once per jobId while it is known", async () => {
    let calls = 0;
    const done = deferred();
    const { queue, sentinelRan } = queueWith(new Map([jobHandler(slow, async () => void (calls++, done.resolve()))]));
    await queue.enqueue(slow, { n: 1 }, { jobId: "same", delayMs: 20 });
    await queue.enqueue(slow, { n: 1 }, { jobId: "same", delayMs: 20 });
    await done.promise;
    await queue.enqueue(sentinel, { n: 0 }, { delayMs: 200 });
    await sentinelRan;
    expect(calls).toBe(1);
    await queue.close();
  });

  it("close() waits for a running job", async () => {
    const started = deferred();
    const release = deferred();
    let finished = false;
    const { queue } = queueWith(
      new Map([
        jobHandler(slow, async () => {
          started.resolve();
          await release.promise;
          finished = true;
        }),
      ]),
    );
    await queue.enqueue(slow, { n: 1 });
    await started.promise;

    let closed = false;
    const closing = queue.close().then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(closed).toBe(false);
    release.resolve();
    await closing;
    expect(finished).toBe(true);
  });

  it("close() does not wait for jobs that have not started, and runs nothing after", async () => {
    let calls = 0;
    const { queue } = queueWith(new Map([jobHandler(slow, async () => void calls++)]));
    await queue.enqueue(slow, { n: 1 }, { delayMs: 60_000 });
    await queue.close();
    expect(calls).toBe(0);
  });
});
