// The storage driver named by STORAGE_DRIVER, built once at start-up (server/app.ts).
import path from "node:path";
import { ConfigError, type Config } from "../config.ts";
import type { FileStorage } from "./file-storage.ts";
import { LocalFileStorage } from "./local.ts";
import { S3FileStorage } from "./s3.ts";

export type { FileStorage } from "./file-storage.ts";

export function createFileStorage(config: Config): FileStorage {
  if (config.storage.driver === "local") return new LocalFileStorage(path.join(config.dataDir, "files"));
  const { bucket, ...s3 } = config.storage.s3;
  if (!bucket) throw new ConfigError("Invalid configuration: S3_BUCKET must be set when STORAGE_DRIVER is s3");
  return new S3FileStorage({ bucket, ...s3 });
}
