// Issue 11, item 6 c: Redis stops for 10 s under load and comes back on the same port. Two server
// processes (A runs the BullMQ workers, B has WORKERS=off) use a private redis-server started
// here. Clients post continuously over REST to both, subscribe over the typed tRPC client on
// WebSocket on both, and ask for sign-in codes and password-reset mails (a fake SMTP server).
//
// Two outages, each with its own users, channels and subscribers:
//  - "kill": redis-server is killed (SIGKILL) and started again empty (it keeps nothing on disk);
//  - "hang": redis-server is frozen (SIGSTOP) and thawed (SIGCONT): connections stay open and
//    nothing is answered, the case only bounded waits get through.
// Expected each time: every post answered 201 within 3 s, nothing lost or duplicated in
// history, every subscriber's events exactly once in strictly increasing positions with no gap
// against the store, and every mail whose request was accepted (200) delivered exactly once
// (the verification mails of the users registered before the outage too, and the mails that
// were still queued, waiting for a retry because SMTP refused them, when Redis stopped).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeSmtp, type FakeSmtp } from "../helpers/smtp.ts";
import {
  buildRoom,
  call,
  checkRun,
  closeAllClients,
  createDatabase,
  deploymentEnv,
  describeSubscribers,
  failureDigest,
  checkMails,
  register,
  requestMail,
  runTag,
  sleep,
  startPosters,
  startPrivateRedis,
  startServer,
  stopAll,
  subscriber,
  summaryLine,
  waitCaughtUp,
  waitStarted,
  type MailRequest,
  type PostRecord,
  type PrivateRedis,
  type ServerProc,
  type Target,
  type TestDatabase,
  expectNothingLost,
} from "./support.ts";

const OUTAGE_MS = 10_000;
const POST_DEADLINE_MS = 3_000;
const MAIL_REQUEST_DEADLINE_MS = 5_000;

let db: TestDatabase;
let redis: PrivateRedis;
let smtp: FakeSmtp;
let serverA: ServerProc;
let serverB: ServerProc;

beforeAll(async () => {
  db = await createDatabase();
  redis = await startPrivateRedis();
  smtp = await startFakeSmtp();
  const env = deploymentEnv({ databaseUrl: db.url, redisUrl: redis.url, smtpUrl: smtp.url });
  serverA = await startServer("outage-a", { ...env, WORKERS: "on" });
  serverB = await startServer("outage-b", { ...env, WORKERS: "off" });
}, 90_000);

afterAll(async () => {
  closeAllClients();
  redis?.resume();
  await smtp?.stop();
  await stopAll();
}, 60_000);

async function outage(mode: "kill" | "hang") {
  const tag = runTag(`outage-${mode}`);
  const targets: Target[] = [
    { name: "A", url: serverA.url },
    { name: "B", url: serverB.url },
  ];
  const owner = await register(serverA.url, `${tag}-owner`);
  const posterUsers = await Promise.all(
    [0, 1, 2, 3].map((index) => register(targets[index % 2]!.url, `${tag}-poster${index}`)),
  );
  const subUsers = await Promise.all(
    [0, 1, 2, 3, 4, 5].map((index) => register(targets[index % 2]!.url, `${tag}-sub${index}`)),
  );
  const resetUsers = await Promise.all(
    [0, 1, 2, 3, 4, 5, 6, 7].map((index) => register(targets[index % 2]!.url, `${tag}-reset${index}`)),
  );
  const room = await buildRoom(serverA.url, owner, [...posterUsers, ...subUsers], 1);

  // Subscribers on A and on B, on both channels.
  const subs = subUsers.map((user, index) =>
    subscriber(`sub${index}@${targets[index % 2]!.name}`, user, room, room.channelIds[Math.floor(index / 2) % 2]!),
  );
  subs.forEach((sub, index) => sub.open(targets[index % 2]!));
  await waitStarted(subs);

  const load = startPosters({
    tag,
    room,
    posters: posterUsers.map((user, index) => ({ user, channelId: room.channelIds[index % 2]!, preferred: index % 2 })),
    targets: () => targets,
    pauseMs: 60,
  });

  // Mail requests: every 300 ms, a sign-in code for a new address or a reset for the next user.
  const mailRequests: Promise<MailRequest>[] = [];
  let resetIndex = 0;
  let mailTick = 0;
  const mailTimer = setInterval(() => {
    const target = targets[mailTick % 2]!;
    const wantReset = mailTick++ % 3 === 2 && resetIndex < resetUsers.length;
    mailRequests.push(
      wantReset
        ? requestMail(target, "reset", resetUsers[resetIndex++]!.email)
        : requestMail(target, "otp", `${tag}-otp${mailTick}@example.test`),
    );
  }, 300);

  await sleep(1_000);
  // Mail still queued when Redis stops: SMTP refuses for 2.5 s before, so the jobs of those
  // requests wait for their retry in the queue as Redis goes away. SMTP is back once it has.
  await smtp.stop();
  const smtpStoppedAt = Date.now();
  await sleep(2_500);
  const stoppedAt = Date.now();
  if (mode === "kill") await redis.kill();
  else redis.pause();
  await smtp.start();
  await sleep(OUTAGE_MS);
  if (mode === "kill") await redis.start();
  else redis.resume();
  const restartedAt = Date.now();
  await sleep(5_000);
  clearInterval(mailTimer);
  await load.stop();
  const requests = await Promise.all(mailRequests);

  // Live delivery afterwards: one more message per channel, timed to every subscriber of it.
  const markers: PostRecord[] = [];
  for (const [index, channelId] of room.channelIds.entries()) {
    const content = `${tag}-marker${index}`;
    const startedAt = Date.now();
    const reply = await call(
      serverB.url,
      "POST",
      `/api/v1/workspaces/${room.workspaceId}/channels/${channelId}/messages`,
      {
        body: { content },
        token: posterUsers[index]!.token,
      },
    );
    markers.push({ content, channelId, server: "B", status: reply.status, ms: reply.ms, startedAt, body: reply.body });
  }
  const markerLatencies: number[] = [];
  const markerDeadline = Date.now() + 15_000;
  for (const sub of subs) {
    const marker = markers.find((post) => post.channelId === sub.channelId)!;
    while (Date.now() < markerDeadline && !sub.deliveries.some((delivery) => delivery.content === marker.content))
      await sleep(20);
    const got = sub.deliveries.find((delivery) => delivery.content === marker.content);
    markerLatencies.push(got ? got.at - marker.startedAt : -1);
  }

  const catchUpMs = await waitCaughtUp(db, subs, 30_000);
  const posts = [...load.records, ...markers];
  const report = await checkRun({ db, historyUrl: serverB.url, reader: owner, room, posts, subscribers: subs });
  const mails = await checkMails(smtp, requests, [owner, ...posterUsers, ...subUsers, ...resetUsers], 30_000);

  const during = load.records.filter((post) => post.startedAt >= stoppedAt && post.startedAt < restartedAt);
  const slow = posts.filter((post) => post.ms >= POST_DEADLINE_MS);
  const slowMail = requests.filter((request) => request.ms >= MAIL_REQUEST_DEADLINE_MS);
  console.log(
    [
      summaryLine(`redis-outage/${mode}`, report, {
        posts_during_outage: during.length,
        acked_during_outage: during.filter((post) => post.status === 201).length,
        max_post_ms_during_outage: Math.round(Math.max(0, ...during.map((post) => post.ms))),
        posts_over_3s: slow.length,
        marker_delivery_ms: markerLatencies.join("/"),
        catch_up_ms: catchUpMs,
        mail_queued_at_stop: requests.filter(
          (request) => request.status === 200 && request.startedAt >= smtpStoppedAt && request.startedAt < stoppedAt,
        ).length,
        mail_requested: mails.requested,
        mail_accepted: mails.accepted,
        mail_5xx: mails.fivexx,
        mail_other: mails.other,
        mail_request_max_ms: Math.round(Math.max(0, ...requests.map((request) => request.ms))),
        mail_missing: mails.missing.length,
        mail_duplicated: mails.duplicated.length,
      }),
      "failed posts:",
      failureDigest(posts),
      "failed mail requests:",
      failureDigest(requests),
      "subscribers:",
      describeSubscribers(report),
      ...(mails.missing.length ? [`mail missing: ${mails.missing.slice(0, 10).join("; ")}`] : []),
      ...(mails.duplicated.length ? [`mail duplicated: ${mails.duplicated.slice(0, 10).join("; ")}`] : []),
    ].join("\n"),
  );

  expect(report.tried, "posts tried (sanity: the load ran)").toBeGreaterThan(20);
  expect.soft(report.fivexx, `posts answered 5xx:\n${failureDigest(posts)}`).toBe(0);
  expect.soft(report.noAnswer, `posts with no answer within 10 s:\n${failureDigest(posts)}`).toBe(0);
  expect.soft(report.acked, "every post answered 201").toBe(report.tried);
  expect
    .soft(
      slow.map((post) => `${post.content} ${post.status} ${Math.round(post.ms)} ms @${post.server}`),
      `posts answered in ${POST_DEADLINE_MS} ms or more`,
    )
    .toEqual([]);
  expectNothingLost(report);
  expect
    .soft(
      markerLatencies.filter((ms) => ms < 0 || ms > 5_000),
      "live delivery after Redis is back (ms, -1 = never)",
    )
    .toEqual([]);
  // A mail request may be refused for a while (503) but never fail (500) nor hang.
  expect
    .soft(
      requests
        .filter((request) => request.status === 500 || request.status === 0)
        .map(
          (request) =>
            `${request.kind} ${request.email} ${request.status} ${request.error ?? JSON.stringify(request.body)}`,
        ),
      "mail requests answered 500 or not at all",
    )
    .toEqual([]);
  expect
    .soft(
      slowMail.map((request) => `${request.kind} ${request.status} ${Math.round(request.ms)} ms`),
      `mail requests answered in ${MAIL_REQUEST_DEADLINE_MS} ms or more`,
    )
    .toEqual([]);
  expect.soft(mails.missing, "accepted mails never delivered").toEqual([]);
  expect.soft(mails.duplicated, "mails delivered more than once").toEqual([]);
  expect.soft(serverA.proc().alive() && serverB.proc().alive(), "both servers still running").toBe(true);
}

describe("Redis stops for 10 s under load and comes back on the same port", () => {
  it("killed and started again empty: posts keep succeeding, nothing lost or repeated, mail delivered once", async () => {
    await outage("kill");
  }, 110_000);

  it("frozen (SIGSTOP) and thawed: the same", async () => {
    await outage("hang");
  }, 110_000);
});
