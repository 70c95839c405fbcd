// A real S3-compatible server for tests, on 127.0.0.1 with a random port and its objects in a
// temporary directory (@20minutes/s3rver: S3's REST API with signature checks, multipart
// uploads included). STORAGE_DRIVER=s3 tests point S3_ENDPOINT at it.
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import S3rver from "@20minutes/s3rver";

export type FakeS3 = {
  endpoint: string;
  bucket: string;
  /** The service's S3_* variables for this server. */
  env: Record<string, string>;
  /** The key of every object in the bucket. */
  keys(): Promise<string[]>;
  stop(): Promise<void>;
};

const OBJECT_SUFFIX = "._S3rver_object";

// s3rver's one account.
const ACCESS_KEY_ID = "S3RVER";
const SECRET_ACCESS_KEY = "S3RVER";

export async function startFakeS3(bucket = "chat-attachments"): Promise<FakeS3> {
  const directory = await mkdtemp(path.join(tmpdir(), "chat-s3-"));
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    env: {
      STORAGE_DRIVER: "s3",
      S3_ENDPOINT: endpoint,
      S3_BUCKET: bucket,
      S3_ACCESS_KEY_ID: ACCESS_KEY_ID,
      S3_SECRET_ACCESS_KEY: SECRET_ACCESS_KEY,
      S3_REGION: "us-east-1",
    },
    async keys() {
      // Read from the server's own store (objects are files named <key>._S3rver_object).
      // Parts of multipart uploads are not objects and are left out: s3rver does not implement
      // AbortMultipartUpload, so an aborted upload's parts stay in its store (real S3 drops them).
      const root = path.join(directory, bucket);
      const entries = await readdir(root, { recursive: true, withFileTypes: true });
      return entries
        .filter((entry) => entry.isFile() && entry.name.endsWith(OBJECT_SUFFIX))
        .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)).slice(0, -OBJECT_SUFFIX.length));
    },
    async stop() {
      server.httpServer?.closeAllConnections();
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
