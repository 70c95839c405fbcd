// `npm run bench -- search` (only when named; needs DATABASE_URL): what message search
// (docs/search.md, server/services/search/) costs on a large index, how fast its backfill builds
// that index, and how soon a new message is found under load.
//
// Targets (contract "Search", docs/search.md): p95 under 100 ms for ordinary queries on 1,000,000
// messages; any pathological query answered within 2 s, never a 5xx; a new message found within
// 2 s of its post's answer (p99) under load.
//
// 1. The data set, in a database of its own, `bench_search` (BENCH_SEARCH_DATABASE), created next
// to the one of DATABASE_URL and kept for later runs (BENCH_SEARCH_RELOAD=1 drops it and loads
// anew; so does a data set made with other knobs). A server (startBenchServer, on that database,
// which it migrates) is used for the accounts: ten authors, two per language (en, zh-CN, ja, th,
// id, their preferred_language), the first creating a workspace, and the searcher (en), all others
// joining by invite. Then in SQL (one postgres.js connection, foreign-key triggers off for the
// load): BENCH_SEARCH_CHANNELS channels (50), every second one private; the authors in all, the
// searcher in the first BENCH_SEARCH_MEMBER_CHANNELS (20, half of them private), so they read 25
// public + 10 private + #general; BENCH_SEARCH_MESSAGES messages (1,000,000), message s in channel
// s % 50, in time order over the 400 days before the load, ids `msg_` + 10 characters of time + 16
// of the sequence number as server/ids.ts lays them out (so they sort by time, and the router
// takes them as cursors). Its text is made in SQL from parallel vocabularies (CONCEPTS, FILLERS:
// word i is the same word in each language) by hashes of s (hashint8): language en 30%, zh-CN
// 20%, ja 20%, th 15%, id 15%; 5 to 14 tokens, 3 in 10 a filler word, the others a content word
// skewed to the first ones ("meeting" is in about 60% of English texts, 研修 in about 5% of
// Japanese ones); en and id with spaces and capitalized, zh-CN, ja and th without spaces; the
// rare word (kaleidoscope, 万華鏡, …) in 1 message in 1000; ' 🎉' in 1 in 200, ' 50%' in 1 in 400,
// ' v2_final' in 1 in 600; a tombstone (deleted_at set, content '') in 1 in 500. A third of the
// others have a translation (message_translations, status done: the same tokens in another
// language), half of those a second one. The load goes in chunks of 100,000 messages, its
// progress kept in bench_search_state, so a load that stopped resumes; then VACUUM ANALYZE.
//
// The index is built by the product's own backfill: the search row of consumer_backfills is reset
// and servers are started on the database (each, as the leading process, runs
// backfillSearchStep in the background, 1000 messages a step, 20 ms between steps); the bench
// watches consumer_backfills (the id reached gives the share done) until it is finished. A
// backfill from scratch is interrupted once, BENCH_SEARCH_BACKFILL_RESTART_AFTER seconds (20) in:
// its server is stopped and another started, which must go on from where the first stopped (the
// id reached never goes back up). Reported: seconds (from each server's start), index rows per
// second, messages per second, and whether the index then holds exactly one row per standing
// message with content and per done translation of one (counted in SQL). Should the backfill be
// projected (after a minute) to take longer than BENCH_SEARCH_BACKFILL_LIMIT seconds (900), its
// server is stopped and bulk SQL builds the rest (lower() and keys cut in SQL; the table says
// "backfill + bulk SQL"). The record is kept with the data set: a later run reports it as measured
// then (BENCH_SEARCH_REINDEX=1 empties the index and measures the backfill again). Then VACUUM
// ANALYZE message_search.
//
// 2. and 3. The queries, over REST on a server with translation on (a fake LibreTranslate in this
// process, so the searcher's English translations are searched too, as in production with a
// provider), with the searcher's bearer token (a fresh sign-in), node:http keep-alive, one request
// at a time: 5 unrecorded rounds, a wait for a quiet machine (at most BENCH_SEARCH_QUIET_WAIT, 30
// s), then BENCH_SEARCH_REQUESTS (100) rounds over the seven queries (a common English word, a rare
// one, a two-character Japanese word, a Thai word, an Indonesian word of middling frequency, two
// terms, a word nowhere): p50, p95, p99, max
// (target p95 < 100 ms). Then each pathological query (`%`, `_`, `%%%`, one and two backslashes,
// 100 one-character terms, one 200-character term of "th" and one of "the", 🎉, "heth", "ethe")
// BENCH_SEARCH_PATHOLOGICAL_RUNS times (3): max (target < 2000 ms) and any status but 200 (none
// expected). Every query's first page (and, for the first query, the second through its cursor)
// is compared with the answer worked out here from the messages and translations themselves, not
// the index: the readable channels' standing messages newest first, a hit when every term
// (split on whitespace, toLowerCase()) is in the lower-cased content (matched_in content) or else
// all in the English translation (translation); ids, order, matched_in and next_cursor must be the
// same. Translations the searches ask for (pending rows, the fake's texts) are deleted with their
// index rows at the start of the next run, so the data set stays as loaded. Then EXPLAIN (ANALYZE,
// BUFFERS), with jit = off as the server's connections, of the very statements searchMessages sends
// for each query (caught by running it here: the readable places, step 1 over the newest 2000 index
// rows, step 2 through the GIN keys when step 1 did not fill the page); the plan is printed for
// the queries over target and for any statement taking 100 ms or more.
//
// 4. Freshness under load, on a fresh database (created next to DATABASE_URL's, dropped after) with
// PostgreSQL and Redis, translation off: the fan-out team of bench/fanout.ts (an owner, 20 receiver
// and 4 sender accounts in #general), BENCH_SEARCH_FANOUT_RECEIVERS (100) live WebSocket receivers,
// the senders posting over REST at BENCH_SEARCH_FANOUT_RATE (600) messages/s, open loop (at most 64
// in flight), 3 s of warm-up, then BENCH_SEARCH_FANOUT_SECONDS (30). Meanwhile another account
// posts a probe to #general every BENCH_SEARCH_PROBE_MS (100) ms with a unique token, and a fifth
// account searches for each token every BENCH_SEARCH_POLL_MS (50) ms (each probe polled on its
// own, so about as many searches run at once as probes wait) until the answer holds the probe (at
// most 10 s): p50, p95, p99, max of post answer → found (target p99 < 2000 ms), the searches' own
// latency and rate; and the fan-out's accepted rate, delivered share (every accepted message to
// every receiver: 99.9% at least, no duplicates) and delivery p50/p99.
//
// 5. PGlite: the same data shape with BENCH_SEARCH_PGLITE_MESSAGES (100,000) messages in a PGlite
// data directory (BENCH_SEARCH_PGLITE_DIR, default <tmp>/chat-bench-search-pglite, kept as the
// PostgreSQL data set is): the accounts through a server on it (no DATABASE_URL, no REDIS_URL,
// DATA_DIR there), then this process opens it (db/client.ts openDatabase) to load it and build the
// index with backfillSearchStep in a loop (no pause: a PGlite database serves one process), and
// works out the answers; then a server on it answers the seven queries as in 2 (p50, p95).
//
//   BENCH_SEARCH_MESSAGES          messages on PostgreSQL (1000000)
//   BENCH_SEARCH_CHANNELS          channels (50), every second one private
//   BENCH_SEARCH_MEMBER_CHANNELS   channels the searcher is in (20)
//   BENCH_SEARCH_REQUESTS          recorded requests of each query (100)
//   BENCH_SEARCH_PATHOLOGICAL_RUNS runs of each pathological query (3)
//   BENCH_SEARCH_RELOAD            1: load the data sets again (PostgreSQL and PGlite)
//   BENCH_SEARCH_REINDEX           1: empty the index and build it again with the backfill
//   BENCH_SEARCH_DATABASE          the PostgreSQL database's name (bench_search)
//   BENCH_SEARCH_BACKFILL_RESTART_AFTER  seconds into a backfill from scratch to restart its server (20; 0: never)
//   BENCH_SEARCH_BACKFILL_LIMIT    longest projected backfill before bulk SQL builds the rest, s (900)
//   BENCH_SEARCH_QUIET_WAIT        longest wait for a quiet machine before the recorded requests, s (30)
//   BENCH_SEARCH_FANOUT_RATE       fan-out messages/s during the freshness part (600)
//   BENCH_SEARCH_FANOUT_SECONDS    its length (30)
//   BENCH_SEARCH_FANOUT_RECEIVERS  live receivers (100)
//   BENCH_SEARCH_PROBE_MS          one probe every … ms (100)
//   BENCH_SEARCH_POLL_MS           each probe's search every … ms (50)
//   BENCH_SEARCH_PGLITE_MESSAGES   messages on PGlite (100000)
//   BENCH_SEARCH_PGLITE_DIR        the PGlite data directory
//   BENCH_SEARCH_PARTS             which parts run, of postgres,freshness,pglite (all)
//
// Reading the numbers: the load generator, the server and PostgreSQL share the machine (2 cores
// here); the data set is freshly vacuumed and, after the first requests, in the OS cache (the
// index is larger than shared_buffers); the latencies are at a client on the same machine.
import { rm } from "node:fs/promises";
import { Agent as HttpAgent } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { randomBytes } from "node:crypto";
import { type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/postgres-js";
import { PgDialect } from "drizzle-orm/pg-core";
import postgres, { type Sql } from "postgres";
import { openDatabase, type Database } from "../db/client.ts";
import * as schema from "../db/schema/index.ts";
import type { Config } from "../server/config.ts";
import { backfillSearchStep } from "../server/services/search/backfill.ts";
import type { SearchPage } from "../server/records/search.ts";
import { searchMessages } from "../server/services/search/search-messages.ts";
import { startFakeLibreTranslate, type FakeTranslator } from "../test/helpers/translation.ts";
import {
  Collector,
  MARKER,
  openReceivers,
  PADDING,
  PASS_DELIVERED_PCT,
  recordPost,
  serviceSide,
  setupTeam,
  type Receiver,
  type SendStats,
} from "./fanout.ts";
import {
  api,
  envNumber,
  keepAliveCaller,
  mapLimit,
  percentile,
  postAtRate,
  postJson,
  round,
  sleep,
  startBenchServer,
  startUsageWindow,
  waitForQuietMachine,
  type BenchServer,
} from "./lib.ts";

// ---------------------------------------------------------------------------------------------
// Knobs

const MESSAGES = Math.floor(envNumber("BENCH_SEARCH_MESSAGES", 1_000_000));
const CHANNELS = Math.floor(envNumber("BENCH_SEARCH_CHANNELS", 50));
const MEMBER_CHANNELS = Math.min(CHANNELS, Math.floor(envNumber("BENCH_SEARCH_MEMBER_CHANNELS", 20)));
const REQUESTS = Math.min(100_000, Math.floor(envNumber("BENCH_SEARCH_REQUESTS", 100)));
const PATHOLOGICAL_RUNS = Math.min(100, Math.floor(envNumber("BENCH_SEARCH_PATHOLOGICAL_RUNS", 3)));
const RELOAD = process.env.BENCH_SEARCH_RELOAD === "1";
const REINDEX = process.env.BENCH_SEARCH_REINDEX === "1";
const DATABASE_NAME = process.env.BENCH_SEARCH_DATABASE || "bench_search";
/** Seconds into a backfill from scratch at which its server is stopped and another started (0: never). */
const RESTART_AFTER_SECONDS = Number(process.env.BENCH_SEARCH_BACKFILL_RESTART_AFTER ?? 20) || 0;
/** A backfill projected to take longer than this (s) is stopped and the rest built in bulk SQL. */
const BACKFILL_LIMIT_SECONDS = envNumber("BENCH_SEARCH_BACKFILL_LIMIT", 900);
const FANOUT_RATE = Math.min(20_000, envNumber("BENCH_SEARCH_FANOUT_RATE", 600));
const FANOUT_SECONDS = Math.min(600, envNumber("BENCH_SEARCH_FANOUT_SECONDS", 30));
const FANOUT_RECEIVERS = Math.min(10_000, Math.floor(envNumber("BENCH_SEARCH_FANOUT_RECEIVERS", 100)));
const PROBE_EVERY_MS = envNumber("BENCH_SEARCH_PROBE_MS", 100);
const POLL_EVERY_MS = envNumber("BENCH_SEARCH_POLL_MS", 50);
const PGLITE_MESSAGES = Math.floor(envNumber("BENCH_SEARCH_PGLITE_MESSAGES", 100_000));
const PGLITE_DIR = process.env.BENCH_SEARCH_PGLITE_DIR || path.join(tmpdir(), "chat-bench-search-pglite");
/** Which parts run: postgres (data, backfill, queries), freshness, pglite. */
const PARTS = new Set(
  (process.env.BENCH_SEARCH_PARTS ?? "postgres,freshness,pglite").split(",").map((part) => part.trim()),
);
const QUIET_WAIT_SECONDS = Math.min(600, envNumber("BENCH_SEARCH_QUIET_WAIT", 30));

const WARMUP = 5;
/** Targets of the issue. */
export const TARGET_P95_MS = 100;
export const TARGET_PATHOLOGICAL_MS = 2000;
export const TARGET_FRESH_P99_MS = 2000;
/** A statement this slow (ms) has its plan printed even when its query met the target. */
const SLOW_STATEMENT_MS = 100;
/** A probe not found this long after its post's answer counts as not found. */
const PROBE_GIVE_UP_MS = 10_000;
/** Messages per INSERT of the load. */
const CHUNK_MESSAGES = 100_000;
/** Bump when the generated data changes: a data set of another version is loaded again. */
const DATA_VERSION = 1;
const PASSWORD = "bench-search-password";
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const DAY_MS = 86_400_000;
/** Authors per language. */
const AUTHORS_PER_LANGUAGE = 2;

// ---------------------------------------------------------------------------------------------
// The text: parallel vocabularies (index i is the same word in every language), so that a
// translation is the same sentence in another language.

/** Languages by their number in the SQL (1-based): en, zh-CN, ja, th, id. */
const LANGUAGES = ["en", "zh-CN", "ja", "th", "id"] as const;
type Lang = (typeof LANGUAGES)[number];
/** Share of the messages in each language, in twentieths: en 30%, zh-CN 20%, ja 20%, th 15%, id 15%. */
const LANGUAGE_TWENTIETHS = [6, 4, 4, 3, 3];

/** Content words, most frequent first (word i is picked with probability ∝ √(i+1) − √i), then the rare word. */
const CONCEPTS: Record<Lang, string>[] = [
  { en: "meeting", "zh-CN": "会议", ja: "会議", th: "ประชุม", id: "rapat" },
  { en: "project", "zh-CN": "项目", ja: "プロジェクト", th: "โครงการ", id: "proyek" },
  { en: "today", "zh-CN": "今天", ja: "今日", th: "วันนี้", id: "hari ini" },
  { en: "tomorrow", "zh-CN": "明天", ja: "明日", th: "พรุ่งนี้", id: "besok" },
  { en: "team", "zh-CN": "团队", ja: "チーム", th: "ทีม", id: "tim" },
  { en: "update", "zh-CN": "更新", ja: "更新", th: "อัปเดต", id: "pembaruan" },
  { en: "deadline", "zh-CN": "截止日期", ja: "締め切り", th: "กำหนดส่ง", id: "tenggat" },
  { en: "report", "zh-CN": "报告", ja: "報告書", th: "รายงาน", id: "laporan" },
  { en: "customer", "zh-CN": "客户", ja: "顧客", th: "ลูกค้า", id: "pelanggan" },
  { en: "review", "zh-CN": "审查", ja: "レビュー", th: "ตรวจสอบ", id: "tinjauan" },
  { en: "design", "zh-CN": "设计", ja: "デザイン", th: "การออกแบบ", id: "desain" },
  { en: "server", "zh-CN": "服务器", ja: "サーバー", th: "เซิร์ฟเวอร์", id: "server" },
  { en: "release", "zh-CN": "发布", ja: "リリース", th: "เผยแพร่", id: "rilis" },
  { en: "please", "zh-CN": "请", ja: "お願い", th: "กรุณา", id: "tolong" },
  { en: "check", "zh-CN": "检查", ja: "確認", th: "เช็ค", id: "periksa" },
  { en: "lunch", "zh-CN": "午饭", ja: "昼ご飯", th: "อาหารกลางวัน", id: "makan siang" },
  { en: "coffee", "zh-CN": "咖啡", ja: "コーヒー", th: "กาแฟ", id: "kopi" },
  { en: "office", "zh-CN": "办公室", ja: "事務所", th: "สำนักงาน", id: "kantor" },
  { en: "schedule", "zh-CN": "日程", ja: "予定", th: "ตาราง", id: "jadwal" },
  { en: "budget", "zh-CN": "预算", ja: "予算", th: "งบประมาณ", id: "anggaran" },
  { en: "question", "zh-CN": "问题", ja: "質問", th: "คำถาม", id: "pertanyaan" },
  { en: "answer", "zh-CN": "回答", ja: "回答", th: "คำตอบ", id: "jawaban" },
  { en: "document", "zh-CN": "文件", ja: "資料", th: "เอกสาร", id: "dokumen" },
  { en: "database", "zh-CN": "数据库", ja: "データベース", th: "ฐานข้อมูล", id: "basis data" },
  { en: "bug", "zh-CN": "错误", ja: "バグ", th: "บั๊ก", id: "galat" },
  { en: "fix", "zh-CN": "修复", ja: "修正", th: "แก้ไข", id: "perbaikan" },
  { en: "test", "zh-CN": "测试", ja: "テスト", th: "ทดสอบ", id: "uji" },
  { en: "week", "zh-CN": "星期", ja: "週", th: "สัปดาห์", id: "minggu" },
  { en: "morning", "zh-CN": "早上", ja: "朝", th: "ตอนเช้า", id: "pagi" },
  { en: "afternoon", "zh-CN": "下午", ja: "午後", th: "ตอนบ่าย", id: "sore" },
  { en: "thanks", "zh-CN": "谢谢", ja: "ありがとう", th: "ขอบคุณ", id: "terima kasih" },
  { en: "great", "zh-CN": "很好", ja: "素晴らしい", th: "เยี่ยม", id: "bagus" },
  { en: "new", "zh-CN": "新", ja: "新しい", th: "ใหม่", id: "baru" },
  { en: "feature", "zh-CN": "功能", ja: "機能", th: "ฟีเจอร์", id: "fitur" },
  { en: "plan", "zh-CN": "计划", ja: "計画", th: "แผน", id: "rencana" },
  { en: "price", "zh-CN": "价格", ja: "価格", th: "ราคา", id: "harga" },
  { en: "order", "zh-CN": "订单", ja: "注文", th: "คำสั่งซื้อ", id: "pesanan" },
  { en: "invoice", "zh-CN": "发票", ja: "請求書", th: "ใบแจ้งหนี้", id: "faktur" },
  { en: "travel", "zh-CN": "出差", ja: "出張", th: "การเดินทาง", id: "perjalanan" },
  { en: "holiday", "zh-CN": "假期", ja: "休暇", th: "วันหยุด", id: "liburan" },
  { en: "weather", "zh-CN": "天气", ja: "天気", th: "อากาศ", id: "cuaca" },
  { en: "rain", "zh-CN": "下雨", ja: "雨", th: "ฝน", id: "hujan" },
  { en: "phone", "zh-CN": "电话", ja: "電話", th: "โทรศัพท์", id: "telepon" },
  { en: "email", "zh-CN": "邮件", ja: "メール", th: "อีเมล", id: "surel" },
  { en: "call", "zh-CN": "通话", ja: "通話", th: "โทร", id: "panggilan" },
  { en: "problem", "zh-CN": "故障", ja: "問題", th: "ปัญหา", id: "masalah" },
  { en: "idea", "zh-CN": "想法", ja: "アイデア", th: "ความคิด", id: "gagasan" },
  { en: "draft", "zh-CN": "草稿", ja: "下書き", th: "ร่าง", id: "draf" },
  { en: "contract", "zh-CN": "合同", ja: "契約", th: "สัญญา", id: "kontrak" },
  { en: "manager", "zh-CN": "经理", ja: "部長", th: "ผู้จัดการ", id: "manajer" },
  { en: "dinner", "zh-CN": "晚饭", ja: "夕食", th: "อาหารเย็น", id: "makan malam" },
  { en: "weekend", "zh-CN": "周末", ja: "週末", th: "สุดสัปดาห์", id: "akhir pekan" },
  { en: "slides", "zh-CN": "幻灯片", ja: "スライド", th: "สไลด์", id: "salindia" },
  { en: "login", "zh-CN": "登录", ja: "ログイン", th: "เข้าสู่ระบบ", id: "masuk" },
  { en: "password", "zh-CN": "密码", ja: "パスワード", th: "รหัสผ่าน", id: "kata sandi" },
  { en: "network", "zh-CN": "网络", ja: "ネットワーク", th: "เครือข่าย", id: "jaringan" },
  { en: "backup", "zh-CN": "备份", ja: "バックアップ", th: "สำรองข้อมูล", id: "cadangan" },
  { en: "training", "zh-CN": "培训", ja: "研修", th: "การฝึกอบรม", id: "pelatihan" },
  { en: "market", "zh-CN": "市场", ja: "市場", th: "ตลาด", id: "pasar" },
  { en: "sales", "zh-CN": "销售", ja: "売上", th: "ยอดขาย", id: "penjualan" },
  // Never picked by the skew: put in one message in 1000 (the rare word).
  { en: "kaleidoscope", "zh-CN": "万花筒", ja: "万華鏡", th: "ลานตา", id: "kaleidoskop" },
];
/** Words between the content words, 3 tokens in 10. */
const FILLERS: Record<Lang, string[]> = {
  en: ["the", "a", "to", "for", "and", "is", "we", "can", "with", "on", "about", "this"],
  "zh-CN": ["的", "了", "我们", "你", "在", "和", "要", "是", "可以", "吗", "关于", "这个"],
  ja: ["の", "を", "に", "は", "が", "と", "で", "です", "ます", "ください", "について", "この"],
  th: ["ที่", "และ", "ของ", "ใน", "จะ", "ได้", "เรา", "คุณ", "กับ", "ครับ", "เกี่ยวกับ", "นี้"],
  id: ["yang", "dan", "untuk", "di", "ke", "dari", "kita", "bisa", "dengan", "pada", "tentang", "ini"],
};
/** Picked by the skew (1-based in SQL); the rare word is number SKEWED + 1. */
const SKEWED = CONCEPTS.length - 1;
const RARE_WORD = CONCEPTS.length;

/** PostgreSQL's literal of a two-dimensional text array (every row as long as the others). */
function textArray2d(rows: string[][]): string {
  const quote = (value: string) => `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
  return `{${rows.map((row) => `{${row.map(quote).join(",")}}`).join(",")}}`;
}
const CONCEPTS_LITERAL = textArray2d(LANGUAGES.map((lang) => CONCEPTS.map((concept) => concept[lang])));
const FILLERS_LITERAL = textArray2d(LANGUAGES.map((lang) => FILLERS[lang]));

// ---------------------------------------------------------------------------------------------
// The queries

type QueryKind = "standard" | "pathological";
type QueryDef = { name: string; q: string; kind: QueryKind; note?: string };

/** 100 distinct one-code-point terms: a–z, then the letters of the Thai, Japanese and Chinese words. */
function oneCharacterTerms(): string {
  const chars: string[] = [];
  const add = (char: string) => {
    if (chars.length < 100 && !/\s/u.test(char) && !chars.includes(char)) chars.push(char);
  };
  for (let code = 97; code <= 122; code++) add(String.fromCharCode(code));
  for (const lang of ["th", "ja", "zh-CN"] as const)
    for (const concept of CONCEPTS) for (const char of concept[lang]) add(char);
  return chars.join(" ");
}

const STANDARD_QUERIES: QueryDef[] = [
  { name: "common English word", q: "meeting", kind: "standard", note: "in about 60% of English texts" },
  { name: "rare English word", q: "kaleidoscope", kind: "standard", note: "one message in 1000, any language" },
  { name: "two-character Japanese word", q: "研修", kind: "standard", note: "about 5% of Japanese messages" },
  { name: "Thai word", q: "งบประมาณ", kind: "standard", note: "about 9% of Thai messages, no spaces" },
  {
    name: "Indonesian word",
    q: "pelatihan",
    kind: "standard",
    note: "about 5% of Indonesian messages, 1% of index rows: at 1M, 15 among the newest 2000",
  },
  { name: "two terms", q: "project deadline", kind: "standard" },
  { name: "no hit", q: "xylophone", kind: "standard" },
];

const PATHOLOGICAL_QUERIES: QueryDef[] = [
  { name: "%", q: "%", kind: "pathological", note: "literal; in ' 50%' of 1 message in 400" },
  { name: "_", q: "_", kind: "pathological", note: "literal; in ' v2_final' of 1 message in 600" },
  { name: "%%%", q: "%%%", kind: "pathological" },
  { name: "\\", q: "\\", kind: "pathological" },
  { name: "\\\\", q: "\\\\", kind: "pathological" },
  {
    name: "100 one-character terms",
    q: oneCharacterTerms(),
    kind: "pathological",
    note: "a–z, then Thai/kana/CJK letters",
  },
  { name: "one 200-character term 'thth…'", q: "th".repeat(100), kind: "pathological" },
  {
    name: "one 200-character term 'thethe…'",
    q: "the".repeat(67).slice(0, 200),
    kind: "pathological",
    note: "common English letters",
  },
  { name: "emoji 🎉", q: "🎉", kind: "pathological", note: "1 message in 200" },
  { name: "common bigrams, rare together 'heth'", q: "heth", kind: "pathological" },
  { name: "common bigrams, rare together 'ethe'", q: "ethe", kind: "pathological" },
];

// ---------------------------------------------------------------------------------------------
// Requests

const agent = new HttpAgent({ keepAlive: true, maxSockets: 64 });
const call = keepAliveCaller(agent, 60_000);

type Person = { id: number; token: string; email: string };

async function register(baseUrl: string, name: string, language: Lang): Promise<Person> {
  const email = `search-${name}-${Date.now()}-${randomBytes(3).toString("hex")}@example.test`;
  const body = await api<{ access_token: string; user: { id: number } }>(
    baseUrl,
    "POST",
    "/api/v1/auth/app/register",
    undefined,
    { name, email, password: PASSWORD, password_confirmation: PASSWORD, preferred_language: language },
  );
  return { id: body.user.id, token: body.access_token, email };
}

async function signIn(baseUrl: string, email: string): Promise<string> {
  const body = await api<{ access_token: string }>(baseUrl, "POST", "/api/v1/auth/app/login", undefined, {
    email,
    password: PASSWORD,
  });
  return body.access_token;
}

const searchUrl = (baseUrl: string, q: string, before?: string) =>
  `${baseUrl}/api/v1/search/messages?${new URLSearchParams({ q, ...(before && { before }) }).toString()}`;

type Hit = { id: string; matched_in: "content" | "translation" };

// ---------------------------------------------------------------------------------------------
// One statement runner over either driver

/** Runs one statement: postgres.js (`unsafe`) or PGlite (`query`). */
type Query = <Row = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<Row[]>;

const postgresQuery =
  (sql: Sql): Query =>
  async <Row>(text: string, params: unknown[] = []) =>
    (await sql.unsafe(text, params as never[])) as unknown as Row[];

// ---------------------------------------------------------------------------------------------
// The data set

type Params = { version: number; messages: number; channels: number; member_channels: number };
const paramsFor = (messages: number): Params => ({
  version: DATA_VERSION,
  messages,
  channels: CHANNELS,
  member_channels: MEMBER_CHANNELS,
});

type BackfillRecord = {
  /** "backfill": the product's backfill built it all; "backfill + bulk SQL": it was too slow and SQL built the rest. */
  built_by: "backfill" | "backfill + bulk SQL";
  seconds: number;
  messages: number;
  rows: number;
  rows_per_s: number;
  /** Null when bulk SQL built part of it. */
  messages_per_s: number | null;
  /** Rows written by the backfill (the rest, if any, by the bulk SQL). */
  backfill_rows: number;
  backfill_seconds: number;
  /** Servers it ran on (a restart in the middle makes two). */
  servers: number;
  /** At a restart: how far it was (share of messages), and whether the next server went on from there. */
  restart: { at_pct: number; resumed: boolean } | null;
  /** The index has exactly the rows the messages and translations call for. */
  complete: boolean;
  missing_rows: number;
  extra_rows: number;
  measured_at: string;
};

type State = {
  params: Params;
  workspace_id: string;
  searcher_email: string;
  searcher_id: number;
  author_ids: number[];
  base_ms: string;
  step_ms: string;
  loaded_to: string;
  stage: "loading" | "analyzing" | "indexing" | "done";
  load_seconds: number;
  loaded_at: Date | string | null;
  backfill: BackfillRecord | null;
};

async function readState(query: Query): Promise<State | undefined> {
  await query(`create table if not exists bench_search_state (
    id integer primary key default 1 check (id = 1),
    params jsonb not null,
    workspace_id text not null,
    searcher_email text not null,
    searcher_id integer not null,
    author_ids integer[] not null,
    base_ms bigint not null,
    step_ms bigint not null,
    loaded_to bigint not null default 0,
    stage text not null,
    load_seconds double precision not null default 0,
    loaded_at timestamptz,
    backfill jsonb
  )`);
  await query(`create table if not exists bench_search_channels (
    idx integer primary key,
    id text not null,
    visibility text not null,
    member boolean not null
  )`);
  const [row] = await query<State>(`select * from bench_search_state where id = 1`);
  if (!row) return undefined;
  // PGlite answers jsonb as objects too; postgres.js may answer text for an unknown type.
  const json = <T>(value: unknown): T => (typeof value === "string" ? (JSON.parse(value) as T) : (value as T));
  return { ...row, params: json<Params>(row.params), backfill: json<BackfillRecord | null>(row.backfill) };
}

type People = { workspaceId: string; searcher: Person; authors: Person[] };

/** Through the API: the authors (two per language), a workspace the first creates, the searcher and the others joining by invite. */
async function registerPeople(baseUrl: string, log: (line: string) => void): Promise<People> {
  log("search: registering 10 authors and the searcher, creating the workspace");
  const languages = LANGUAGES.flatMap((lang) => Array.from({ length: AUTHORS_PER_LANGUAGE }, () => lang));
  const authors = await mapLimit(languages, 4, (lang, i) => register(baseUrl, `author${i}-${lang}`, lang));
  const searcher = await register(baseUrl, "searcher", "en");
  const owner = authors[0]!;
  const workspace = await api<{ data: { id: string } }>(baseUrl, "POST", "/api/v1/workspaces", owner.token, {
    name: "Search bench",
  });
  const workspaceId = workspace.data.id;
  const invite = await api<{ data: { token: string } }>(
    baseUrl,
    "POST",
    `/api/v1/workspaces/${workspaceId}/invites`,
    owner.token,
    {},
  );
  for (const person of [...authors.slice(1), searcher]) {
    await api(baseUrl, "POST", `/api/v1/invites/${invite.data.token}/accept`, person.token);
  }
  return { workspaceId, searcher, authors };
}

function encode(value: number, width: number): string {
  let out = "";
  let rest = value;
  for (let i = 0; i < width; i++) {
    out = ALPHABET[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/** The channels (every second one private; the searcher in the first MEMBER_CHANNELS) and the state row. */
async function createChannels(query: Query, people: People, messages: number): Promise<State> {
  // Messages from 400 days ago to a day ago, one step of time per sequence number.
  const baseMs = Date.now() - 400 * DAY_MS;
  const stepMs = Math.max(1, Math.floor((399 * DAY_MS) / messages));
  const channels = Array.from({ length: CHANNELS }, (_, idx) => ({
    idx,
    id: `ch_${encode(baseMs, 10)}${encode(idx, 16)}`,
    visibility: idx % 2 === 1 ? "private" : "public",
    member: idx < MEMBER_CHANNELS,
  }));
  await query(`delete from bench_search_channels`);
  await query(
    `insert into bench_search_channels (idx, id, visibility, member)
      select * from unnest($1::integer[], $2::text[], $3::text[], $4::boolean[])`,
    [
      `{${channels.map((channel) => channel.idx).join(",")}}`,
      `{${channels.map((channel) => channel.id).join(",")}}`,
      `{${channels.map((channel) => channel.visibility).join(",")}}`,
      `{${channels.map((channel) => channel.member).join(",")}}`,
    ],
  );
  const created = new Date(baseMs).toISOString();
  const authorIds = `{${people.authors.map((author) => author.id).join(",")}}`;
  await query(
    `insert into channels (id, workspace_id, name, slug, visibility, is_general, created_by, created_at, updated_at)
      select b.id, $1, 'search-' || lpad(b.idx::text, 3, '0'), 'search-' || lpad(b.idx::text, 3, '0'), b.visibility,
        false, $2::integer, $3::timestamptz, $3::timestamptz
      from bench_search_channels b`,
    [people.workspaceId, people.authors[0]!.id, created],
  );
  await query(
    `insert into channel_members (channel_id, user_id, joined_at)
      select b.id, u.id, $1::timestamptz from bench_search_channels b cross join unnest($2::integer[]) as u(id)
      union all
      select b.id, $3::integer, $1::timestamptz from bench_search_channels b where b.member`,
    [created, authorIds, people.searcher.id],
  );
  await query(`delete from bench_search_state`);
  await query(
    `insert into bench_search_state (id, params, workspace_id, searcher_email, searcher_id, author_ids, base_ms,
        step_ms, loaded_to, stage, load_seconds)
      values (1, $1::jsonb, $2, $3, $4::integer, $5::integer[], $6::bigint, $7::bigint, 0, 'loading', 0)`,
    [
      JSON.stringify(paramsFor(messages)),
      people.workspaceId,
      people.searcher.email,
      people.searcher.id,
      authorIds,
      baseMs,
      stepMs,
    ],
  );
  return (await readState(query))!;
}

/** SQL of `width` Crockford base32 characters of a non-negative bigint expression, most significant first. */
function base32Sql(expression: string, width: number): string {
  return Array.from(
    { length: width },
    (_, i) => `substr('${ALPHABET}', (((${expression}) >> ${5 * (width - 1 - i)}) & 31)::integer + 1, 1)`,
  ).join(" || ");
}

/** A non-negative 31-bit hash of a bigint expression. */
const hashSql = (expression: string) => `(hashint8((${expression})::bigint)::bigint & 2147483647)`;

/**
 * One chunk of messages (sequence numbers [$1, $2)) and their translations. Message s: channel s
 * % CHANNELS; language by LANGUAGE_TWENTIETHS, author one of that language's two; 5 to 14 tokens,
 * 3 in 10 a filler word, the others a content word skewed to the first ones (word i with
 * probability √(i+1)/√n − √i/√n); the rare word as its first token in 1 message in 1000; en and
 * id joined with spaces and capitalized, zh-CN, ja and th without spaces; '.', '。' or nothing at
 * the end; ' 🎉' in 1 in 200, ' 50%' in 1 in 400, ' v2_final' in 1 in 600. A tombstone
 * (deleted_at set, content '') in 1 in 500. A third of the others have a translation (status
 * done: the same tokens in another language), half of those a second one.
 */
function chunkSql(state: State): string {
  const baseMs = Number(state.base_ms);
  const stepMs = Number(state.step_ms);
  const ms = (seq: string) => `${baseMs}::bigint + (${seq}) * ${stepMs}::bigint`;
  // 10 characters of time, then the sequence number in 16 (as server/ids.ts's 16 random ones).
  const id = (seq: string) => `'msg_' || ${base32Sql(ms(seq), 10)} || '00000' || ${base32Sql(seq, 11)}`;
  const at = (seq: string) => `to_timestamp((${ms(seq)}) / 1000.0)`;
  const bounds: number[] = [];
  let sum = 0;
  for (const share of LANGUAGE_TWENTIETHS) bounds.push((sum += share));
  const language = `1 + case ${bounds
    .slice(0, -1)
    .map((bound, i) => `when h.h0 % 20 < ${bound} then ${i}`)
    .join(" ")} else ${LANGUAGES.length - 1} end`;
  const word = (lang: string) => `case when k.w < 0 then v.fil[${lang}][-k.w] else v.con[${lang}][k.w] end`;
  const separator = (lang: string) => `case when ${lang} in (1, 5) then ' ' else '' end`;
  const finish = (lang: string, raw: string) =>
    `(case when ${lang} in (1, 5) then upper(left(${raw}, 1)) || substr(${raw}, 2) else ${raw} end)
      || (case when ${lang} in (1, 5) then '.' when ${lang} = 4 then '' else '。' end)
      || (case when r.hx % 200 = 1 then ' 🎉' else '' end)
      || (case when r.hx % 400 = 3 then ' 50%' else '' end)
      || (case when r.hx % 600 = 5 then ' v2_final' else '' end)`;
  return `
    with v as (select $3::text[] as con, $4::text[] as fil, $5::integer[] as authors, $6::text[] as langs),
    g as (
      select s, b.id as channel_id, h.hx, h.ht,
        (${language})::integer as lang,
        5 + (h.h0 / 20) % 10 as n,
        (h.h0 / 200) % ${AUTHORS_PER_LANGUAGE} as author_k,
        h.hx % 1000 = 0 as rare,
        h.hx % 500 = 7 as deleted,
        h.ht % 3 = 0 as translated,
        (h.ht / 3) % 2 = 0 as two,
        1 + (h.ht / 6) % 4 as o1,
        (h.ht / 24) % 3 as o2r
      from generate_series($1::bigint, $2::bigint - 1) as s
        cross join lateral (select ${hashSql("s * 32")} as h0, ${hashSql("s * 32 + 16")} as ht,
          ${hashSql("s * 32 + 17")} as hx) h
        join bench_search_channels b on b.idx = (s % ${CHANNELS})::integer),
    l as (
      select g.*, (1 + (g.lang - 1 + g.o1) % 5)::integer as tl1,
        (1 + (g.lang - 1 + 1 + (g.o1 - 1 + 1 + g.o2r) % 4) % 5)::integer as tl2
      from g),
    r as (
      select l.*, x.c, x.t1, x.t2 from l cross join lateral (
        select string_agg(${word("l.lang")}, ${separator("l.lang")} order by k.j) as c,
          string_agg(${word("l.tl1")}, ${separator("l.tl1")} order by k.j) as t1,
          string_agg(${word("l.tl2")}, ${separator("l.tl2")} order by k.j) as t2
        from v, generate_series(1, l.n) as j
          cross join lateral (select ${hashSql("l.s * 32 + j")} as t) q
          cross join lateral (select j, (case when l.rare and j = 1 then ${RARE_WORD}
            when q.t % 10 < 3 then -(1 + (q.t / 10) % ${FILLERS.en.length})
            else 1 + floor(${SKEWED} * power(((q.t / 10) % 10000) / 10000.0, 2)) end)::integer as w) k) x),
    m as (
      insert into messages (id, workspace_id, channel_id, author_user_id, content, type, language, created_at,
        updated_at, deleted_at)
      select ${id("r.s")}, $7, r.channel_id, v.authors[((r.lang - 1) * ${AUTHORS_PER_LANGUAGE} + r.author_k + 1)::integer],
        case when r.deleted then '' else ${finish("r.lang", "r.c")} end, 'text', v.langs[r.lang],
        ${at("r.s")}, ${at("r.s")}, case when r.deleted then ${at("r.s")} + interval '1 minute' end
      from r, v
      on conflict (id) do nothing)
    insert into message_translations (message_id, language, status, content, created_at, updated_at)
    select ${id("r.s")}, v.langs[x.l], 'done', ${finish("x.l", "x.t")}, ${at("r.s")} + interval '5 seconds',
      ${at("r.s")} + interval '5 seconds'
    from r cross join v cross join lateral (values (r.tl1, r.t1), (r.tl2, r.t2)) as x(l, t)
    where r.translated and not r.deleted and (x.l = r.tl1 or r.two)
    on conflict do nothing`;
}

/** Runs `task` with foreign-key triggers off on this connection (when the role may). */
async function withoutTriggers<T>(query: Query, log: (line: string) => void, task: () => Promise<T>): Promise<T> {
  let off = false;
  try {
    await query(`set session_replication_role = replica`);
    off = true;
  } catch {
    log("search: cannot set session_replication_role (not a superuser): foreign keys are checked row by row");
  }
  try {
    return await task();
  } finally {
    if (off) await query(`set session_replication_role = origin`);
  }
}

/** Loads (or finishes loading) the messages; answers the state, stage 'indexing'. */
async function loadMessages(
  query: Query,
  state: State,
  label: string,
  log: (line: string) => void,
): Promise<{ state: State; seconds: number }> {
  const started = performance.now();
  let accounted = started;
  const elapsed = () => {
    const now = performance.now();
    const seconds = (now - accounted) / 1000;
    accounted = now;
    return seconds;
  };
  const total = state.params.messages;
  let stage = state.stage;
  if (stage === "loading") {
    const text = chunkSql(state);
    let next = Number(state.loaded_to);
    if (next > 0) log(`search: ${label}: resuming the load at message ${next} of ${total}`);
    let lastLog = performance.now();
    await withoutTriggers(query, log, async () => {
      while (next < total) {
        const to = Math.min(total, next + CHUNK_MESSAGES);
        await query(text, [
          next,
          to,
          CONCEPTS_LITERAL,
          FILLERS_LITERAL,
          `{${state.author_ids.join(",")}}`,
          `{${LANGUAGES.join(",")}}`,
          state.workspace_id,
        ]);
        await query(`update bench_search_state set loaded_to = $1::bigint, load_seconds = load_seconds + $2`, [
          to,
          elapsed(),
        ]);
        next = to;
        if (performance.now() - lastLog > 10_000 || next === total) {
          lastLog = performance.now();
          log(
            `search: ${label}: loaded ${Math.round((next / total) * 100)}% of ${total} messages ` +
              `(${round((performance.now() - started) / 1000, 0)} s)`,
          );
        }
      }
    });
    await query(`update bench_search_state set stage = 'analyzing'`);
    stage = "analyzing";
  }
  if (stage === "analyzing") {
    for (const table of ["messages", "message_translations", "channels", "channel_members", "workspace_members"]) {
      await query(`vacuum (analyze) ${table}`);
    }
    await query(
      `update bench_search_state set stage = 'indexing', load_seconds = load_seconds + $1,
      loaded_at = coalesce(loaded_at, now())`,
      [elapsed()],
    );
  }
  return { state: (await readState(query))!, seconds: (performance.now() - started) / 1000 };
}

/** The search index empty and its backfill to run from the newest message. */
async function resetIndex(query: Query): Promise<void> {
  await query(`truncate message_search`);
  await query(`insert into consumer_backfills (name, before, finished_at) values ('search', null, null)
    on conflict (name) do update set before = null, finished_at = null`);
}

/** Translations made by this bench's own searches (pending rows, the fake's "[en] …") and their index rows go. */
async function dropRequestedTranslations(query: Query, state: State): Promise<number> {
  if (!state.loaded_at) return 0;
  const gone = await query<{ n: number }>(
    `with gone as (delete from message_translations where created_at > $1::timestamptz returning message_id, language),
      unindexed as (delete from message_search s using gone g where s.message_id = g.message_id and s.source = g.language)
    select count(*)::integer as n from gone`,
    [new Date(state.loaded_at).toISOString()],
  );
  return gone[0]?.n ?? 0;
}

/** What the index must hold: a row per standing message with content, and per done translation of one. */
async function expectedIndexRows(query: Query): Promise<{ messages: number; rows: number }> {
  const [row] = await query<{ messages: number; translations: number }>(
    `select (select count(*) from messages where deleted_at is null and content <> '')::integer as messages,
      (select count(*) from message_translations t join messages m on m.id = t.message_id
        where m.deleted_at is null and t.status = 'done' and t.content is not null and t.content <> '')::integer
        as translations`,
  );
  return { messages: row!.messages, rows: row!.messages + row!.translations };
}

/** Rows the index lacks and rows it has beyond what the messages and translations call for. */
async function indexDifference(query: Query): Promise<{ missing: number; extra: number }> {
  const [row] = await query<{ missing: number; extra: number }>(
    `with want as (
        select m.id as message_id, 'content' as source from messages m where m.deleted_at is null and m.content <> ''
        union all
        select t.message_id, t.language from message_translations t join messages m on m.id = t.message_id
        where m.deleted_at is null and t.status = 'done' and t.content is not null and t.content <> '')
      select (select count(*) from want w where not exists (select 1 from message_search s
          where s.message_id = w.message_id and s.source = w.source))::integer as missing,
        ((select count(*) from message_search) - (select count(*) from want w where exists (select 1 from message_search s
          where s.message_id = w.message_id and s.source = w.source)))::integer as extra`,
  );
  return { missing: row!.missing, extra: row!.extra };
}

/** The sequence number in a message id of this data set (its last 16 characters). */
function seqOf(id: string): number {
  let value = 0;
  for (const char of id.slice(-11)) value = value * 32 + ALPHABET.indexOf(char);
  return value;
}

/**
 * The bulk-SQL stand-in for the backfill (used only when the backfill is projected to take too
 * long): the same rows for every message older than `before` (all when null), lowered by lower()
 * (the data set's text has ASCII case only) and keys cut in SQL as text.ts cuts them.
 */
async function bulkIndex(query: Query, before: string | null, log: (line: string) => void): Promise<number> {
  const keys = `array(select distinct k from (
      select substr(x.lowered, i, 1) as k from generate_series(1, length(x.lowered)) as i
      union all select substr(x.lowered, i, 2) from generate_series(1, length(x.lowered) - 1) as i) p
    where k !~ '\\s')`;
  const t0 = performance.now();
  const [row] = await query<{ n: number }>(
    `with texts as (
        select m.id, 'content' as source, m.content as text, m.channel_id, m.author_user_id from messages m
        where m.deleted_at is null and m.content <> '' ${before === null ? "" : "and m.id < $1"}
        union all
        select m.id, t.language, t.content, m.channel_id, m.author_user_id from messages m
          join message_translations t on t.message_id = m.id
        where m.deleted_at is null and t.status = 'done' and t.content <> '' ${before === null ? "" : "and m.id < $1"}),
      written as (
        insert into message_search (message_id, source, place_id, author_user_id, lowered, keys)
        select x.id, x.source, x.channel_id, x.author_user_id, x.lowered, ${keys}
        from (select texts.*, lower(texts.text) as lowered from texts) x
        on conflict do nothing returning 1)
      select count(*)::integer as n from written`,
    before === null ? [] : [before],
  );
  await query(`update consumer_backfills set before = null, finished_at = now() where name = 'search'`);
  log(`search: bulk SQL wrote ${row!.n} index rows in ${round((performance.now() - t0) / 1000, 1)} s`);
  return row!.n;
}

// ---------------------------------------------------------------------------------------------
// The backfill, by the product's own servers (PostgreSQL)

type BackfillServers = { start(): Promise<BenchServer> };

/**
 * Runs the search backfill to its end on the servers `servers.start()` gives (each runs it in the
 * background as the leading process, 20 ms between steps of 1000 messages), watching its
 * progress in consumer_backfills; a backfill from scratch is interrupted once, after
 * RESTART_AFTER_SECONDS (its server stopped, another started), and must go on from where it was.
 * Answers the record and the server still running.
 */
async function runBackfill(
  query: Query,
  state: State,
  servers: BackfillServers,
  log: (line: string) => void,
): Promise<{ record: BackfillRecord; server: BenchServer }> {
  const total = state.params.messages;
  const readProgress = async () => {
    const [row] = await query<{ before: string | null; finished: boolean }>(
      `select before, finished_at is not null as finished from consumer_backfills where name = 'search'`,
    );
    return row ?? { before: null, finished: true };
  };
  const doneShare = (before: string | null) => (before === null ? 0 : (total - seqOf(before)) / total);
  const startProgress = await readProgress();
  const fromScratch = startProgress.before === null;
  let restart: BackfillRecord["restart"] = null;
  let seconds = 0;
  let serversUsed = 0;
  let bulkRows = 0;
  let lastBefore = startProgress.before;
  let monotonic = true;
  let server: BenchServer | undefined;
  for (;;) {
    // Timed from the server's start: its backfill may begin before it answers /readyz.
    const sessionStart = performance.now();
    server = await servers.start();
    serversUsed++;
    let lastLog = sessionStart;
    let stopForRestart = false;
    let tooSlow = false;
    let progress = await readProgress();
    while (!progress.finished) {
      await sleep(500);
      progress = await readProgress();
      if (progress.before !== null && lastBefore !== null && progress.before > lastBefore) monotonic = false;
      if (progress.before !== null) lastBefore = progress.before;
      const now = performance.now();
      const sessionSeconds = (now - sessionStart) / 1000;
      const share = doneShare(progress.before);
      if (now - lastLog > 15_000) {
        lastLog = now;
        log(
          `search: backfill ${round(share * 100, 1)}% of ${total} messages after ` +
            `${round(seconds + sessionSeconds, 0)} s (${Math.round((share * total) / (seconds + sessionSeconds))} messages/s)`,
        );
      }
      if (fromScratch && restart === null && RESTART_AFTER_SECONDS > 0 && sessionSeconds >= RESTART_AFTER_SECONDS) {
        stopForRestart = true;
        break;
      }
      const projected = share > 0 ? (seconds + sessionSeconds) / share : Infinity;
      if (seconds + sessionSeconds >= 60 && projected > BACKFILL_LIMIT_SECONDS) {
        log(
          `search: the backfill would take about ${Math.round(projected)} s in all (over ` +
            `BENCH_SEARCH_BACKFILL_LIMIT, ${BACKFILL_LIMIT_SECONDS} s): the rest is built in bulk SQL`,
        );
        tooSlow = true;
        break;
      }
    }
    seconds += (performance.now() - sessionStart) / 1000;
    if (stopForRestart) {
      await server.stop();
      const at = await readProgress();
      restart = { at_pct: round(doneShare(at.before) * 100, 1), resumed: false };
      lastBefore = at.before;
      log(`search: backfill stopped at ${restart.at_pct}% (server stopped); starting another server`);
      continue;
    }
    if (tooSlow) {
      await server.stop();
      const at = await readProgress();
      bulkRows = await bulkIndex(query, at.before, log);
      server = await servers.start();
    }
    break;
  }
  if (restart) restart.resumed = monotonic && restart.at_pct > 0;
  await query(`vacuum (analyze) message_search`);
  const expected = await expectedIndexRows(query);
  const difference = await indexDifference(query);
  const [rows] = await query<{ n: number }>(`select count(*)::integer as n from message_search`);
  const record: BackfillRecord = {
    built_by: bulkRows > 0 ? "backfill + bulk SQL" : "backfill",
    seconds: round(seconds, 1),
    messages: expected.messages,
    rows: rows!.n,
    rows_per_s: Math.round((rows!.n - bulkRows) / seconds),
    messages_per_s: bulkRows > 0 ? null : Math.round(expected.messages / seconds),
    backfill_rows: rows!.n - bulkRows,
    backfill_seconds: round(seconds, 1),
    servers: serversUsed,
    restart,
    complete: difference.missing === 0 && difference.extra === 0,
    missing_rows: difference.missing,
    extra_rows: difference.extra,
    measured_at: new Date().toISOString(),
  };
  return { record, server };
}

// ---------------------------------------------------------------------------------------------
// The answers, worked out here from the messages and translations (not the index)

type Expected = { hits: Hit[]; total: number };

/**
 * Every query's newest `depth` hits over the readable messages, newest first: a message is a hit
 * when every term (split on whitespace, lower-cased by toLowerCase(), as the contract says) is
 * in its lower-cased content (matched_in content), or else all of them in its `language`
 * translation (status done). Reads the messages of `placeIds` in id order, 10,000 at a time.
 */
async function bruteForce(
  query: Query,
  placeIds: string[],
  language: Lang,
  queries: QueryDef[],
  depth: number,
): Promise<Map<string, Expected>> {
  // The contract's rule, written here again: split on whitespace, JavaScript's toLowerCase().
  const terms = queries.map((def) => [
    ...new Set(
      def.q
        .toLowerCase()
        .split(/\s+/u)
        .filter((term) => term.length > 0),
    ),
  ]);
  const found = queries.map((): Expected => ({ hits: [], total: 0 }));
  let before: string | null = null;
  const places = `{${placeIds.join(",")}}`;
  for (;;) {
    type Row = { id: string; content: string; translation: string | null };
    const rows: Row[] = await query<Row>(
      `select m.id, m.content, t.content as translation from messages m
        left join message_translations t on t.message_id = m.id and t.language = $2 and t.status = 'done'
      where m.channel_id = any($1::text[]) and m.deleted_at is null ${before === null ? "" : "and m.id < $3"}
      order by m.id desc limit 10000`,
      before === null ? [places, language] : [places, language, before],
    );
    if (rows.length === 0) break;
    for (const row of rows) {
      const content = row.content.toLowerCase();
      const translation = row.translation?.toLowerCase();
      for (let i = 0; i < queries.length; i++) {
        const want = terms[i]!;
        let where: Hit["matched_in"] | undefined;
        if (want.every((term) => content.includes(term))) where = "content";
        else if (translation !== undefined && want.every((term) => translation.includes(term))) where = "translation";
        if (!where) continue;
        const result = found[i]!;
        result.total++;
        if (result.hits.length < depth) result.hits.push({ id: row.id, matched_in: where });
      }
    }
    before = rows.at(-1)!.id;
  }
  return new Map(queries.map((def, i) => [def.name, found[i]!]));
}

/** The places the searcher may read, worked out here: the workspace's public channels and those they are in. */
async function readablePlaceIds(query: Query, workspaceId: string, userId: number): Promise<string[]> {
  const rows = await query<{ id: string }>(
    `select c.id from channels c where c.workspace_id = $1 and (c.visibility = 'public'
      or exists (select 1 from channel_members cm where cm.channel_id = c.id and cm.user_id = $2::integer))`,
    [workspaceId, userId],
  );
  return rows.map((row) => row.id);
}

/** What is wrong with a page (empty: nothing). */
function checkPage(hits: Hit[], want: Hit[]): string | undefined {
  const got = hits.map((hit) => `${hit.id}:${hit.matched_in}`).join(",");
  const expected = want.map((hit) => `${hit.id}:${hit.matched_in}`).join(",");
  if (got === expected) return undefined;
  const missing = want.filter((hit) => !hits.some((other) => other.id === hit.id)).length;
  const extra = hits.filter((hit) => !want.some((other) => other.id === hit.id)).length;
  return `${hits.length} hits, expected ${want.length} (${missing} missing, ${extra} not expected, or another order or matched_in)`;
}

// ---------------------------------------------------------------------------------------------
// Measuring queries

export type QueryRow = {
  query: string;
  q: string;
  kind: QueryKind;
  note: string | null;
  requests: number;
  errors: number;
  /** HTTP statuses other than 200, by status. */
  statuses: Record<string, number>;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
  max_ms: number | null;
  /** Hits on the first page (at most 20) and whether there is a next page. */
  first_page_hits: number | null;
  next_page: boolean | null;
  /** Readable messages that match, worked out here (null: not checked). */
  matching_messages: number | null;
  /** The first page (and for the first query the second) equals the one worked out here. */
  right: boolean | null;
  problem: string | null;
  /** Answers that differed from the first one. */
  differing: number;
  pass: boolean | null;
};

/**
 * Each query `requests` times (round robin, one at a time over keep-alive), after `warmup`
 * unrecorded rounds: latencies, the first answer checked against `expected`.
 */
async function measureQueries(
  baseUrl: string,
  token: string,
  queries: QueryDef[],
  requests: number,
  warmup: number,
  expected: Map<string, Expected> | undefined,
  target: (row: QueryRow) => boolean,
): Promise<QueryRow[]> {
  const latencies = queries.map((): number[] => []);
  const statuses = queries.map((): Record<string, number> => ({}));
  const first: (string | undefined)[] = queries.map(() => undefined);
  const differing = queries.map(() => 0);
  const once = async (i: number, record: boolean) => {
    const def = queries[i]!;
    const started = performance.now();
    let status: string;
    let body = "";
    try {
      const answer = await call("GET", searchUrl(baseUrl, def.q), token);
      status = String(answer.status);
      body = answer.body;
    } catch (error) {
      status = (error as Error).name === "TimeoutError" ? "timeout" : "network error";
    }
    const ms = performance.now() - started;
    if (status !== "200") {
      statuses[i]![status] = (statuses[i]![status] ?? 0) + 1;
      return;
    }
    // The hits only: a message's translation view may change between answers (a pending translation done).
    const ids = (JSON.parse(body) as SearchPage).data.map((hit) => `${hit.id}:${hit.matched_in}`).join(",");
    if (first[i] === undefined) first[i] = body;
    else {
      const firstIds = (JSON.parse(first[i]!) as SearchPage).data.map((hit) => `${hit.id}:${hit.matched_in}`).join(",");
      if (firstIds !== ids) differing[i]!++;
    }
    if (record) latencies[i]!.push(ms);
  };
  for (let round_ = 0; round_ < warmup; round_++) for (let i = 0; i < queries.length; i++) await once(i, false);
  for (let round_ = 0; round_ < requests; round_++) for (let i = 0; i < queries.length; i++) await once(i, true);

  const rows: QueryRow[] = [];
  for (let i = 0; i < queries.length; i++) {
    const def = queries[i]!;
    const sorted = Float64Array.from(latencies[i]!).sort();
    const at = (p: number) => (sorted.length > 0 ? round(percentile(sorted, p), 1) : null);
    const page = first[i] ? (JSON.parse(first[i]!) as SearchPage) : undefined;
    const want = expected?.get(def.name);
    let problem: string | undefined;
    if (want && page) {
      problem = checkPage(
        page.data.map((hit) => ({ id: hit.id, matched_in: hit.matched_in })),
        want.hits.slice(0, 20),
      );
      const shouldContinue = want.total > 20;
      if (!problem && (page.meta.next_cursor !== null) !== shouldContinue) {
        problem = `next_cursor ${page.meta.next_cursor}, expected ${shouldContinue ? "a cursor" : "null"}`;
      }
      // The second page of the first query, through the cursor.
      if (!problem && i === 0 && page.meta.next_cursor) {
        const answer = await call("GET", searchUrl(baseUrl, def.q, page.meta.next_cursor), token);
        const second = answer.status === 200 ? (JSON.parse(answer.body) as SearchPage) : undefined;
        problem = second
          ? checkPage(
              second.data.map((hit) => ({ id: hit.id, matched_in: hit.matched_in })),
              want.hits.slice(20, 40),
            )
          : `second page: HTTP ${answer.status}`;
        if (problem) problem = `second page: ${problem}`;
      }
    }
    const errors = Object.values(statuses[i]!).reduce((sum, count) => sum + count, 0);
    const row: QueryRow = {
      query: def.name,
      q: def.q.length > 40 ? `${[...def.q].slice(0, 12).join("")}… (${[...def.q].length} code points)` : def.q,
      kind: def.kind,
      note: def.note ?? null,
      requests: sorted.length,
      errors,
      statuses: statuses[i]!,
      p50_ms: at(50),
      p95_ms: at(95),
      p99_ms: at(99),
      max_ms: sorted.length > 0 ? round(sorted[sorted.length - 1]!, 1) : null,
      first_page_hits: page ? page.data.length : null,
      next_page: page ? page.meta.next_cursor !== null : null,
      matching_messages: want ? want.total : null,
      right: want && page ? problem === undefined : null,
      problem: problem ?? (page ? null : "no answer"),
      differing: differing[i]!,
      pass: null,
    };
    row.pass = target(row);
    rows.push(row);
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// EXPLAIN of the service's statements

export type ExplainRow = {
  query: string;
  /** "places", "step 1 (window)", "step 2 (index)". */
  statement: string;
  execution_ms: number;
  planning_ms: number;
  shared_hit: number;
  shared_read: number;
  /** The plan as EXPLAIN (ANALYZE, BUFFERS) prints it (kept for the queries over target). */
  plan: string[];
};

const dialect = new PgDialect();
type Statement = { text: string; params: unknown[] };

/** The statements of searchMessages itself: the readable places, step 1 and step 2. */
const SEARCH_STATEMENT = /message_search|channel_members/;

/** Thrown by the capturing database when the search turns to its hits' records (not needed here). */
class Captured extends Error {}

/**
 * The statements searchMessages sends for `q`, caught by running it here against the database
 * (the same code the server runs, with translation on), through a database whose `execute` runs
 * and records each statement and which stops at the first other call (the hits' records).
 */
async function serviceStatements(databaseUrl: string, userId: number, q: string): Promise<Statement[]> {
  const client = postgres(databaseUrl, { max: 1, onnotice: () => {}, connection: { jit: "off" } });
  const caught: Statement[] = [];
  try {
    const db = drizzle(client, { schema, casing: "snake_case" }) as unknown as Database;
    const capturing = new Proxy(db, {
      get(target, property, receiver) {
        if (property === "execute") {
          return (statement: SQL) => {
            const query = dialect.sqlToQuery(statement);
            // The search's own statements run; anything else (the hits' reader language) answers nothing.
            if (!SEARCH_STATEMENT.test(query.sql)) return Promise.resolve([]);
            caught.push({ text: query.sql, params: query.params });
            return target.execute(statement);
          };
        }
        if (property === "select" || property === "transaction" || property === "insert") {
          return () => {
            throw new Captured();
          };
        }
        return Reflect.get(target, property, receiver) as unknown;
      },
    });
    const config = { translation: { provider: "libretranslate", url: "http://127.0.0.1:9", apiKey: undefined } };
    try {
      await searchMessages(
        {
          db: capturing,
          config: config as unknown as Config,
          clock: { now: () => new Date() } as never,
          jobOutbox: undefined as never,
        },
        userId,
        { q },
      );
    } catch (error) {
      if (!(error instanceof Captured)) throw error;
    }
  } finally {
    await client.end({ timeout: 1 });
  }
  // The places, step 1 and (when the window did not fill the page) step 2.
  return caught;
}

async function explainStatements(sql: Sql, label: string, statements: Statement[]): Promise<ExplainRow[]> {
  const rows: ExplainRow[] = [];
  for (const statement of statements) {
    const name = statement.text.includes("keys @>")
      ? "step 2 (index)"
      : statement.text.includes("with w as")
        ? "step 1 (window)"
        : "places";
    const lines = await sql.begin(async (tx) => {
      // The server's connections run with JIT off (db/client.ts).
      await tx`set local jit = off`;
      return tx.unsafe(`explain (analyze, buffers) ${statement.text}`, statement.params as never[]);
    });
    const plan = (lines as unknown as Record<string, string>[]).map((row) => row["QUERY PLAN"]!);
    const number = (pattern: RegExp) => Number(pattern.exec(plan.join("\n"))?.[1] ?? 0);
    const top = plan.find((line) => line.includes("Buffers:")) ?? "";
    rows.push({
      query: label,
      statement: name,
      execution_ms: round(number(/Execution Time: ([\d.]+) ms/), 2),
      planning_ms: round(number(/Planning Time: ([\d.]+) ms/), 2),
      shared_hit: Number(/hit=(\d+)/.exec(top)?.[1] ?? 0),
      shared_read: Number(/read=(\d+)/.exec(top)?.[1] ?? 0),
      plan,
    });
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Part 1-3: PostgreSQL, BENCH_SEARCH_MESSAGES messages

export type DataRow = {
  database: "postgres" | "pglite";
  messages: number;
  translations: number;
  channels: number;
  readable_channels: number;
  loaded_this_run: boolean;
  load_seconds_this_run: number | null;
  load_seconds_total: number;
  /** Backfill record (measured when the index was built, perhaps in an earlier run). */
  backfill: BackfillRecord | null;
  backfill_this_run: boolean;
  index_rows: number;
  database_mib: number | null;
  index_table_mib: number;
  gin_mib: number;
  requested_translations_dropped: number;
};

export type PostgresResult = {
  data: DataRow;
  queries: QueryRow[];
  pathological: QueryRow[];
  explain: ExplainRow[];
  machine: { machine_busy_pct: number; other_cpu_pct: number; busy_before_pct: number };
};

const mib = (bytes: number | string) => round(Number(bytes) / 2 ** 20, 1);

async function benchDatabaseUrl(log: (line: string) => void): Promise<string> {
  const base = process.env.DATABASE_URL!;
  const admin = postgres(base, { max: 1, onnotice: () => {} });
  const url = new URL(base);
  url.pathname = `/${DATABASE_NAME}`;
  try {
    const [exists] = await admin<
      { n: number }[]
    >`select count(*)::integer as n from pg_database where datname = ${DATABASE_NAME}`;
    if (exists!.n > 0 && RELOAD) {
      log(`search: BENCH_SEARCH_RELOAD=1: dropping database ${DATABASE_NAME}`);
      await admin.unsafe(`drop database "${DATABASE_NAME}" with (force)`);
    }
    if (exists!.n === 0 || RELOAD) {
      await admin.unsafe(`create database "${DATABASE_NAME}"`);
      log(`search: created database ${DATABASE_NAME}`);
    }
  } finally {
    await admin.end({ timeout: 1 });
  }
  return url.toString();
}

async function dropDatabase(name: string): Promise<void> {
  const admin = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`drop database if exists "${name}" with (force)`);
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end({ timeout: 1 });
  }
}

async function runPostgres(log: (line: string) => void, translator: FakeTranslator): Promise<PostgresResult> {
  let databaseUrl = await benchDatabaseUrl(log);
  const serverEnv = () => ({
    DATABASE_URL: databaseUrl,
    TRANSLATION_PROVIDER: "libretranslate",
    TRANSLATION_URL: translator.url,
  });
  let sql = postgres(databaseUrl, { max: 1, onnotice: () => {}, idle_timeout: 0 });
  let query = postgresQuery(sql);
  let server: BenchServer | undefined;
  try {
    // ---- the data set
    // The tables exist once a server has migrated the database.
    server = await startBenchServer("search-load", { env: serverEnv() });
    let state = await readState(query);
    if (state && !isDeepStrictEqual(state.params, paramsFor(MESSAGES))) {
      log(`search: the data set there was made with other knobs (${JSON.stringify(state.params)}): loading anew`);
      await server.stop();
      server = undefined;
      await sql.end({ timeout: 1 });
      await dropDatabase(DATABASE_NAME);
      sql = postgres(databaseUrl, { max: 1, onnotice: () => {}, idle_timeout: 0 });
      query = postgresQuery(sql);
      server = await startBenchServer("search-load", { env: serverEnv() });
      state = await readState(query);
    }
    if (!state) {
      const people = await registerPeople(server.url, log);
      state = await createChannels(query, people, MESSAGES);
    }
    let loadedThisRun = false;
    let loadSeconds: number | null = null;
    if (state.stage === "loading" || state.stage === "analyzing") {
      log(`search: loading ${MESSAGES} messages over ${CHANNELS} channels`);
      const loaded = await loadMessages(query, state, "postgres", log);
      state = loaded.state;
      loadedThisRun = true;
      loadSeconds = round(loaded.seconds, 1);
      log(`search: loaded in ${loadSeconds} s`);
      await resetIndex(query);
    } else {
      log(
        `search: the data set is there (loaded ${new Date(state.loaded_at ?? 0).toISOString()} in ` +
          `${round(state.load_seconds, 1)} s); BENCH_SEARCH_RELOAD=1 loads it again`,
      );
      if (REINDEX && state.stage === "done") {
        log("search: BENCH_SEARCH_REINDEX=1: the index is emptied and built again by the backfill");
        await resetIndex(query);
        await query(`update bench_search_state set stage = 'indexing', backfill = null`);
        state = (await readState(query))!;
      }
    }
    const dropped = await dropRequestedTranslations(query, state);
    if (dropped > 0) log(`search: dropped ${dropped} translations the searches of earlier runs asked for`);

    // ---- the index, by the backfill
    let backfillThisRun = false;
    if (state.stage === "indexing") {
      // The backfill starts when a server starts leading: this one's found nothing to do.
      await server.stop();
      server = undefined;
      log("search: building the index with the product's backfill (servers of their own)");
      const built = await runBackfill(
        query,
        state,
        {
          start: () => startBenchServer("search-backfill", { env: serverEnv() }),
        },
        log,
      );
      server = built.server;
      await query(`update bench_search_state set stage = 'done', backfill = $1::jsonb`, [JSON.stringify(built.record)]);
      state = (await readState(query))!;
      backfillThisRun = true;
      const b = built.record;
      log(
        `search: index built in ${b.seconds} s by ${b.built_by}: ${b.rows} rows (${b.rows_per_s} rows/s, ` +
          `${b.messages_per_s} messages/s)` +
          (b.restart ? `, restarted at ${b.restart.at_pct}% (${b.restart.resumed ? "resumed" : "NOT resumed"})` : "") +
          `; ${b.complete ? "complete" : `INCOMPLETE: ${b.missing_rows} missing, ${b.extra_rows} extra`}`,
      );
    }

    const [sizes] = await query<{
      database: string;
      heap: string;
      gin: string;
      rows: number;
      messages: number;
      translations: number;
    }>(
      `select pg_database_size(current_database())::bigint as database,
        pg_total_relation_size('message_search')::bigint - pg_indexes_size('message_search')::bigint as heap,
        pg_relation_size('message_search_keys_idx')::bigint as gin,
        (select count(*) from message_search)::integer as rows,
        (select count(*) from messages where workspace_id = $1)::integer as messages,
        (select count(*) from message_translations where status = 'done')::integer as translations`,
      [state.workspace_id],
    );
    const places = await readablePlaceIds(query, state.workspace_id, state.searcher_id);
    log(
      `search: database ${mib(sizes!.database)} MiB, message_search ${mib(sizes!.heap)} MiB + GIN ` +
        `${mib(sizes!.gin)} MiB, ${sizes!.rows} index rows; the searcher reads ${places.length} channels`,
    );

    // ---- the answers, worked out here
    log("search: working out every query's answer from the messages (not the index)");
    const t0 = performance.now();
    const allQueries = [...STANDARD_QUERIES, ...PATHOLOGICAL_QUERIES];
    const expected = await bruteForce(query, places, "en", allQueries, 40);
    log(`search: worked out in ${round((performance.now() - t0) / 1000, 1)} s`);

    // ---- the queries
    const token = await signIn(server.url, state.searcher_email);
    const busyBefore = await waitForQuietMachine(QUIET_WAIT_SECONDS);
    log(
      `search: ${REQUESTS} requests of each of ${STANDARD_QUERIES.length} queries, round robin, one at a time ` +
        `(machine ${Math.round(busyBefore)}% busy before)`,
    );
    const usage = startUsageWindow(server.pid);
    const queries = await measureQueries(
      server.url,
      token,
      STANDARD_QUERIES,
      REQUESTS,
      WARMUP,
      expected,
      (row) => row.p95_ms !== null && row.errors === 0 && row.right !== false && row.p95_ms < TARGET_P95_MS,
    );
    const window = usage.finish();
    for (const row of queries) {
      log(
        `search: ${row.query} (${row.q}): p50 ${row.p50_ms} ms, p95 ${row.p95_ms} ms, p99 ${row.p99_ms} ms; ` +
          `${row.first_page_hits} hits on the first page of ${row.matching_messages}; ` +
          `${row.right ? "right" : `WRONG: ${row.problem}`}`,
      );
    }
    log(`search: ${PATHOLOGICAL_RUNS} runs of each of ${PATHOLOGICAL_QUERIES.length} pathological queries`);
    const pathological = await measureQueries(
      server.url,
      token,
      PATHOLOGICAL_QUERIES,
      PATHOLOGICAL_RUNS,
      0,
      expected,
      (row) => row.max_ms !== null && row.errors === 0 && row.right !== false && row.max_ms < TARGET_PATHOLOGICAL_MS,
    );
    for (const row of pathological) {
      log(
        `search: ${row.query}: max ${row.max_ms} ms, ${row.first_page_hits} hits, ` +
          `${Object.keys(row.statuses).length > 0 ? JSON.stringify(row.statuses) : "all 200"}; ` +
          `${row.right ? "right" : `WRONG: ${row.problem}`}`,
      );
    }

    // ---- EXPLAIN
    log("search: EXPLAIN (ANALYZE, BUFFERS) of the service's statements");
    const explain: ExplainRow[] = [];
    for (const def of allQueries) {
      const statements = await serviceStatements(databaseUrl, state.searcher_id, def.q);
      explain.push(...(await explainStatements(sql, def.name, statements)));
    }
    const overTarget = new Set([
      ...queries.filter((row) => row.pass === false).map((row) => row.query),
      ...pathological.filter((row) => row.pass === false).map((row) => row.query),
    ]);
    // Plans are kept for the queries over target and for any statement of 100 ms or more.
    for (const row of explain) if (!overTarget.has(row.query) && row.execution_ms < SLOW_STATEMENT_MS) row.plan = [];

    return {
      data: {
        database: "postgres",
        messages: sizes!.messages,
        translations: sizes!.translations,
        channels: CHANNELS,
        readable_channels: places.length,
        loaded_this_run: loadedThisRun,
        load_seconds_this_run: loadSeconds,
        load_seconds_total: round(state.load_seconds, 1),
        backfill: state.backfill,
        backfill_this_run: backfillThisRun,
        index_rows: sizes!.rows,
        database_mib: mib(sizes!.database),
        index_table_mib: mib(sizes!.heap),
        gin_mib: mib(sizes!.gin),
        requested_translations_dropped: dropped,
      },
      queries,
      pathological,
      explain,
      machine: {
        machine_busy_pct: round(window.machineBusyPct, 1),
        other_cpu_pct: round(window.otherCpuPct, 1),
        busy_before_pct: round(busyBefore, 1),
      },
    };
  } finally {
    await sql.end({ timeout: 5 });
    await server?.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Part 4: freshness under fan-out load

export type FreshnessResult = {
  rate_per_s: number;
  receivers: number;
  seconds: number;
  posted: number;
  accepted: number;
  skipped: number;
  post_errors: number;
  accepted_per_s: number;
  /** Accepted of the posts that fell due (the rest skipped, 64 in flight, or failed). */
  accepted_pct: number;
  delivered_pct: number;
  delivered_ok: boolean;
  delivery_p50_ms: number;
  delivery_p99_ms: number;
  duplicates: number;
  probes: number;
  probes_found: number;
  probes_not_found: number;
  probe_post_errors: number;
  found_p50_ms: number | null;
  found_p95_ms: number | null;
  found_p99_ms: number | null;
  found_max_ms: number | null;
  searches: number;
  searches_per_s: number;
  search_p50_ms: number | null;
  search_p95_ms: number | null;
  search_errors: number;
  server_cpu_pct: number;
  machine_busy_pct: number;
  pass: boolean | null;
};

async function freshDatabase(log: (line: string) => void): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `bench_search_fresh_${randomBytes(4).toString("hex")}`;
  const admin = () => postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} });
  const sql = admin();
  try {
    await sql.unsafe(`create database "${name}"`);
  } finally {
    await sql.end({ timeout: 1 });
  }
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const sql = admin();
      try {
        await sql.unsafe(`drop database if exists "${name}" with (force)`);
      } catch (error) {
        log(`search: could not drop database ${name}: ${(error as Error).message}`);
      } finally {
        await sql.end({ timeout: 1 });
      }
    },
  };
}

async function runFreshness(log: (line: string) => void): Promise<FreshnessResult> {
  const database = await freshDatabase(log);
  let server: BenchServer | undefined;
  let receivers: Receiver[] = [];
  try {
    server = await startBenchServer("search-freshness", {
      env: { DATABASE_URL: database.url, TRANSLATION_PROVIDER: "none" },
    });
    const url = server.url;
    const team = await setupTeam(url, 20, 4);
    const invite = await api<{ data: { token: string } }>(
      url,
      "POST",
      `/api/v1/workspaces/${team.workspaceId}/invites`,
      team.owner.token,
      {},
    );
    const prober = await register(url, "prober", "en");
    const searcher = await register(url, "fresh-searcher", "en");
    for (const person of [prober, searcher]) {
      await api(url, "POST", `/api/v1/invites/${invite.data.token}/accept`, person.token);
    }
    receivers = await openReceivers(server, team, FANOUT_RECEIVERS);
    const side = serviceSide(server, team, receivers);
    const probeRoute = new URL(`${url}/api/v1/workspaces/${team.workspaceId}/channels/${team.channelId}/messages`);

    const window = async (seconds: number, probing: boolean) => {
      const maxMessages = Math.ceil(FANOUT_RATE * seconds) + 1;
      const collector = new Collector(`s${Date.now().toString(36)}`, receivers.length, maxMessages);
      receivers.forEach((receiver, index) => {
        receiver.sink.collector = collector;
        receiver.sink.index = index;
      });
      const stats: SendStats = { attempted: 0, accepted: 0, errors: new Map(), skipped: 0, postLatencies: [] };
      const post = async (seq: number) => {
        stats.attempted++;
        const sentAt = performance.now();
        const content = `${MARKER}${collector.runTag}:${seq}:${sentAt.toFixed(3)}:${PADDING}`;
        await recordPost(stats, collector, seq, sentAt, async () => {
          const { status } = await postJson(side.route, side.token(seq), JSON.stringify({ content }));
          return status === 201 ? "ok" : `HTTP ${status}`;
        });
      };
      // Probes: a unique token each, found by polling the search for it.
      const found: number[] = [];
      const searchLatencies: number[] = [];
      let probes = 0;
      let notFound = 0;
      let probeErrors = 0;
      let searchErrors = 0;
      const probeTasks: Promise<void>[] = [];
      const probe = async (seq: number) => {
        const token = `qz${collector.runTag.slice(-5)}k${seq}x`;
        let answer: { status: number; body?: string };
        try {
          answer = await postJson(probeRoute, prober.token, JSON.stringify({ content: `probe ${token} ${PADDING}` }), {
            readBody: true,
          });
        } catch {
          probeErrors++;
          return;
        }
        if (answer.status !== 201) {
          probeErrors++;
          return;
        }
        const answeredAt = performance.now();
        const id = (JSON.parse(answer.body!) as { data: { id: string } }).data.id;
        for (;;) {
          const started = performance.now();
          try {
            const result = await call("GET", searchUrl(url, token), searcher.token);
            searchLatencies.push(performance.now() - started);
            if (result.status !== 200) searchErrors++;
            else if ((JSON.parse(result.body) as SearchPage).data.some((hit) => hit.id === id)) {
              found.push(performance.now() - answeredAt);
              return;
            }
          } catch {
            searchErrors++;
          }
          if (performance.now() - answeredAt > PROBE_GIVE_UP_MS) {
            notFound++;
            return;
          }
          await sleep(Math.max(0, POLL_EVERY_MS - (performance.now() - started)));
        }
      };
      const usage = startUsageWindow(server!.pid);
      let probing_ = probing;
      const prober_ = (async () => {
        await sleep(1000);
        let seq = 0;
        const start = performance.now();
        while (probing_) {
          probes++;
          probeTasks.push(probe(seq++));
          const next = start + seq * PROBE_EVERY_MS;
          await sleep(Math.max(0, next - performance.now()));
        }
      })();
      const sendSeconds = await postAtRate(post, {
        rate: FANOUT_RATE,
        seconds,
        maxMessages,
        maxInFlight: 64,
        onSkip: () => stats.skipped++,
      });
      probing_ = false;
      await prober_;
      const expectedDeliveries = stats.accepted * receivers.length;
      const drainEnd = performance.now() + 15_000;
      while (collector.deliveries < expectedDeliveries && performance.now() < drainEnd) await sleep(20);
      await Promise.all(probeTasks);
      const usageWindow = usage.finish();
      for (const receiver of receivers) receiver.sink.collector = undefined;
      const delivered = collector.deliveredOfAccepted();
      const deliveryLatencies = collector.latencies.slice(0, collector.deliveries).sort();
      const sortedFound = Float64Array.from(found).sort();
      const sortedSearch = Float64Array.from(searchLatencies).sort();
      const at = (values: Float64Array, p: number) => (values.length > 0 ? round(percentile(values, p), 1) : null);
      const deliveredPct = expectedDeliveries === 0 ? 0 : round((delivered / expectedDeliveries) * 100, 2);
      const foundP99 = at(sortedFound, 99);
      return {
        rate_per_s: FANOUT_RATE,
        receivers: receivers.length,
        seconds: round(sendSeconds, 1),
        posted: stats.attempted,
        accepted: stats.accepted,
        skipped: stats.skipped,
        post_errors: [...stats.errors.values()].reduce((sum, count) => sum + count, 0),
        accepted_per_s: round(stats.accepted / sendSeconds, 1),
        accepted_pct: round((stats.accepted / Math.max(1, stats.attempted + stats.skipped)) * 100, 1),
        delivered_pct: deliveredPct,
        delivered_ok: deliveredPct >= PASS_DELIVERED_PCT && collector.duplicates === 0,
        delivery_p50_ms: round(percentile(deliveryLatencies, 50), 1),
        delivery_p99_ms: round(percentile(deliveryLatencies, 99), 1),
        duplicates: collector.duplicates,
        probes,
        probes_found: found.length,
        probes_not_found: notFound,
        probe_post_errors: probeErrors,
        found_p50_ms: at(sortedFound, 50),
        found_p95_ms: at(sortedFound, 95),
        found_p99_ms: foundP99,
        found_max_ms: sortedFound.length > 0 ? round(sortedFound[sortedFound.length - 1]!, 1) : null,
        searches: searchLatencies.length + searchErrors,
        searches_per_s: round((searchLatencies.length + searchErrors) / usageWindow.seconds, 1),
        search_p50_ms: at(sortedSearch, 50),
        search_p95_ms: at(sortedSearch, 95),
        search_errors: searchErrors,
        server_cpu_pct: Math.round(usageWindow.serverCpuPct),
        machine_busy_pct: Math.round(usageWindow.machineBusyPct),
        pass:
          probes === 0
            ? null
            : notFound === 0 && probeErrors === 0 && foundP99 !== null && foundP99 < TARGET_FRESH_P99_MS,
      } satisfies FreshnessResult;
    };
    log(`search: freshness: a 3 s warm-up at ${FANOUT_RATE} messages/s to ${receivers.length} receivers`);
    await window(3, false);
    await sleep(1000);
    log(
      `search: freshness: ${FANOUT_RATE} messages/s to ${receivers.length} receivers for ${FANOUT_SECONDS} s, a probe ` +
        `every ${PROBE_EVERY_MS} ms polled every ${POLL_EVERY_MS} ms`,
    );
    const result = await window(FANOUT_SECONDS, true);
    log(
      `search: freshness: ${result.accepted_per_s} messages/s accepted, ${result.delivered_pct}% delivered; ` +
        `${result.probes_found}/${result.probes} probes found, p50 ${result.found_p50_ms} ms, p99 ${result.found_p99_ms} ms, ` +
        `max ${result.found_max_ms} ms; ${result.searches} searches (${result.searches_per_s}/s)`,
    );
    return result;
  } finally {
    for (const receiver of receivers) receiver.close();
    await sleep(200);
    await server?.stop();
    await database.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// Part 5: PGlite

export type PgliteResult = { data: DataRow; queries: QueryRow[] };

async function openPglite(): Promise<{ query: Query; db: Database; close(): Promise<void> }> {
  const handle = await openDatabase({ databaseUrl: undefined, dataDir: PGLITE_DIR });
  const session = await handle.session();
  return {
    query: async <Row>(text: string, params: unknown[] = []) => session.query<Row>(text, params),
    db: handle.db,
    close: () => handle.close(),
  };
}

async function runPglite(log: (line: string) => void, translator: FakeTranslator): Promise<PgliteResult> {
  const env = {
    DATABASE_URL: "",
    REDIS_URL: "",
    DATA_DIR: PGLITE_DIR,
    TRANSLATION_PROVIDER: "libretranslate",
    TRANSLATION_URL: translator.url,
  };
  if (RELOAD) await rm(PGLITE_DIR, { recursive: true, force: true });
  let pglite = await openPglite();
  let server: BenchServer | undefined;
  try {
    let state = await readState(pglite.query);
    if (state && !isDeepStrictEqual(state.params, paramsFor(PGLITE_MESSAGES))) {
      log(`search: pglite: the data set there was made with other knobs: loading anew`);
      await pglite.close();
      await rm(PGLITE_DIR, { recursive: true, force: true });
      pglite = await openPglite();
      state = await readState(pglite.query);
    }
    if (!state) {
      await pglite.close();
      server = await startBenchServer("search-pglite-setup", { env });
      const people = await registerPeople(server.url, log);
      await server.stop();
      server = undefined;
      pglite = await openPglite();
      await readState(pglite.query);
      state = await createChannels(pglite.query, people, PGLITE_MESSAGES);
    }
    let loadedThisRun = false;
    let loadSeconds: number | null = null;
    if (state.stage === "loading" || state.stage === "analyzing") {
      log(`search: pglite: loading ${PGLITE_MESSAGES} messages into ${PGLITE_DIR}`);
      const loaded = await loadMessages(pglite.query, state, "pglite", log);
      state = loaded.state;
      loadedThisRun = true;
      loadSeconds = round(loaded.seconds, 1);
      await resetIndex(pglite.query);
    } else if (REINDEX && state.stage === "done") {
      await resetIndex(pglite.query);
      await pglite.query(`update bench_search_state set stage = 'indexing', backfill = null`);
      state = (await readState(pglite.query))!;
    }
    const dropped = await dropRequestedTranslations(pglite.query, state);
    let backfillThisRun = false;
    if (state.stage === "indexing") {
      // The product's backfill step, called here in a loop (no pause between steps): the server
      // would run the same steps, but a PGlite database serves one process only.
      log("search: pglite: building the index with backfillSearchStep in a loop");
      const t0 = performance.now();
      let steps = 0;
      let lastLog = t0;
      while ((await backfillSearchStep(pglite.db)) === "more") {
        steps++;
        if (performance.now() - lastLog > 15_000) {
          lastLog = performance.now();
          log(`search: pglite: backfill ${steps} steps in ${round((lastLog - t0) / 1000, 0)} s`);
        }
      }
      const seconds = (performance.now() - t0) / 1000;
      await pglite.query(`vacuum (analyze) message_search`);
      const expected = await expectedIndexRows(pglite.query);
      const difference = await indexDifference(pglite.query);
      const [rows] = await pglite.query<{ n: number }>(`select count(*)::integer as n from message_search`);
      const record: BackfillRecord = {
        built_by: "backfill",
        seconds: round(seconds, 1),
        messages: expected.messages,
        rows: rows!.n,
        rows_per_s: Math.round(rows!.n / seconds),
        messages_per_s: Math.round(expected.messages / seconds),
        backfill_rows: rows!.n,
        backfill_seconds: round(seconds, 1),
        servers: 0,
        restart: null,
        complete: difference.missing === 0 && difference.extra === 0,
        missing_rows: difference.missing,
        extra_rows: difference.extra,
        measured_at: new Date().toISOString(),
      };
      await pglite.query(`update bench_search_state set stage = 'done', backfill = $1::jsonb`, [
        JSON.stringify(record),
      ]);
      state = (await readState(pglite.query))!;
      backfillThisRun = true;
      log(
        `search: pglite: index built in ${record.seconds} s: ${record.rows} rows (${record.rows_per_s} rows/s, ` +
          `${record.messages_per_s} messages/s); ${record.complete ? "complete" : "INCOMPLETE"}`,
      );
    }
    const [sizes] = await pglite.query<{
      heap: string;
      gin: string;
      rows: number;
      messages: number;
      translations: number;
    }>(
      `select pg_total_relation_size('message_search')::bigint - pg_indexes_size('message_search')::bigint as heap,
        pg_relation_size('message_search_keys_idx')::bigint as gin,
        (select count(*) from message_search)::integer as rows,
        (select count(*) from messages where workspace_id = $1)::integer as messages,
        (select count(*) from message_translations where status = 'done')::integer as translations`,
      [state.workspace_id],
    );
    const places = await readablePlaceIds(pglite.query, state.workspace_id, state.searcher_id);
    const expected = await bruteForce(pglite.query, places, "en", STANDARD_QUERIES, 40);
    await pglite.close();

    server = await startBenchServer("search-pglite", { env });
    const token = await signIn(server.url, state.searcher_email);
    log(`search: pglite: ${REQUESTS} requests of each of ${STANDARD_QUERIES.length} queries`);
    const queries = await measureQueries(
      server.url,
      token,
      STANDARD_QUERIES,
      REQUESTS,
      WARMUP,
      expected,
      (row) => row.p95_ms !== null && row.errors === 0 && row.right !== false && row.p95_ms < TARGET_P95_MS,
    );
    for (const row of queries) {
      log(
        `search: pglite: ${row.query}: p50 ${row.p50_ms} ms, p95 ${row.p95_ms} ms; ${row.first_page_hits} hits; ` +
          `${row.right ? "right" : `WRONG: ${row.problem}`}`,
      );
    }
    return {
      data: {
        database: "pglite",
        messages: sizes!.messages,
        translations: sizes!.translations,
        channels: CHANNELS,
        readable_channels: places.length,
        loaded_this_run: loadedThisRun,
        load_seconds_this_run: loadSeconds,
        load_seconds_total: round(state.load_seconds, 1),
        backfill: state.backfill,
        backfill_this_run: backfillThisRun,
        index_rows: sizes!.rows,
        database_mib: null,
        index_table_mib: mib(sizes!.heap),
        gin_mib: mib(sizes!.gin),
        requested_translations_dropped: dropped,
      },
      queries,
    };
  } finally {
    if (server) await server.stop();
    else await pglite.close().catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------------
// The section

export type SearchResult = {
  settings: {
    messages: number;
    channels: number;
    member_channels: number;
    requests: number;
    pathological_runs: number;
    fanout_rate: number;
    fanout_seconds: number;
    fanout_receivers: number;
    probe_every_ms: number;
    poll_every_ms: number;
    pglite_messages: number;
  };
  postgres: PostgresResult | null;
  freshness: FreshnessResult | null;
  pglite: PgliteResult | null;
  skipped: string[];
};

export async function runSearch(log: (line: string) => void): Promise<SearchResult> {
  const result: SearchResult = {
    settings: {
      messages: MESSAGES,
      channels: CHANNELS,
      member_channels: MEMBER_CHANNELS,
      requests: REQUESTS,
      pathological_runs: PATHOLOGICAL_RUNS,
      fanout_rate: FANOUT_RATE,
      fanout_seconds: FANOUT_SECONDS,
      fanout_receivers: FANOUT_RECEIVERS,
      probe_every_ms: PROBE_EVERY_MS,
      poll_every_ms: POLL_EVERY_MS,
      pglite_messages: PGLITE_MESSAGES,
    },
    postgres: null,
    freshness: null,
    pglite: null,
    skipped: [],
  };
  if (!process.env.DATABASE_URL) {
    log(
      "search: skipped, it needs PostgreSQL: set DATABASE_URL (a database bench_search is created next to it), e.g. " +
        "DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379 npm run bench -- search",
    );
    result.skipped.push("all: no DATABASE_URL");
    return result;
  }
  const translator = await startFakeLibreTranslate();
  try {
    if (PARTS.has("postgres")) result.postgres = await runPostgres(log, translator);
    if (PARTS.has("freshness")) {
      if (process.env.REDIS_URL) result.freshness = await runFreshness(log);
      else {
        log("search: freshness skipped: it needs REDIS_URL too");
        result.skipped.push("freshness: no REDIS_URL");
      }
    }
    if (PARTS.has("pglite")) result.pglite = await runPglite(log, translator);
  } finally {
    await translator.stop();
  }
  return result;
}
