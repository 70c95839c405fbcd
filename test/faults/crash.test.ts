// Issue 11, item 6 b: a server process killed with SIGKILL mid-run (twice) and started again on
// the same port and database. Clients post over REST and subscribe over the typed tRPC client on
// WebSocket the whole time. Afterwards every 201-acknowledged message is in history exactly
// once, and every subscriber that resumes from its last position (by the client's own
// reconnect, or by subscribing again with lastEventId) has every event of its channel exactly
// once, in position order, with no gap against the store.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildRoom,
  checkRun,
  closeAllClients,
  createDatabase,
  deploymentEnv,
  describeSubscribers,
  failureDigest,
  register,
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
  type ServerProc,
  type Subscriber,
  type TestDatabase,
  expectNothingLost,
} from "./support.ts";

let db: TestDatabase;
let server: ServerProc;

beforeAll(async () => {
  db = await createDatabase();
  const redis = await startPrivateRedis();
  server = await startServer("crash-server", deploymentEnv({ databaseUrl: db.url, redisUrl: redis.url }));
}, 90_000);

afterAll(async () => {
  closeAllClients();
  await stopAll();
}, 60_000);

describe("kill -9 of the server mid-run, restarted on the same port and database", () => {
  it("loses no acknowledged message, duplicates none, and resuming subscribers get every event in order", async () => {
    const tag = runTag("crash");
    const url = server.url;
    const owner = await register(url, `${tag}-owner`);
    const posterUsers = await Promise.all([0, 1, 2, 3].map((index) => register(url, `${tag}-poster${index}`)));
    const subUsers = await Promise.all([0, 1, 2, 3, 4, 5].map((index) => register(url, `${tag}-sub${index}`)));
    const room = await buildRoom(url, owner, [...posterUsers, ...subUsers], 1);
    const target = { name: "server", url };

    // Three subscribers rely on the client's own reconnect (wsLink resends lastEventId); three
    // subscribe again themselves, on a new client, from the last position they saw.
    const subs: (Subscriber & { mode: "auto" | "explicit" })[] = subUsers.map((user, index) =>
      Object.assign(subscriber(`${index < 3 ? "auto" : "explicit"}${index}`, user, room, room.channelIds[index % 2]!), {
        mode: (index < 3 ? "auto" : "explicit") as "auto" | "explicit",
      }),
    );
    for (const sub of subs) sub.open(target);
    await waitStarted(subs);

    const load = startPosters({
      tag,
      room,
      posters: posterUsers.map((user, index) => ({ user, channelId: room.channelIds[index % 2]!, preferred: 0 })),
      targets: () => [target],
    });
    await sleep(4_000);

    // Two crashes: the second one soon after the restart, while subscribers are resuming.
    const downMs: number[] = [];
    let restartedAt = 0;
    for (const runFor of [0, 1_500]) {
      await sleep(runFor);
      const killedAt = Date.now();
      server.proc().kill("SIGKILL");
      await server.proc().exited;
      const resumeFrom = new Map<Subscriber, string | undefined>();
      for (const sub of subs.filter((sub) => sub.mode === "explicit")) {
        resumeFrom.set(sub, sub.lastPosition());
        sub.close();
      }
      await sleep(1_000);
      await server.restart();
      restartedAt = Date.now();
      downMs.push(restartedAt - killedAt);
      for (const [sub, lastEventId] of resumeFrom) sub.open(target, lastEventId);
    }

    await sleep(4_000);
    await load.stop();
    const catchUpMs = await waitCaughtUp(db, subs, 20_000);

    const report = await checkRun({ db, historyUrl: url, reader: owner, room, posts: load.records, subscribers: subs });
    const ackedAfterRestart = load.records.filter(
      (post) => post.status === 201 && post.startedAt >= restartedAt,
    ).length;
    const autoReconnects = subs.filter((sub) => sub.mode === "auto").map((sub) => sub.starts - 1);
    console.log(
      [
        summaryLine("crash", report, {
          down_ms: downMs.join("/"),
          acked_after_restart: ackedAfterRestart,
          catch_up_ms: catchUpMs,
          auto_reconnects: autoReconnects.join("/"),
        }),
        "failed requests:",
        failureDigest(load.records),
        "subscribers:",
        describeSubscribers(report),
      ].join("\n"),
    );

    expect(report.acked, "posts acknowledged (sanity: the load ran)").toBeGreaterThan(20);
    expect.soft(ackedAfterRestart, "posts acknowledged after the last restart").toBeGreaterThan(0);
    expect.soft(report.fivexx, `posts answered 5xx:\n${failureDigest(load.records)}`).toBe(0);
    expectNothingLost(report);
  }, 110_000);
});
