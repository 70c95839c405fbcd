// Every mail has a text part and an HTML part in the recipient's preferred language, with
// English as the fallback.
import type { Language } from "../../db/schema/index.ts";

type Strings = { subject: string; greeting: (name: string) => string; body: string; action: string; footer: string };

const VERIFY_EMAIL: Record<Language, Strings> = {
  en: {
    subject: "Verify your e-mail address",
    greeting: (name) => `Hello ${name},`,
    body: "Please confirm your e-mail address by opening the link below. The link is valid for 60 minutes.",
    action: "Verify e-mail address",
    footer: "If you did not create an account, no further action is required.",
  },
  "zh-CN": {
    subject: "验证您的电子邮件地址",
    greeting: (name) => `${name}，您好：`,
    body: "请打开下面的链接确认您的电子邮件地址。链接在 60 分钟内有效。",
    action: "验证电子邮件地址",
    footer: "如果您没有创建帐户，请忽略此邮件。",
  },
  ja: {
    subject: "メールアドレスの確認",
    greeting: (name) => `${name} 様`,
    body: "以下のリンクを開いてメールアドレスを確認してください。リンクの有効期限は60分です。",
    action: "メールアドレスを確認する",
    footer: "アカウントを作成していない場合は、このメールを無視してください。",
  },
  th: {
    subject: "ยืนยันที่อยู่อีเมลของคุณ",
    greeting: (name) => `สวัสดี ${name}`,
    body: "โปรดยืนยันที่อยู่อีเมลของคุณโดยเปิดลิงก์ด้านล่าง ลิงก์มีอายุ 60 นาที",
    action: "ยืนยันที่อยู่อีเมล",
    footer: "หากคุณไม่ได้สร้างบัญชี ไม่ต้องดำเนินการใดๆ",
  },
  id: {
    subject: "Verifikasi alamat e-mail Anda",
    greeting: (name) => `Halo ${name},`,
    body: "Silakan konfirmasi alamat e-mail Anda dengan membuka tautan di bawah. Tautan berlaku selama 60 menit.",
    action: "Verifikasi alamat e-mail",
    footer: "Jika Anda tidak membuat akun, abaikan e-mail ini.",
  },
};

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (char) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[char]!);

function render(strings: Strings, name: string, link: string) {
  const text = [
    strings.greeting(name),
    "",
    strings.body,
    "",
    `${strings.action}: ${link}`,
    "",
    strings.footer,
    "",
  ].join("\n");
  const html = `<!doctype html><html><body style="font-family:sans-serif">
<p>${escapeHtml(strings.greeting(name))}</p>
<p>${escapeHtml(strings.body)}</p>
<p><a href="${escapeHtml(link)}">${escapeHtml(strings.action)}</a></p>
<p style="color:#666">${escapeHtml(strings.footer)}</p>
</body></html>`;
  return { subject: strings.subject, text, html };
}

export function verifyEmailMail(language: Language, name: string, link: string) {
  return render(VERIFY_EMAIL[language] ?? VERIFY_EMAIL.en, name, link);
}
