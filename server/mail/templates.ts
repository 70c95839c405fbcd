// Every mail has a text part and an HTML part in the recipient's preferred language, with
// English as the fallback. One renderer; each mail is a table of strings per language.
import type { Language } from "../../db/schema/index.ts";

type MailStrings = {
  subject: string;
  greeting: (name: string | undefined) => string;
  intro: string;
  /** Label shown before the secret (a code, a token), when the mail carries one. */
  secretLabel?: string;
  /** Label of the link, when the mail carries one. */
  action?: string;
  footer: string;
};

const VERIFY_EMAIL: Record<Language, MailStrings> = {
  en: {
    subject: "Verify your e-mail address",
    greeting: (name) => (name ? `Hello ${name},` : "Hello,"),
    intro: "Please confirm your e-mail address by opening the link below. The link is valid for 60 minutes.",
    action: "Verify e-mail address",
    footer: "If you did not create an account, no further action is required.",
  },
  "zh-CN": {
    subject: "验证您的电子邮件地址",
    greeting: (name) => (name ? `${name}，您好：` : "您好："),
    intro: "请打开下面的链接确认您的电子邮件地址。链接在 60 分钟内有效。",
    action: "验证电子邮件地址",
    footer: "如果您没有创建帐户，请忽略此邮件。",
  },
  ja: {
    subject: "メールアドレスの確認",
    greeting: (name) => (name ? `${name} 様` : "こんにちは"),
    intro: "以下のリンクを開いてメールアドレスを確認してください。リンクの有効期限は60分です。",
    action: "メールアドレスを確認する",
    footer: "アカウントを作成していない場合は、このメールを無視してください。",
  },
  th: {
    subject: "ยืนยันที่อยู่อีเมลของคุณ",
    greeting: (name) => (name ? `สวัสดี ${name}` : "สวัสดี"),
    intro: "โปรดยืนยันที่อยู่อีเมลของคุณโดยเปิดลิงก์ด้านล่าง ลิงก์มีอายุ 60 นาที",
    action: "ยืนยันที่อยู่อีเมล",
    footer: "หากคุณไม่ได้สร้างบัญชี ไม่ต้องดำเนินการใดๆ",
  },
  id: {
    subject: "Verifikasi alamat e-mail Anda",
    greeting: (name) => (name ? `Halo ${name},` : "Halo,"),
    intro: "Silakan konfirmasi alamat e-mail Anda dengan membuka tautan di bawah. Tautan berlaku selama 60 menit.",
    action: "Verifikasi alamat e-mail",
    footer: "Jika Anda tidak membuat akun, abaikan e-mail ini.",
  },
};

const OTP_CODE: Record<Language, MailStrings> = {
  en: {
    subject: "Your sign-in code",
    greeting: VERIFY_EMAIL.en.greeting,
    intro: "Use this code to sign in. It is valid for 10 minutes and can be used once.",
    secretLabel: "Your code:",
    footer: "If you did not try to sign in, you can ignore this e-mail.",
  },
  "zh-CN": {
    subject: "您的登录验证码",
    greeting: VERIFY_EMAIL["zh-CN"].greeting,
    intro: "请使用此验证码登录。验证码在 10 分钟内有效，只能使用一次。",
    secretLabel: "验证码：",
    footer: "如果您没有尝试登录，请忽略此邮件。",
  },
  ja: {
    subject: "サインインコード",
    greeting: VERIFY_EMAIL.ja.greeting,
    intro: "このコードを使ってサインインしてください。有効期限は10分で、一度だけ使用できます。",
    secretLabel: "コード：",
    footer: "サインインしようとしていない場合は、このメールを無視してください。",
  },
  th: {
    subject: "รหัสเข้าสู่ระบบของคุณ",
    greeting: VERIFY_EMAIL.th.greeting,
    intro: "ใช้รหัสนี้เพื่อเข้าสู่ระบบ รหัสมีอายุ 10 นาทีและใช้ได้ครั้งเดียว",
    secretLabel: "รหัสของคุณ:",
    footer: "หากคุณไม่ได้พยายามเข้าสู่ระบบ คุณสามารถละเว้นอีเมลนี้ได้",
  },
  id: {
    subject: "Kode masuk Anda",
    greeting: VERIFY_EMAIL.id.greeting,
    intro: "Gunakan kode ini untuk masuk. Kode berlaku selama 10 menit dan hanya dapat digunakan sekali.",
    secretLabel: "Kode Anda:",
    footer: "Jika Anda tidak mencoba masuk, abaikan e-mail ini.",
  },
};

const PASSWORD_RESET: Record<Language, MailStrings> = {
  en: {
    subject: "Reset your password",
    greeting: VERIFY_EMAIL.en.greeting,
    intro:
      "You asked to reset your password. Open the link below, or use the token in the app. Both are valid for 60 minutes.",
    secretLabel: "Reset token:",
    action: "Reset password",
    footer: "If you did not ask for a password reset, no further action is required.",
  },
  "zh-CN": {
    subject: "重置您的密码",
    greeting: VERIFY_EMAIL["zh-CN"].greeting,
    intro: "您申请了重置密码。请打开下面的链接，或在应用中使用重置令牌。两者均在 60 分钟内有效。",
    secretLabel: "重置令牌：",
    action: "重置密码",
    footer: "如果您没有申请重置密码，请忽略此邮件。",
  },
  ja: {
    subject: "パスワードのリセット",
    greeting: VERIFY_EMAIL.ja.greeting,
    intro:
      "パスワードのリセットが申請されました。以下のリンクを開くか、アプリでトークンを入力してください。有効期限は60分です。",
    secretLabel: "リセットトークン：",
    action: "パスワードをリセット",
    footer: "パスワードのリセットを申請していない場合は、このメールを無視してください。",
  },
  th: {
    subject: "รีเซ็ตรหัสผ่านของคุณ",
    greeting: VERIFY_EMAIL.th.greeting,
    intro: "คุณได้ขอรีเซ็ตรหัสผ่าน เปิดลิงก์ด้านล่างหรือใช้โทเค็นในแอป ทั้งสองมีอายุ 60 นาที",
    secretLabel: "โทเค็นรีเซ็ต:",
    action: "รีเซ็ตรหัสผ่าน",
    footer: "หากคุณไม่ได้ขอรีเซ็ตรหัสผ่าน ไม่ต้องดำเนินการใดๆ",
  },
  id: {
    subject: "Atur ulang kata sandi Anda",
    greeting: VERIFY_EMAIL.id.greeting,
    intro:
      "Anda meminta pengaturan ulang kata sandi. Buka tautan di bawah atau gunakan token di aplikasi. Keduanya berlaku selama 60 menit.",
    secretLabel: "Token atur ulang:",
    action: "Atur ulang kata sandi",
    footer: "Jika Anda tidak meminta pengaturan ulang kata sandi, abaikan e-mail ini.",
  },
};

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (char) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[char]!);

export type RenderedMail = { subject: string; text: string; html: string };

function render(
  table: Record<Language, MailStrings>,
  language: Language | null | undefined,
  content: { name?: string | undefined; secret?: string; link?: string },
): RenderedMail {
  const strings = table[language ?? "en"] ?? table.en;
  const greeting = strings.greeting(content.name);
  const secretLine = content.secret && strings.secretLabel ? `${strings.secretLabel} ${content.secret}` : undefined;
  const actionLine = content.link && strings.action ? `${strings.action}: ${content.link}` : undefined;
  const text = [greeting, "", strings.intro, "", secretLine, actionLine, "", strings.footer, ""]
    .filter((line) => line !== undefined)
    .join("\n");
  const html = [
    `<!doctype html><html><body style="font-family:sans-serif">`,
    `<p>${escapeHtml(greeting)}</p>`,
    `<p>${escapeHtml(strings.intro)}</p>`,
    secretLine &&
      `<p>${escapeHtml(strings.secretLabel!)} <strong style="font-size:1.4em;letter-spacing:0.1em">${escapeHtml(content.secret!)}</strong></p>`,
    actionLine && `<p><a href="${escapeHtml(content.link!)}">${escapeHtml(strings.action!)}</a></p>`,
    `<p style="color:#666">${escapeHtml(strings.footer)}</p>`,
    `</body></html>`,
  ]
    .filter(Boolean)
    .join("\n");
  return { subject: strings.subject, text, html };
}

export const verifyEmailMail = (language: Language, name: string, link: string) =>
  render(VERIFY_EMAIL, language, { name, link });

export const otpCodeMail = (language: Language | null, name: string | undefined, code: string) =>
  render(OTP_CODE, language, { name, secret: code });

export const passwordResetMail = (language: Language, name: string, token: string, link: string) =>
  render(PASSWORD_RESET, language, { name, secret: token, link });
