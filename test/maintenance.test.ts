// Periodic maintenance (docs/operations.md, "Queues and periodic work"):
//  - files of deleted attachments: whatever deletes attachment rows (a channel deleted through
//    the API, a workspace or conversation deleted with its cascade, the staged-file prune)
//    queues their storage keys in `file_deletions` in the same transaction; the bytes go after
//    the commit, or in the `files.purge-deleted` job when that could not happen (a crash after
//    the commit, storage unreachable). Both storage drivers.
//  - expired credentials: web sessions and tokens past their expiry, one-time codes, password
//    reset tokens and single-use entries, deleted by the `accounts.prune-expired` job.
import { eq, inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  accessTokens,
  attachments,
  conversations,
  ephemeralEntries,
  fileDeletions,
  oneTimeCodes,
  passwordResetTokens,
  workspaces,
} from "../db/schema/index.ts";
import type { Deps } from "../server/deps.ts";
import type { JobDefinition } from "../server/jobs/definition.ts";
import { accountJobs, PRUNE_EXPIRED_CREDENTIALS_EVERY_MS } from "../server/services/accounts/jobs.ts";
import { pruneExpiredCredentials } from "../server/services/accounts/prune-expired.ts";
import { fileJobs, PRUNE_STAGED_FILES_EVERY_MS, PURGE_DELETED_FILES_EVERY_MS } from "../server/services/files/jobs.ts";
import { purgeDeletedFiles } from "../server/services/files/purge-deleted.ts";
import { FileNotStoredError } from "../server/storage/file-storage.ts";
import { scheduleRecurringJobs } from "../workers/index.ts";
import { restClient, type ApiResponse, type RestClient } from "./helpers/api.ts";
import { createWorkspaceWithGeneral, registerUser, uniqueEmail, type RegisteredUser } from "./helpers/factories.ts";
import { startFakeS3, type FakeS3 } from "./helpers/s3.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const DAY_MS = 24 * 60 * 60 * 1000;

function expectStatus(response: ApiResponse, status: number): void {
  if (response.status !== status) {
    throw new Error(`expected ${status}, got ${response.status}: ${JSON.stringify(response.body)}`);
  }
}

describe("recurring jobs", () => {
  it("schedules the staged-file prune, the deleted-file purge and the credential prune", async () => {
    const scheduled: { name: string; queue: string; everyMs: number }[] = [];
    const jobs = {
      repeat: async (definition: JobDefinition<unknown>, _payload: unknown, everyMs: number) => {
        scheduled.push({ name: definition.name, queue: definition.queue, everyMs });
      },
    };
    await scheduleRecurringJobs({ jobs } as unknown as Deps);
    expect(scheduled).toEqual(
      expect.arrayContaining([
        { name: fileJobs.pruneStaged.name, queue: "maintenance", everyMs: PRUNE_STAGED_FILES_EVERY_MS },
        { name: "files.purge-deleted", queue: "maintenance", everyMs: PURGE_DELETED_FILES_EVERY_MS },
        { name: "accounts.prune-expired", queue: "maintenance", everyMs: PRUNE_EXPIRED_CREDENTIALS_EVERY_MS },
      ]),
    );
  });
});

for (const driver of ["local", "s3"] as const) {
  describe(`files of deleted attachments, STORAGE_DRIVER=${driver}`, () => {
    let server: TestServer;
    let api: RestClient;
    let s3: FakeS3 | undefined;
    const deps = () => server.app.deps;

    beforeAll(async () => {
      s3 = driver === "s3" ? await startFakeS3() : undefined;
      server = await startTestServer({ ...s3?.env });
      api = restClient(server.url);
    });
    afterAll(async () => {
      await server?.close();
      await s3?.stop();
    });

    async function stage(user: RegisteredUser, content: string): Promise<string> {
      const form = new FormData();
      form.append("file", new Blob([content], { type: "text/plain" }), `${content}.txt`);
      const response = await api.post("/api/v1/files", form, { token: user.token });
      expectStatus(response, 201);
      return response.body.data.id;
    }

    async function postWithFiles(user: RegisteredUser, path: string, contents: string[]): Promise<string[]> {
      const ids: string[] = [];
      for (const content of contents) ids.push(await stage(user, content));
      expectStatus(await api.post(path, { content: "files", attachment_ids: ids }, { token: user.token }), 201);
      return ids;
    }

    async function storageKeysOf(attachmentIds: string[]): Promise<string[]> {
      const rows = await deps()
        .db.select({ storageKey: attachments.storageKey })
        .from(attachments)
        .where(inArray(attachments.id, attachmentIds));
      expect(rows).toHaveLength(attachmentIds.length);
      return rows.map((row) => row.storageKey);
    }

    async function isStored(key: string): Promise<boolean> {
      try {
        const object = await deps().storage.get(key);
        // Deleted meanwhile (a purge running), the local driver's lazy stream fails on open.
        object.body.on("error", () => {});
        object.body.destroy();
        return true;
      } catch (error) {
        if (error instanceof FileNotStoredError) return false;
        throw error;
      }
    }

    async function storedCount(keys: string[]): Promise<number> {
      let count = 0;
      for (const key of keys) if (await isStored(key)) count++;
      return count;
    }

    async function queued(keys: string[]): Promise<string[]> {
      const rows = await deps()
        .db.select({ storageKey: fileDeletions.storageKey })
        .from(fileDeletions)
        .where(inArray(fileDeletions.storageKey, keys));
      return rows.map((row) => row.storageKey).sort();
    }

    /** A workspace of `owner` with #general, a second channel, and messages with files in both. */
    async function workspaceWithFiles(owner: RegisteredUser, tag: string) {
      const { workspaceId, channelId: generalId } = await createWorkspaceWithGeneral(api, owner);
      const channel = await api.post(
        `/api/v1/workspaces/${workspaceId}/channels`,
        { name: `Files ${tag}` },
        { token: owner.token },
      );
      expectStatus(channel, 201);
      const channelId: string = channel.body.data.id;
      const inGeneral = await postWithFiles(owner, `/api/v1/workspaces/${workspaceId}/channels/${generalId}/messages`, [
        `${tag}-general-1`,
        `${tag}-general-2`,
      ]);
      const inChannel = await postWithFiles(owner, `/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`, [
        `${tag}-channel-1`,
      ]);
      return {
        workspaceId,
        generalId,
        channelId,
        generalKeys: await storageKeysOf(inGeneral),
        channelKeys: await storageKeysOf(inChannel),
      };
    }

    it("deleting a channel deletes its messages' files from storage, and no other file", async () => {
      const owner = await registerUser(api);
      const team = await workspaceWithFiles(owner, "channel-delete");
      expect(await storedCount([...team.generalKeys, ...team.channelKeys])).toBe(3);

      const response = await api.delete(`/api/v1/workspaces/${team.workspaceId}/channels/${team.channelId}`, {
        token: owner.token,
      });
      expectStatus(response, 204);
      await until(
        async () => ((await storedCount(team.channelKeys)) === 0 ? true : undefined),
        "the deleted channel's file to leave storage",
      );
      await until(async () => ((await queued(team.channelKeys)).length === 0 ? true : undefined), "the queue to empty");
      expect(await storedCount(team.generalKeys)).toBe(2);
      if (s3) {
        const objects = await s3.keys();
        for (const key of team.channelKeys) expect(objects).not.toContain(key);
        for (const key of team.generalKeys) expect(objects).toContain(key);
      }
    });

    it("deleting a workspace queues every file of its channels in the deleting transaction; the job deletes them", async () => {
      const owner = await registerUser(api);
      const team = await workspaceWithFiles(owner, "workspace-delete");
      const other = await workspaceWithFiles(owner, "workspace-kept");
      const keys = [...team.generalKeys, ...team.channelKeys];

      // The cascade (workspace → channels → messages → attachments), as any deletion of the
      // workspace row runs it. Nothing purges afterwards here: only the queue knows the files.
      await deps().db.delete(workspaces).where(eq(workspaces.id, team.workspaceId));
      expect(await queued(keys)).toEqual([...keys].sort());
      expect(await storedCount(keys)).toBe(3);

      await deps().jobs.enqueue(fileJobs.purgeDeleted, {});
      await until(
        async () => ((await storedCount(keys)) === 0 ? true : undefined),
        "the purge job to delete the files",
      );
      await until(async () => ((await queued(keys)).length === 0 ? true : undefined), "the queue to empty");
      expect(await storedCount([...other.generalKeys, ...other.channelKeys])).toBe(3);
    });

    it("deleting a direct conversation queues its files; a purge deletes them", async () => {
      const alice = await registerUser(api);
      const bob = await registerUser(api);
      const opened = await api.post(
        "/api/v1/direct-conversations",
        { participant_user_id: bob.id },
        { token: alice.token },
      );
      expect([200, 201]).toContain(opened.status);
      const conversationId: string = opened.body.data.id;
      const path = `/api/v1/direct-conversations/${conversationId}/messages`;
      const keys = [
        ...(await storageKeysOf(await postWithFiles(alice, path, ["dm-alice"]))),
        ...(await storageKeysOf(await postWithFiles(bob, path, ["dm-bob-1", "dm-bob-2"]))),
      ];

      await deps().db.delete(conversations).where(eq(conversations.id, conversationId));
      expect(await queued(keys)).toEqual([...keys].sort());
      expect(await purgeDeletedFiles(deps())).toBeGreaterThanOrEqual(3);
      expect(await storedCount(keys)).toBe(0);
      expect(await queued(keys)).toEqual([]);
    });

    it("a deletion that rolls back queues nothing and keeps the files", async () => {
      const owner = await registerUser(api);
      const team = await workspaceWithFiles(owner, "rolled-back");
      const keys = [...team.generalKeys, ...team.channelKeys];
      await expect(
        deps().db.transaction(async (tx) => {
          await tx.delete(workspaces).where(eq(workspaces.id, team.workspaceId));
          throw new Error("changed my mind");
        }),
      ).rejects.toThrow("changed my mind");
      expect(await queued(keys)).toEqual([]);
      await purgeDeletedFiles(deps());
      expect(await storedCount(keys)).toBe(3);
    });

    it("a failed storage delete stays queued (attempts counted) until a later purge succeeds", async () => {
      const owner = await registerUser(api);
      const team = await workspaceWithFiles(owner, "storage-down");
      const keys = [...team.generalKeys, ...team.channelKeys];
      await deps().db.delete(workspaces).where(eq(workspaces.id, team.workspaceId));

      const storage = deps().storage;
      const realDelete = storage.delete.bind(storage);
      storage.delete = async () => {
        throw new Error("storage unreachable");
      };
      try {
        expect(await purgeDeletedFiles(deps())).toBe(0);
      } finally {
        storage.delete = realDelete;
      }
      const rows = await deps().db.select().from(fileDeletions).where(inArray(fileDeletions.storageKey, keys));
      expect(rows).toHaveLength(3);
      // The first batch stops at the first failure-only pass; every key it tried counts one.
      expect(rows.every((row) => row.attempts <= 1)).toBe(true);
      expect(rows.some((row) => row.attempts === 1)).toBe(true);
      expect(await storedCount(keys)).toBe(3);

      expect(await purgeDeletedFiles(deps())).toBeGreaterThanOrEqual(3);
      expect(await storedCount(keys)).toBe(0);
      expect(await queued(keys)).toEqual([]);
    });

    it("a restart after the commit loses nothing: the queue survives and the job deletes the files", async () => {
      const owner = await registerUser(api);
      const team = await workspaceWithFiles(owner, "crash");
      const keys = [...team.generalKeys, ...team.channelKeys];
      await deps().db.delete(workspaces).where(eq(workspaces.id, team.workspaceId));

      // The process stops before anything was deleted from storage (no purge ran).
      server = await server.restart();
      api = restClient(server.url);
      expect(await queued(keys)).toEqual([...keys].sort());
      expect(await storedCount(keys)).toBe(3);

      await deps().jobs.enqueue(fileJobs.purgeDeleted, {});
      await until(async () => ((await storedCount(keys)) === 0 ? true : undefined), "the purge job after the restart");
      await until(async () => ((await queued(keys)).length === 0 ? true : undefined), "the queue to empty");
    });

    it("the staged-file prune deletes its files through the same queue", async () => {
      const user = await registerUser(api);
      const key = (await storageKeysOf([await stage(user, "never-claimed")]))[0]!;
      server.clock.advance(DAY_MS + 60_000);
      await deps().jobs.enqueue(fileJobs.pruneStaged, {});
      await until(async () => ((await isStored(key)) ? undefined : true), "the staged file to leave storage");
      // The key leaves the queue only after its object is gone, a moment later.
      await until(async () => ((await queued([key])).length === 0 ? true : undefined), "the queue to empty");
    });
  });
}

describe("expired credentials", () => {
  let server: TestServer;
  let api: RestClient;
  const deps = () => server.app.deps;

  beforeAll(async () => {
    server = await startTestServer();
    api = restClient(server.url);
  });
  afterAll(() => server?.close());

  async function tokenIds(userId: number): Promise<{ id: string; kind: string }[]> {
    return deps()
      .db.select({ id: accessTokens.id, kind: accessTokens.kind })
      .from(accessTokens)
      .where(eq(accessTokens.userId, userId));
  }

  it("deletes expired web sessions, codes, reset tokens and single-use entries; keeps what is still valid", async () => {
    const user = await registerUser(api);
    const webLogin = await api.post("/api/v1/auth/web/login", { email: user.email, password: user.password });
    expectStatus(webLogin, 200);
    const personal = await api.post("/api/v1/tokens", { name: "script", abilities: ["read"] }, { token: user.token });
    expectStatus(personal, 201);
    const otpEmail = uniqueEmail("otp");
    expectStatus(await api.post("/api/v1/auth/app/otp", { email: otpEmail }), 200);
    expectStatus(await api.post("/api/v1/auth/app/forgot-password", { email: user.email }), 200);
    const now = deps().clock.now();
    await deps()
      .db.insert(ephemeralEntries)
      .values([
        { key: `test:expired:${user.id}`, value: { n: 1 }, expiresAt: new Date(now.getTime() + 60_000) },
        { key: `test:lasting:${user.id}`, value: { n: 2 }, expiresAt: new Date(now.getTime() + 30 * DAY_MS) },
      ]);
    const before = await tokenIds(user.id);
    expect(before.map((token) => token.kind).sort()).toEqual(["personal", "session", "sign_in"]);

    // Nothing has expired yet.
    let counts = await pruneExpiredCredentials(deps());
    expect((await tokenIds(user.id)).length).toBe(3);

    // An hour later: the code (10 minutes), the reset token (60 minutes) and the entry expired.
    server.clock.advance(61 * 60 * 1000);
    counts = await pruneExpiredCredentials(deps());
    expect(counts.oneTimeCodes).toBeGreaterThanOrEqual(1);
    expect(counts.passwordResetTokens).toBeGreaterThanOrEqual(1);
    expect(counts.ephemeralEntries).toBeGreaterThanOrEqual(1);
    expect(await deps().db.select().from(oneTimeCodes).where(eq(oneTimeCodes.email, otpEmail))).toEqual([]);
    expect(await deps().db.select().from(passwordResetTokens).where(eq(passwordResetTokens.email, user.email))).toEqual(
      [],
    );
    const entries = await deps()
      .db.select({ key: ephemeralEntries.key })
      .from(ephemeralEntries)
      .where(inArray(ephemeralEntries.key, [`test:expired:${user.id}`, `test:lasting:${user.id}`]));
    expect(entries).toEqual([{ key: `test:lasting:${user.id}` }]);
    expect((await tokenIds(user.id)).length).toBe(3);

    // Past the session's two weeks: the web session goes; sign-in and personal tokens never expire.
    server.clock.advance(15 * DAY_MS);
    counts = await pruneExpiredCredentials(deps());
    expect(counts.accessTokens).toBeGreaterThanOrEqual(1);
    expect((await tokenIds(user.id)).map((token) => token.kind).sort()).toEqual(["personal", "sign_in"]);
    expect((await api.get("/api/v1/me", { token: user.token })).status).toBe(200);
    expect((await api.get("/api/v1/me", { token: personal.body.access_token })).status).toBe(200);
  });

  it("runs as the accounts.prune-expired maintenance job", async () => {
    const user = await registerUser(api);
    expectStatus(await api.post("/api/v1/auth/web/login", { email: user.email, password: user.password }), 200);
    expect((await tokenIds(user.id)).map((token) => token.kind)).toContain("session");
    server.clock.advance(15 * DAY_MS);
    await deps().jobs.enqueue(accountJobs.pruneExpired, {});
    await until(
      async () => ((await tokenIds(user.id)).some((token) => token.kind === "session") ? undefined : true),
      "the job to delete the expired session",
    );
    expect((await tokenIds(user.id)).map((token) => token.kind)).toEqual(["sign_in"]);
  });
});
