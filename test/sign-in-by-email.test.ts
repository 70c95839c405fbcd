// Everything that sends an e-mail, end to end through a real SMTP server: one-time codes,
// password reset and the verification mail, read from the captured messages.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { oneTimeCodes, passwordResetTokens, users } from "../db/schema/index.ts";
import { restClient, type RestClient } from "./helpers/api.ts";
import { registerUser, uniqueEmail } from "./helpers/factories.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { startFakeSmtp, type CapturedMail, type FakeSmtp } from "./helpers/smtp.ts";

let smtp: FakeSmtp;
let server: TestServer;
let api: RestClient;

beforeAll(async () => {
  smtp = await startFakeSmtp();
  server = await startTestServer({ SMTP_URL: smtp.url, APP_URL: "https://chat.example.test" });
  api = restClient(server.url);
});
afterAll(async () => {
  await server?.close();
  await smtp?.stop();
});

const MINUTE = 60_000;
const INVALID_CODE = {
  message: "The given data was invalid.",
  errors: { token: ["The provided code is invalid or has expired."] },
};

function codeIn(mail: CapturedMail): string {
  const code = /\b(\d{6})\b/.exec(mail.text)?.[1];
  if (!code) throw new Error(`no code in: ${mail.text}`);
  return code;
}

/** Requests a code for the e-mail and returns it, read from the mail that arrives. */
async function requestCode(
  email: string,
  headers: Record<string, string> = {},
): Promise<{ code: string; mail: CapturedMail }> {
  const before = smtp.mailsTo(email).length;
  const response = await api.post("/api/v1/auth/app/otp", { email }, { headers });
  expect(response.status).toBe(200);
  expect(response.body).toEqual({ message: "A sign-in code has been sent to your email address." });
  const mail = await smtp.waitForMail(email, { after: before });
  return { code: codeIn(mail), mail };
}

/** A registered user whose verification mail has arrived, so later mails are the ones counted. */
async function registered(overrides: Parameters<typeof registerUser>[1] = {}) {
  const user = await registerUser(api, overrides);
  await smtp.waitForMail(user.email);
  return user;
}

const wrongCode = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, "0");

describe("POST /api/v1/auth/app/otp and /otp/verify", () => {
  it("signs up a new e-mail: the account is created, verified and signed in", async () => {
    const email = uniqueEmail("otp-new");
    const { code, mail } = await requestCode(email);
    expect(mail.subject).toBe("Your sign-in code");
    expect(mail.html).toContain(code);
    const response = await api.post("/api/v1/auth/app/otp/verify", { email, token: code, device_name: "Phone" });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      access_token: expect.any(String),
      token_type: "Bearer",
      user: { id: expect.any(Number), name: email.split("@")[0], email },
    });
    const me = await api.get("/api/v1/me", { token: response.body.access_token });
    expect(me.body.email_verified_at).toMatch(/\+00:00$/);
    const tokens = await api.get("/api/v1/tokens", { token: response.body.access_token });
    expect(tokens.body.data.map((token: { name: string }) => token.name)).toEqual(["Phone"]);
  });

  it("signs in an existing account and marks its e-mail verified", async () => {
    const user = await registered();
    const { code } = await requestCode(user.email);
    const response = await api.post("/api/v1/auth/app/otp/verify", { email: user.email, token: code });
    expect(response.status).toBe(200);
    expect(response.body.user).toEqual({ id: user.id, name: user.name, email: user.email });
    expect((await api.get("/api/v1/me", { token: response.body.access_token })).body.email_verified_at).not.toBeNull();
  });

  it("stores only a hash of the code", async () => {
    const email = uniqueEmail("otp-hash");
    const { code } = await requestCode(email);
    const [row] = await server.app.deps.db.select().from(oneTimeCodes).where(eq(oneTimeCodes.email, email));
    expect(row!.codeHash).toMatch(/^[0-9a-f]{64}$/);
    expect(row!.codeHash).not.toContain(code);
  });

  it("uses a code once", async () => {
    const email = uniqueEmail("otp-once");
    const { code } = await requestCode(email);
    expect((await api.post("/api/v1/auth/app/otp/verify", { email, token: code })).status).toBe(200);
    const again = await api.post("/api/v1/auth/app/otp/verify", { email, token: code });
    expect(again.status).toBe(422);
    expect(again.body).toEqual(INVALID_CODE);
  });

  it("rejects a wrong code with key token, and locks the code after 5 wrong tries", async () => {
    const email = uniqueEmail("otp-lock");
    const { code } = await requestCode(email);
    for (let attempt = 1; attempt <= 5; attempt++) {
      const response = await api.post("/api/v1/auth/app/otp/verify", { email, token: wrongCode(code) });
      expect(response.status).toBe(422);
      expect(response.body).toEqual(INVALID_CODE);
    }
    const locked = await api.post("/api/v1/auth/app/otp/verify", { email, token: code });
    expect(locked.status).toBe(422);
    expect(locked.body).toEqual(INVALID_CODE);
    // A new request gives a new code that works.
    const fresh = await requestCode(email);
    expect((await api.post("/api/v1/auth/app/otp/verify", { email, token: fresh.code })).status).toBe(200);
  });

  it("accepts the right code after 4 wrong tries", async () => {
    const email = uniqueEmail("otp-four");
    const { code } = await requestCode(email);
    for (let attempt = 1; attempt <= 4; attempt++) {
      expect((await api.post("/api/v1/auth/app/otp/verify", { email, token: wrongCode(code) })).status).toBe(422);
    }
    expect((await api.post("/api/v1/auth/app/otp/verify", { email, token: code })).status).toBe(200);
  });

  it("replaces the old code with a new request", async () => {
    const email = uniqueEmail("otp-replace");
    const first = await requestCode(email);
    const second = await requestCode(email);
    if (first.code !== second.code) {
      expect((await api.post("/api/v1/auth/app/otp/verify", { email, token: first.code })).status).toBe(422);
    }
    expect((await api.post("/api/v1/auth/app/otp/verify", { email, token: second.code })).status).toBe(200);
  });

  it("accepts a code until 10 minutes have passed, and not after", async () => {
    const email = uniqueEmail("otp-expiry");
    const early = await requestCode(email);
    server.clock.advance(9 * MINUTE + 50_000);
    expect((await api.post("/api/v1/auth/app/otp/verify", { email, token: early.code })).status).toBe(200);

    const late = await requestCode(email);
    server.clock.advance(10 * MINUTE + 1_000);
    const response = await api.post("/api/v1/auth/app/otp/verify", { email, token: late.code });
    expect(response.status).toBe(422);
    expect(response.body).toEqual(INVALID_CODE);
  });

  it("refuses an inactive account with 403", async () => {
    const user = await registered();
    await server.app.deps.db.update(users).set({ isActive: false }).where(eq(users.id, user.id));
    const { code } = await requestCode(user.email);
    const response = await api.post("/api/v1/auth/app/otp/verify", { email: user.email, token: code });
    expect(response.status).toBe(403);
    expect(response.body).toEqual({ message: "Account is inactive." });
  });

  it("validates the e-mail (key email) and the 6-digit code (key token)", async () => {
    const invalid = await api.post("/api/v1/auth/app/otp", { email: "not-an-email" });
    expect(invalid.status).toBe(422);
    expect(invalid.body.errors).toEqual({ email: ["The email field must be a valid email address."] });
    expect((await api.post("/api/v1/auth/app/otp", {})).body.errors).toEqual({
      email: ["The email field is required."],
    });
    for (const token of ["12345", "1234567", "abcdef"]) {
      const response = await api.post("/api/v1/auth/app/otp/verify", { email: uniqueEmail(), token });
      expect(response.status).toBe(422);
      expect(response.body.errors).toEqual({ token: ["The token field must be 6 digits."] });
    }
    const unknown = await api.post("/api/v1/auth/app/otp/verify", { email: uniqueEmail(), token: "123456" });
    expect(unknown.body).toEqual(INVALID_CODE);
  });

  it("throttles code requests to 3 a minute per e-mail, with Retry-After", async () => {
    const email = uniqueEmail("otp-throttle");
    for (let request = 1; request <= 3; request++) {
      expect((await api.post("/api/v1/auth/app/otp", { email })).status).toBe(200);
    }
    const blocked = await api.post("/api/v1/auth/app/otp", { email });
    expect(blocked.status).toBe(429);
    expect(blocked.body).toEqual({ message: "Too Many Attempts." });
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await api.post("/api/v1/auth/app/otp", { email: uniqueEmail() })).status).toBe(200);
  });

  it("writes the mail in the account's language, or the caller's Accept-Language for a new e-mail", async () => {
    const thai = await registered({ preferred_language: "th" });
    const { mail } = await requestCode(thai.email);
    expect(mail.subject).toBe("รหัสเข้าสู่ระบบของคุณ");
    expect(mail.text).toContain("รหัสของคุณ:");

    const { mail: japanese } = await requestCode(uniqueEmail("otp-ja"), {
      "Accept-Language": "fr;q=0.9, ja-JP;q=0.8, en;q=0.5",
    });
    expect(japanese.subject).toBe("サインインコード");
    const { mail: fallback } = await requestCode(uniqueEmail("otp-fr"), { "Accept-Language": "fr" });
    expect(fallback.subject).toBe("Your sign-in code");
  });
});

describe("POST /api/v1/auth/app/forgot-password and /reset-password", () => {
  async function requestReset(email: string): Promise<{ token: string; mail: CapturedMail }> {
    const before = smtp.mailsTo(email).length;
    const response = await api.post("/api/v1/auth/app/forgot-password", { email });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: "We have emailed your password reset link." });
    const mail = await smtp.waitForMail(email, { after: before });
    const link = /(https:\/\/chat\.example\.test\/reset-password\?\S+)/.exec(mail.text)?.[1];
    expect(link).toBeDefined();
    const url = new URL(link!);
    expect(url.searchParams.get("email")).toBe(email);
    const token = url.searchParams.get("token")!;
    expect(mail.text).toContain(token);
    return { token, mail };
  }

  const reset = (email: string, token: string, password = "brand-new-password") =>
    api.post("/api/v1/auth/app/reset-password", { email, token, password, password_confirmation: password });

  it("resets the password: the old one stops working, the new one works, every token is revoked", async () => {
    const user = await registered();
    const { token, mail } = await requestReset(user.email);
    expect(mail.subject).toBe("Reset your password");
    const [row] = await server.app.deps.db
      .select()
      .from(passwordResetTokens)
      .where(eq(passwordResetTokens.email, user.email));
    expect(row!.tokenHash).not.toContain(token);

    const response = await reset(user.email, token);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: "Your password has been reset." });
    expect((await api.get("/api/v1/me", { token: user.token })).status).toBe(401);
    expect((await api.post("/api/v1/auth/app/login", { email: user.email, password: user.password })).status).toBe(422);
    expect(
      (await api.post("/api/v1/auth/app/login", { email: user.email, password: "brand-new-password" })).status,
    ).toBe(200);
  });

  it("uses a reset token once", async () => {
    const user = await registered();
    const { token } = await requestReset(user.email);
    expect((await reset(user.email, token)).status).toBe(200);
    const again = await reset(user.email, token, "yet-another-password");
    expect(again.status).toBe(422);
    expect(again.body).toEqual({
      message: "The given data was invalid.",
      errors: { email: ["This password reset token is invalid."] },
    });
  });

  it("rejects a wrong token, another user's token and an expired token with key email", async () => {
    const user = await registered();
    const other = await registered();
    const { token } = await requestReset(user.email);
    const { token: othersToken } = await requestReset(other.email);
    for (const attempt of [await reset(user.email, "not-the-token"), await reset(user.email, othersToken)]) {
      expect(attempt.status).toBe(422);
      expect(attempt.body.errors).toEqual({ email: ["This password reset token is invalid."] });
    }
    server.clock.advance(61 * MINUTE);
    const expired = await reset(user.email, token);
    expect(expired.status).toBe(422);
    expect(expired.body.errors).toEqual({ email: ["This password reset token is invalid."] });
    expect((await api.post("/api/v1/auth/app/login", { email: user.email, password: user.password })).status).toBe(200);
  });

  it("answers an unknown e-mail with 422 key email and sends nothing", async () => {
    const email = uniqueEmail("nobody");
    const response = await api.post("/api/v1/auth/app/forgot-password", { email });
    expect(response.status).toBe(422);
    expect(response.body).toEqual({
      message: "The given data was invalid.",
      errors: { email: ["We can't find a user with that email address."] },
    });
    expect(smtp.mailsTo(email)).toHaveLength(0);
  });

  it("validates the new password (8 characters, confirmed)", async () => {
    const user = await registered();
    const { token } = await requestReset(user.email);
    const short = await reset(user.email, token, "1234567");
    expect(short.body.errors).toEqual({ password: ["The password field must be at least 8 characters."] });
    const unconfirmed = await api.post("/api/v1/auth/app/reset-password", {
      email: user.email,
      token,
      password: "long-enough-1",
      password_confirmation: "long-enough-2",
    });
    expect(unconfirmed.body.errors).toEqual({ password: ["The password field confirmation does not match."] });
    expect((await reset(user.email, token, "12345678")).status).toBe(200);
  });

  it("throttles reset mails to 3 a minute per e-mail", async () => {
    const user = await registered();
    for (let request = 1; request <= 3; request++) {
      expect((await api.post("/api/v1/auth/app/forgot-password", { email: user.email })).status).toBe(200);
    }
    const blocked = await api.post("/api/v1/auth/app/forgot-password", { email: user.email });
    expect(blocked.status).toBe(429);
    expect(blocked.body).toEqual({ message: "Too Many Attempts." });
  });

  it("writes the reset mail in the user's language", async () => {
    const user = await registered({ preferred_language: "id" });
    const { mail } = await requestReset(user.email);
    expect(mail.subject).toBe("Atur ulang kata sandi Anda");
    expect(mail.html).toContain("Atur ulang kata sandi");
  });
});

describe("mail delivery over SMTP", () => {
  it("sends the verification mail on registration, with text and HTML parts", async () => {
    const user = await registerUser(api, { preferred_language: "zh-CN" });
    const mail = await smtp.waitForMail(user.email);
    expect(mail.subject).toBe("验证您的电子邮件地址");
    expect(mail.text).toMatch(
      new RegExp(
        `https://chat\\.example\\.test/api/v1/auth/email/verify/${user.id}/[0-9a-f]{40}\\?expires=\\d+&signature=[0-9a-f]{64}`,
      ),
    );
    expect(mail.html).toContain("/api/v1/auth/email/verify/");
    expect(mail.raw.from?.text).toContain("no-reply@localhost");
  });

  it("retries when the SMTP server is down, and delivers once it is back", async () => {
    const email = uniqueEmail("retry");
    await smtp.stop();
    try {
      const response = await api.post("/api/v1/auth/app/otp", { email });
      // The request does not wait for SMTP.
      expect(response.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(smtp.mailsTo(email)).toHaveLength(0);
    } finally {
      await smtp.start();
    }
    const mail = await smtp.waitForMail(email, { timeoutMs: 20_000 });
    expect(mail.subject).toBe("Your sign-in code");
    const verified = await api.post("/api/v1/auth/app/otp/verify", { email, token: codeIn(mail) });
    expect(verified.status).toBe(200);
  });
});

describe("logs", () => {
  it("never contain a code, a reset token, an access token or a password", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "trace" }, { write: (line: string) => void lines.push(line) });
    const logged = await startTestServer({ SMTP_URL: smtp.url, APP_URL: "https://chat.example.test" }, { logger });
    const loggedApi = restClient(logged.url);
    try {
      const password = "a-password-to-hide";
      const user = await registerUser(loggedApi, { password });
      await smtp.waitForMail(user.email);
      await loggedApi.post("/api/v1/auth/app/login", { email: user.email, password: "wrong-password-to-hide" });

      await loggedApi.post("/api/v1/auth/app/otp", { email: user.email });
      const code = codeIn(await smtp.waitForMail(user.email, { after: 1 }));
      const signedIn = await loggedApi.post("/api/v1/auth/app/otp/verify", { email: user.email, token: code });

      await loggedApi.post("/api/v1/auth/app/forgot-password", { email: user.email });
      const resetMail = await smtp.waitForMail(user.email, { after: 2 });
      const resetToken = new URL(/(https:\/\/\S+reset-password\S+)/.exec(resetMail.text)![1]!).searchParams.get(
        "token",
      )!;
      await loggedApi.post("/api/v1/auth/app/reset-password", {
        email: user.email,
        token: resetToken,
        password: "the-new-password-to-hide",
        password_confirmation: "the-new-password-to-hide",
      });

      const log = lines.join("");
      expect(log).toContain("mail sent by SMTP"); // the logger did capture the service's lines
      for (const secret of [
        password,
        "wrong-password-to-hide",
        "the-new-password-to-hide",
        code,
        resetToken,
        user.token,
        signedIn.body.access_token,
      ]) {
        expect(log).not.toContain(secret);
      }
    } finally {
      await logged.close();
    }
  });
});
