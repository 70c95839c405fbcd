// Issue 11, item 6 d: two server processes (WORKERS=off) and one `npm run worker` process share
// PostgreSQL and Redis. Clients post to both and subscribe on both; then the server holding the
// relay's lock (A, started first) is killed with SIGKILL, right after it acknowledged a burst of
// mail requests. The survivors keep serving:
//  - every acknowledged message is in history exactly once;
//  - subscribers on B, and A's subscribers that subscribe again on B from their last position,
//    get every event of their channel exactly once, in position order, with no gap;
//  - another process takes the relay over;
//  - every mail acknowledged before (and after) the kill is delivered exactly once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeSmtp, type FakeSmtp } from "../helpers/smtp.ts";
import {
  buildRoom,
  checkMails,
  checkRun,
  closeAllClients,
  createDatabase,
  deploymentEnv,
  describeSubscribers,
  failureDigest,
  isConnected,
  register,
  relayLockHolder,
  requestMail,
  runTag,
  sleep,
  startPosters,
  startPrivateRedis,
  startServer,
  startWorker,
  stopAll,
  subscriber,
  summaryLine,
  waitCaughtUp,
  waitStarted,
  type MailRequest,
  type Proc,
  type ServerProc,
  type Subscriber,
  type Target,
  type TestDatabase,
  expectNothingLost,
} from "./support.ts";

let db: TestDatabase;
let smtp: FakeSmtp;
let serverA: ServerProc;
let serverB: ServerProc;
let worker: Proc;
let holderAtStart: string | undefined;

async function until<T>(check: () => Promise<T | undefined>, timeoutMs: number): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined || Date.now() > deadline) return value;
    await sleep(100);
  }
}

beforeAll(async () => {
  db = await createDatabase();
  const redis = await startPrivateRedis();
  smtp = await startFakeSmtp();
  const env = { ...deploymentEnv({ databaseUrl: db.url, redisUrl: redis.url, smtpUrl: smtp.url }), WORKERS: "off" };
  serverA = await startServer("two-a", env);
  // A is the relay's publisher before anyone else contends.
  holderAtStart = await until(async () => await relayLockHolder(db), 10_000);
  serverB = await startServer("two-b", env);
  worker = await startWorker("two-worker", env);
  const workerUp = await until(async () => ((await isConnected(db, "two-worker")) ? true : undefined), 30_000);
  if (!workerUp) throw new Error(`the worker did not connect to PostgreSQL:\n${worker.tail()}`);
}, 90_000);

afterAll(async () => {
  closeAllClients();
  await smtp?.stop();
  await stopAll();
}, 60_000);

describe("kill -9 of one of two servers (the relay's publisher) under load", () => {
  it("the other server and the worker keep serving: nothing lost or repeated, resumed subscribers complete, mail once", async () => {
    expect(holderAtStart, "the first server holds the relay lock").toBe("two-a");
    const tag = runTag("two");
    const A: Target = { name: "A", url: serverA.url };
    const B: Target = { name: "B", url: serverB.url };
    const targets = [A, B];
    const owner = await register(A.url, `${tag}-owner`);
    const posterUsers = await Promise.all(
      [0, 1, 2, 3].map((index) => register(targets[index % 2]!.url, `${tag}-poster${index}`)),
    );
    const subUsers = await Promise.all(
      [0, 1, 2, 3, 4, 5].map((index) => register(targets[index % 2]!.url, `${tag}-sub${index}`)),
    );
    const resetUsers = await Promise.all(
      [0, 1, 2, 3, 4, 5].map((index) => register(targets[index % 2]!.url, `${tag}-reset${index}`)),
    );
    const room = await buildRoom(B.url, owner, [...posterUsers, ...subUsers], 1);

    const subs: Subscriber[] = subUsers.map((user, index) =>
      subscriber(`sub${index}@${targets[index % 2]!.name}`, user, room, room.channelIds[Math.floor(index / 2) % 2]!),
    );
    subs.forEach((sub, index) => sub.open(targets[index % 2]!));
    await waitStarted(subs);

    // Posters prefer A or B and move to the other after a request that got no answer.
    const load = startPosters({
      tag,
      room,
      posters: posterUsers.map((user, index) => ({
        user,
        channelId: room.channelIds[index % 2]!,
        preferred: index % 2,
      })),
      targets: () => targets,
    });
    const mailRequests: MailRequest[] = [];
    await sleep(1_500);
    // Mail enqueued on both before the kill.
    for (let index = 0; index < 6; index++) {
      mailRequests.push(await requestMail(targets[index % 2]!, "otp", `${tag}-early${index}@example.test`));
    }
    await sleep(2_500);

    // A burst of mail acknowledged by A, then A dies at once.
    const burst = await Promise.all([
      ...[0, 1, 2, 3, 4, 5].map((index) => requestMail(A, "otp", `${tag}-burst${index}@example.test`)),
      ...resetUsers.slice(0, 3).map((user) => requestMail(A, "reset", user.email)),
    ]);
    mailRequests.push(...burst);
    const holderBeforeKill = await relayLockHolder(db);
    const killedAt = Date.now();
    serverA.proc().kill("SIGKILL");
    await serverA.proc().exited;

    // A's subscribers go to B and resume from the last position they saw.
    const moved = subs.filter((sub) => sub.server.name === "A");
    for (const sub of moved) {
      const last = sub.lastPosition();
      sub.close();
      sub.open(B, last);
    }
    // More mail, on the survivor.
    for (const user of resetUsers.slice(3)) mailRequests.push(await requestMail(B, "reset", user.email));
    const holderAfterKill = await until(async () => {
      const holder = await relayLockHolder(db);
      return holder && holder !== "two-a" ? holder : undefined;
    }, 10_000);
    const takeoverMs = Date.now() - killedAt;

    await sleep(4_000);
    await load.stop();
    const catchUpMs = await waitCaughtUp(db, subs, 20_000);

    const report = await checkRun({
      db,
      historyUrl: B.url,
      reader: owner,
      room,
      posts: load.records,
      subscribers: subs,
    });
    const mails = await checkMails(smtp, mailRequests, [owner, ...posterUsers, ...subUsers, ...resetUsers], 30_000);
    const ackedOnBAfterKill = load.records.filter(
      (post) => post.status === 201 && post.server === "B" && post.startedAt > killedAt,
    ).length;
    console.log(
      [
        summaryLine("two-servers", report, {
          lock_before_kill: holderBeforeKill ?? "none",
          lock_after_kill: holderAfterKill ?? "none",
          takeover_ms: holderAfterKill ? takeoverMs : -1,
          acked_on_b_after_kill: ackedOnBAfterKill,
          catch_up_ms: catchUpMs,
          mail_requested: mails.requested,
          mail_accepted: mails.accepted,
          mail_5xx: mails.fivexx,
          mail_missing: mails.missing.length,
          mail_duplicated: mails.duplicated.length,
        }),
        "failed posts:",
        failureDigest(load.records),
        "failed mail requests:",
        failureDigest(mailRequests),
        "subscribers:",
        describeSubscribers(report),
        ...(mails.missing.length ? [`mail missing: ${mails.missing.slice(0, 10).join("; ")}`] : []),
        ...(mails.duplicated.length ? [`mail duplicated: ${mails.duplicated.slice(0, 10).join("; ")}`] : []),
      ].join("\n"),
    );

    expect(report.acked, "posts acknowledged (sanity: the load ran)").toBeGreaterThan(20);
    expect.soft(holderBeforeKill, "the killed server held the relay lock").toBe("two-a");
    expect.soft(holderAfterKill, "another process took the relay over").toMatch(/^two-(b|worker)$/);
    expect.soft(ackedOnBAfterKill, "posts acknowledged by B after the kill").toBeGreaterThan(0);
    expect.soft(report.fivexx, `posts answered 5xx:\n${failureDigest(load.records)}`).toBe(0);
    expectNothingLost(report);
    expect
      .soft(
        mailRequests
          .filter((request) => request.status !== 200)
          .map(
            (request) =>
              `${request.kind}@${request.server} ${request.status} ${request.error ?? JSON.stringify(request.body)}`,
          ),
        "mail requests not accepted",
      )
      .toEqual([]);
    expect.soft(mails.missing, "accepted mails never delivered").toEqual([]);
    expect.soft(mails.duplicated, "mails delivered more than once").toEqual([]);
    expect.soft(serverB.proc().alive() && worker.alive(), "B and the worker still running").toBe(true);
  }, 110_000);
});
