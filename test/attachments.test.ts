// Attachments (API document "Messages and attachments"; contract: POST /api/v1/files, the
// attachment record): staging an upload, claiming it with a message, downloading it under the
// rules of its channel or conversation, and pruning what nobody claimed. Every test runs
// against both storage drivers: local files, and S3 (a real S3-compatible server on 127.0.0.1).
import { randomBytes } from "node:crypto";
import { readdir } from "node:fs/promises";
import { request } from "node:http";
import path from "node:path";
import { Readable } from "node:stream";
import { buffer } from "node:stream/consumers";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attachments } from "../db/schema/index.ts";
import { fileJobs } from "../server/services/files/jobs.ts";
import { pruneStagedFiles } from "../server/services/files/prune-staged.ts";
import { FileNotStoredError } from "../server/storage/file-storage.ts";
import { restClient, type ApiResponse, type RestClient } from "./helpers/api.ts";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { startFakeS3, type FakeS3 } from "./helpers/s3.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

// Above lib-storage's 5 MiB part size, so the S3 driver's multipart path runs too.
const LIMIT = 6 * 1024 * 1024;
const HOUR_MS = 60 * 60 * 1000;
const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$/;
const INVALID = "The given data was invalid.";

type Part = { name: string; filename?: string; contentType?: string; content: Buffer | string };
type AttachmentRecord = {
  id: string;
  filename: string;
  mime_type: string;
  size: number;
  download_url: string;
  created_at: string;
};

/** A multipart/form-data body built byte by byte, for parts FormData cannot express. */
function multipart(parts: Part[]): { body: Buffer; contentType: string } {
  const boundary = `----chat-test-${randomBytes(8).toString("hex")}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    // Quoted-string escapes, as RFC 7578 clients send a name with quotes or backslashes.
    const quoted = (value: string) => `"${value.replace(/[\\"]/g, (character) => `\\${character}`)}"`;
    const disposition =
      `form-data; name=${quoted(part.name)}` +
      (part.filename === undefined ? "" : `; filename=${quoted(part.filename)}`);
    const headers = [`Content-Disposition: ${disposition}`];
    if (part.contentType !== undefined) headers.push(`Content-Type: ${part.contentType}`);
    chunks.push(Buffer.from(`--${boundary}\r\n${headers.join("\r\n")}\r\n\r\n`, "utf8"));
    chunks.push(Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content, "utf8"));
    chunks.push(Buffer.from("\r\n"));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

function expectStatus(response: ApiResponse, status: number): void {
  if (response.status !== status) {
    throw new Error(`expected ${status}, got ${response.status}: ${JSON.stringify(response.body)}`);
  }
}

const fileBytes = (size: number) => randomBytes(size);

for (const driver of ["local", "s3"] as const) {
  describe(`attachments with STORAGE_DRIVER=${driver}`, () => {
    let server: TestServer;
    let api: RestClient;
    let s3: FakeS3 | undefined;

    beforeAll(async () => {
      s3 = driver === "s3" ? await startFakeS3() : undefined;
      server = await startTestServer({ MAX_UPLOAD_BYTES: String(LIMIT), ...s3?.env });
      api = restClient(server.url);
    });
    afterAll(async () => {
      await server?.close();
      await s3?.stop();
    });

    /** Every object the driver holds: files under DATA_DIR/files, or keys in the bucket. */
    async function storedObjects(): Promise<string[]> {
      if (s3) return s3.keys();
      const root = path.join(server.config.dataDir, "files");
      const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
      return entries.filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
    }

    async function upload(
      token: string | undefined,
      parts: Part[],
      headers: Record<string, string> = {},
    ): Promise<ApiResponse> {
      const { body, contentType } = multipart(parts);
      const response = await fetch(`${server.url}/api/v1/files`, {
        method: "POST",
        headers: {
          Accept: "application/json",
          "Content-Type": contentType,
          ...(token && { Authorization: `Bearer ${token}` }),
          ...headers,
        },
        body,
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
    }

    async function stage(user: RegisteredUser, content: Buffer | string = "hello", filename = "hello.txt") {
      const response = await upload(user.token, [{ name: "file", filename, contentType: "text/plain", content }]);
      expectStatus(response, 201);
      return response.body.data as AttachmentRecord;
    }

    async function download(downloadPath: string, token?: string) {
      const response = await fetch(`${server.url}${downloadPath}`, {
        headers: token ? { Authorization: `Bearer ${token}` } : {},
      });
      return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) };
    }

    const channelPath = (id: string) => `/api/v1/message-attachments/${id}/download`;
    const directPath = (id: string) => `/api/v1/direct-message-attachments/${id}/download`;

    async function rowOf(id: string) {
      const [row] = await server.app.deps.db.select().from(attachments).where(eq(attachments.id, id));
      return row;
    }

    async function storedBytes(storageKey: string): Promise<Buffer> {
      return buffer((await server.app.deps.storage.get(storageKey)).body);
    }

    /** A public workspace with its #general, the owner and a member who joined it. */
    async function workspaceWithMember() {
      const [owner, member] = await Promise.all([
        registerUser(api, { name: "Olive Owner" }),
        registerUser(api, { name: "Mia Member" }),
      ]);
      const created = await api.post(
        "/api/v1/workspaces",
        { name: "Team", visibility: "public" },
        { token: owner.token },
      );
      expectStatus(created, 201);
      const workspaceId: string = created.body.data.id;
      expectStatus(await api.post(`/api/v1/workspaces/${workspaceId}/join`, {}, { token: member.token }), 200);
      const channels = await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
      const general = channels.body.data.find((channel: { slug: string }) => channel.slug === "general");
      return { owner, member, workspaceId, generalId: general.id as string };
    }

    const postToChannel = (user: RegisteredUser, workspaceId: string, channelId: string, body: object) =>
      api.post(`/api/v1/workspaces/${workspaceId}/channels/${channelId}/messages`, body, { token: user.token });

    describe("POST /api/v1/files", () => {
      it("stages an upload: 201 with the attachment record, its row, and the bytes in storage", async () => {
        const user = await registerUser(api);
        const content = fileBytes(1500);
        const response = await upload(user.token, [
          { name: "file", filename: "report.pdf", contentType: "application/pdf", content },
        ]);
        expectStatus(response, 201);
        const record = response.body.data;
        expect(Object.keys(response.body)).toEqual(["data"]);
        expect(record).toEqual({
          id: expect.stringMatching(/^att_[0-9A-Z]{26}$/),
          filename: "report.pdf",
          mime_type: "application/pdf",
          size: 1500,
          download_url: `${server.config.appUrl}/api/v1/message-attachments/${record.id}/download`,
          created_at: expect.stringMatching(ISO_WITH_OFFSET),
        });
        const row = await rowOf(record.id);
        expect(row).toMatchObject({ uploaderId: user.id, messageId: null, filename: "report.pdf", size: 1500 });
        expect(row!.storageKey).not.toContain(record.id);
        expect((await storedBytes(row!.storageKey)).equals(content)).toBe(true);
      });

      it("accepts a file of exactly MAX_UPLOAD_BYTES and refuses one byte more with 413, storing nothing", async () => {
        const user = await registerUser(api);
        const atLimit = fileBytes(LIMIT);
        const accepted = await upload(user.token, [{ name: "file", filename: "big.bin", content: atLimit }]);
        expectStatus(accepted, 201);
        expect(accepted.body.data.size).toBe(LIMIT);
        expect((await storedBytes((await rowOf(accepted.body.data.id))!.storageKey)).equals(atLimit)).toBe(true);

        const objectsBefore = (await storedObjects()).sort();
        const rowsBefore = await server.app.deps.db.select().from(attachments);
        const refused = await upload(user.token, [
          { name: "file", filename: "big.bin", content: fileBytes(LIMIT + 1) },
        ]);
        expect(refused.status).toBe(413);
        expect(refused.body).toEqual({ message: `The file must not be greater than ${LIMIT} bytes.` });
        expect((await storedObjects()).sort()).toEqual(objectsBefore);
        expect(await server.app.deps.db.select().from(attachments)).toHaveLength(rowsBefore.length);
      });

      it("refuses a streamed (chunked) upload past the limit with 413 and stores nothing", async () => {
        const user = await registerUser(api);
        const { body, contentType } = multipart([
          { name: "file", filename: "stream.bin", content: fileBytes(LIMIT + 200_000) },
        ]);
        const objectsBefore = (await storedObjects()).sort();
        // No Content-Length: the body arrives in chunks, as from a client that streams a file.
        const status = await new Promise<number>((resolve, reject) => {
          const outgoing = request(
            `${server.url}/api/v1/files`,
            { method: "POST", headers: { "Content-Type": contentType, Authorization: `Bearer ${user.token}` } },
            (response) => {
              response.resume();
              resolve(response.statusCode ?? 0);
            },
          );
          outgoing.on("error", reject);
          Readable.from(
            Array.from({ length: Math.ceil(body.length / 65536) }, (_, index) =>
              body.subarray(index * 65536, (index + 1) * 65536),
            ),
          ).pipe(outgoing);
        });
        expect(status).toBe(413);
        expect((await storedObjects()).sort()).toEqual(objectsBefore);
      });

      it("refuses a declared Content-Length far over the limit before reading the body", async () => {
        const user = await registerUser(api);
        const { contentType } = multipart([{ name: "file", filename: "huge.bin", content: "" }]);
        const response = await new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
          const outgoing = request(`${server.url}/api/v1/files`, {
            method: "POST",
            headers: {
              "Content-Type": contentType,
              "Content-Length": String(LIMIT * 2),
              Authorization: `Bearer ${user.token}`,
            },
          });
          outgoing.on("response", (incoming) => {
            incoming.resume();
            resolve({ status: incoming.statusCode ?? 0, connection: incoming.headers.connection });
            outgoing.destroy();
          });
          outgoing.on("error", reject);
          // Only the first bytes are sent: the answer must not wait for the rest.
          outgoing.write(Buffer.alloc(1024));
        });
        expect(response).toEqual({ status: 413, connection: "close" });
      });

      it("answers 422 with error key file when the file field is missing", async () => {
        const user = await registerUser(api);
        const missing = { message: INVALID, errors: { file: ["The file field is required."] } };
        const onlyText = await upload(user.token, [{ name: "note", content: "no file here" }]);
        expect(onlyText.status).toBe(422);
        expect(onlyText.body).toEqual(missing);
        const otherName = await upload(user.token, [{ name: "document", filename: "a.txt", content: "x" }]);
        expect(otherName.body).toEqual(missing);
        const emptyInput = await upload(user.token, [{ name: "file", filename: "", content: "" }]);
        expect(emptyInput.body).toEqual(missing);
        // What a browser sends for a file input left empty, and nothing is staged for it.
        const browserEmpty = await upload(user.token, [
          { name: "file", filename: "", contentType: "application/octet-stream", content: "" },
        ]);
        expect(browserEmpty.status).toBe(422);
        expect(browserEmpty.body).toEqual(missing);
        expect(
          await server.app.deps.db.select().from(attachments).where(eq(attachments.uploaderId, user.id)),
        ).toEqual([]);
        // A part without a file name but with bytes is a file (named "file").
        const nameless = await upload(user.token, [
          { name: "file", filename: "", contentType: "application/octet-stream", content: "abc" },
        ]);
        expect(nameless.status).toBe(201);
        expect(nameless.body.data).toMatchObject({ filename: "file", size: 3 });
        const json = await api.post("/api/v1/files", { file: "not a file" }, { token: user.token });
        expect(json.status).toBe(422);
        expect(json.body).toEqual(missing);
      });

      it("keeps the file name without directories or control characters, at most 255 characters with its extension", async () => {
        const user = await registerUser(api);
        const nested = await upload(user.token, [
          { name: "file", filename: "C:\\Users\\ann\\Q3\u202Ereport.txt", contentType: "text/plain", content: "x" },
        ]);
        expect(nested.body.data.filename).toBe("Q3report.txt");
        const long = await upload(user.token, [
          { name: "file", filename: `${"a".repeat(300)}.pdf`, contentType: "application/pdf", content: "x" },
        ]);
        expect(long.body.data.filename).toBe(`${"a".repeat(251)}.pdf`);
        const unicode = await upload(user.token, [
          { name: "file", filename: "日本語 ファイル.txt", contentType: "text/plain", content: "x" },
        ]);
        expect(unicode.body.data.filename).toBe("日本語 ファイル.txt");
      });

      it("takes mime_type from the part's Content-Type, without parameters", async () => {
        const user = await registerUser(api);
        const typed = await upload(user.token, [
          { name: "file", filename: "a.png", contentType: "image/PNG; charset=binary", content: "x" },
        ]);
        expect(typed.body.data.mime_type).toBe("image/png");
        const binary = await upload(user.token, [
          { name: "file", filename: "a.bin", contentType: "application/octet-stream", content: "x" },
        ]);
        expect(binary.body.data.mime_type).toBe("application/octet-stream");
        // RFC 7578 §4.4: a part without (or with an unreadable) Content-Type is text/plain.
        const untyped = await upload(user.token, [{ name: "file", filename: "notes", content: "x" }]);
        expect(untyped.body.data.mime_type).toBe("text/plain");
        const garbled = await upload(user.token, [
          { name: "file", filename: "a.bin", contentType: "definitely not a type", content: "x" },
        ]);
        expect(garbled.body.data.mime_type).toBe("text/plain");
      });

      it("answers 401 without a token, 403 to a token without the write ability", async () => {
        const noToken = await upload(undefined, [{ name: "file", filename: "a.txt", content: "x" }]);
        expect(noToken.status).toBe(401);
        expect(noToken.body).toEqual({ message: "Unauthenticated." });
        const badToken = await upload("chat_not-a-token", [{ name: "file", filename: "a.txt", content: "x" }]);
        expect(badToken.status).toBe(401);

        const user = await registerUser(api);
        const created = await api.post(
          "/api/v1/tokens",
          { name: "reader", abilities: ["read"] },
          { token: user.token },
        );
        expectStatus(created, 201);
        const readOnly = await upload(created.body.access_token, [{ name: "file", filename: "a.txt", content: "x" }]);
        expect(readOnly.status).toBe(403);
        expect(readOnly.body).toEqual({ message: 'This token does not have the "write" ability.' });
      });

      it("accepts the web session cookie from a trusted Origin only", async () => {
        const user = await registerUser(api);
        const login = await api.post("/api/v1/auth/web/login", { email: user.email, password: user.password });
        expectStatus(login, 200);
        const session = login.headers
          .getSetCookie()
          .map((cookie) => cookie.split(";")[0]!)
          .find((cookie) => cookie.startsWith("chat_session="))!;
        const parts: Part[] = [{ name: "file", filename: "a.txt", content: "x" }];
        expect((await upload(undefined, parts, { Cookie: session })).status).toBe(403);
        expect((await upload(undefined, parts, { Cookie: session, Origin: "http://evil.example" })).status).toBe(403);
        const trusted = await upload(undefined, parts, {
          Cookie: session,
          Origin: new URL(server.config.appUrl).origin,
        });
        expectStatus(trusted, 201);
        // Downloads are reads: a link followed in the browser carries the cookie and no Origin.
        const fetched = await download(channelPath(trusted.body.data.id), undefined);
        expect(fetched.status).toBe(401);
        const withCookie = await fetch(`${server.url}${channelPath(trusted.body.data.id)}`, {
          headers: { Cookie: session },
        });
        expect(withCookie.status).toBe(200);
        expect(await withCookie.text()).toBe("x");
      });
    });

    describe("claiming with a message", () => {
      it("attaches a staged file to a channel message, once", async () => {
        const { owner, workspaceId, generalId } = await workspaceWithMember();
        const file = await stage(owner, "minutes", "minutes.txt");
        const posted = await postToChannel(owner, workspaceId, generalId, { attachment_ids: [file.id] });
        expectStatus(posted, 201);
        expect(posted.body.data.content).toBe("");
        expect(posted.body.data.attachments).toEqual([file]);
        expect((await rowOf(file.id))!.messageId).toBe(posted.body.data.id);

        const again = await postToChannel(owner, workspaceId, generalId, {
          content: "again",
          attachment_ids: [file.id],
        });
        expect(again.status).toBe(422);
        expect(Object.keys(again.body.errors)).toEqual(["attachment_ids.0"]);
      });

      it("refuses another user's staged file with error key attachment_ids.0", async () => {
        const { owner, member, workspaceId, generalId } = await workspaceWithMember();
        const othersFile = await stage(member);
        const response = await postToChannel(owner, workspaceId, generalId, {
          content: "look",
          attachment_ids: [othersFile.id],
        });
        expect(response.status).toBe(422);
        expect(response.body.message).toBe(INVALID);
        expect(Object.keys(response.body.errors)).toEqual(["attachment_ids.0"]);
        expect((await rowOf(othersFile.id))!.messageId).toBeNull();
      });
    });

    describe("downloads", () => {
      it("serves a channel attachment's exact bytes, with its headers, to members who can see the channel", async () => {
        const { owner, member, workspaceId, generalId } = await workspaceWithMember();
        const content = fileBytes(70_000);
        const staged = await uploadAs(owner, 'Résumé "final".pdf', "application/pdf", content);
        expectStatus(await postToChannel(owner, workspaceId, generalId, { attachment_ids: [staged.id] }), 201);

        for (const reader of [owner, member]) {
          const response = await download(channelPath(staged.id), reader.token);
          expect(response.status).toBe(200);
          expect(response.bytes.equals(content)).toBe(true);
          expect(response.headers.get("content-type")).toBe("application/pdf");
          expect(response.headers.get("content-length")).toBe("70000");
          expect(response.headers.get("content-disposition")).toBe(
            `attachment; filename="R_sum_ _final_.pdf"; filename*=UTF-8''R%C3%A9sum%C3%A9%20%22final%22.pdf`,
          );
          expect(response.headers.get("x-content-type-options")).toBe("nosniff");
        }
        expect(staged.download_url).toBe(`${server.config.appUrl}${channelPath(staged.id)}`);
      });

      it("answers 404 to a non-member, at the direct path, for an unknown id, and 401 without a token", async () => {
        const { owner, workspaceId, generalId } = await workspaceWithMember();
        const outsider = await registerUser(api);
        const file = await stage(owner);
        expectStatus(await postToChannel(owner, workspaceId, generalId, { attachment_ids: [file.id] }), 201);
        const notFound = { message: "Attachment not found." };

        const byOutsider = await api.get(channelPath(file.id), { token: outsider.token });
        expect(byOutsider.status).toBe(404);
        expect(byOutsider.body).toEqual(notFound);
        const wrongPath = await api.get(directPath(file.id), { token: owner.token });
        expect(wrongPath.status).toBe(404);
        expect(wrongPath.body).toEqual(notFound);
        expect((await api.get(channelPath("att_unknown"), { token: owner.token })).status).toBe(404);
        expect((await api.get(channelPath(file.id))).status).toBe(401);
      });

      it("hides a private channel's attachment from workspace members outside the channel", async () => {
        const { owner, member, workspaceId } = await workspaceWithMember();
        const channel = await api.post(
          `/api/v1/workspaces/${workspaceId}/channels`,
          { name: "Board", visibility: "private" },
          { token: owner.token },
        );
        expectStatus(channel, 201);
        const file = await stage(owner);
        expectStatus(await postToChannel(owner, workspaceId, channel.body.data.id, { attachment_ids: [file.id] }), 201);
        expect((await download(channelPath(file.id), owner.token)).status).toBe(200);
        expect((await download(channelPath(file.id), member.token)).status).toBe(404);
      });

      it("serves a direct message's attachment to its two participants only, at the direct path only", async () => {
        const [ann, bob, eve] = await Promise.all([registerUser(api), registerUser(api), registerUser(api)]);
        const conversation = await api.post(
          "/api/v1/direct-conversations",
          { participant_user_id: String(bob.id) },
          { token: ann.token },
        );
        expectStatus(conversation, 201);
        const content = fileBytes(4096);
        const file = await uploadAs(ann, "photo.jpg", "image/jpeg", content);
        const posted = await api.post(
          `/api/v1/direct-conversations/${conversation.body.data.id}/messages`,
          { attachment_ids: [file.id] },
          { token: ann.token },
        );
        expectStatus(posted, 201);
        const [attached] = posted.body.data.attachments;
        expect(attached).toEqual({ ...file, download_url: `${server.config.appUrl}${directPath(file.id)}` });

        for (const participant of [ann, bob]) {
          const response = await download(directPath(file.id), participant.token);
          expect(response.status).toBe(200);
          expect(response.bytes.equals(content)).toBe(true);
          expect(response.headers.get("content-type")).toBe("image/jpeg");
        }
        expect((await download(directPath(file.id), eve.token)).status).toBe(404);
        expect((await download(channelPath(file.id), ann.token)).status).toBe(404);
        expect((await download(channelPath(file.id), bob.token)).status).toBe(404);
      });

      it("serves a staged file to its uploader only, at the channel path", async () => {
        const [uploader, other] = await Promise.all([registerUser(api), registerUser(api)]);
        const file = await stage(uploader, "draft");
        const own = await download(channelPath(file.id), uploader.token);
        expect(own.status).toBe(200);
        expect(own.bytes.toString()).toBe("draft");
        expect((await download(channelPath(file.id), other.token)).status).toBe(404);
        expect((await download(directPath(file.id), uploader.token)).status).toBe(404);
      });
    });

    // Last: these move the server's clock a day ahead.
    describe("pruning unclaimed files", () => {
      it("removes staged files older than 24 hours, bytes and row, and keeps claimed and younger ones", async () => {
        const { owner, workspaceId, generalId } = await workspaceWithMember();
        const old = await stage(owner, "old");
        const claimed = await stage(owner, "claimed");
        expectStatus(await postToChannel(owner, workspaceId, generalId, { attachment_ids: [claimed.id] }), 201);
        const oldKey = (await rowOf(old.id))!.storageKey;

        server.clock.advance(23 * HOUR_MS);
        expect(await pruneStagedFiles(server.app.deps)).toBe(0);
        const young = await stage(owner, "young");
        server.clock.advance(HOUR_MS + 60_000);

        expect(await pruneStagedFiles(server.app.deps)).toBeGreaterThanOrEqual(1);
        expect(await rowOf(old.id)).toBeUndefined();
        await expect(server.app.deps.storage.get(oldKey)).rejects.toBeInstanceOf(FileNotStoredError);
        expect((await download(channelPath(old.id), owner.token)).status).toBe(404);

        expect((await rowOf(claimed.id))!.messageId).not.toBeNull();
        expect((await download(channelPath(claimed.id), owner.token)).bytes.toString()).toBe("claimed");
        expect(await rowOf(young.id)).toBeDefined();
        expect((await download(channelPath(young.id), owner.token)).bytes.toString()).toBe("young");
      });

      it("runs as the maintenance job in the queue", async () => {
        const user = await registerUser(api);
        const file = await stage(user, "forgotten");
        server.clock.advance(25 * HOUR_MS);
        await server.app.deps.jobs.enqueue(fileJobs.pruneStaged, {});
        await until(async () => ((await rowOf(file.id)) ? undefined : true), "the prune job to remove the file");
      });
    });

    async function uploadAs(user: RegisteredUser, filename: string, contentType: string, content: Buffer) {
      const response = await upload(user.token, [{ name: "file", filename, contentType, content }]);
      expectStatus(response, 201);
      return response.body.data as AttachmentRecord;
    }
  });
}
