// STORAGE_DRIVER=local: one file per object under DATA_DIR/files/<key>. Bytes are written to a
// temporary name beside the target and renamed into place, so a reader never sees half a file
// and a failed upload leaves nothing behind under its key.
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { FileNotStoredError, type FileStorage, type StoredObject } from "./file-storage.ts";

// Keys are made by us (services/files), never by a client; this only guards the file system
// against a programming mistake such as a key with "..".
const SAFE_KEY = /^[A-Za-z0-9_-]+(\/[A-Za-z0-9_-]+)*$/;

export class LocalFileStorage implements FileStorage {
  constructor(private readonly root: string) {}

  private pathOf(key: string): string {
    if (!SAFE_KEY.test(key)) throw new Error(`unsafe storage key: ${key}`);
    return path.join(this.root, key);
  }

  async put(key: string, content: Readable | Buffer): Promise<void> {
    const target = this.pathOf(key);
    await mkdir(path.dirname(target), { recursive: true });
    const temporary = `${target}.${randomBytes(6).toString("hex")}.partial`;
    const file = Buffer.isBuffer(content) ? undefined : createWriteStream(temporary, { flags: "wx" });
    try {
      if (file) await pipeline(content as Readable, file);
      else await writeFile(temporary, content, { flag: "wx" });
      await rename(temporary, target);
    } catch (error) {
      // The file may still be opening when the source fails: remove it once it is closed, or
      // it would appear after the removal.
      if (file && !file.closed) await new Promise<void>((resolve) => file.once("close", () => resolve()));
      await rm(temporary, { force: true });
      throw error;
    }
  }

  async get(key: string): Promise<StoredObject> {
    const file = this.pathOf(key);
    const stats = await stat(file).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") throw new FileNotStoredError(key);
      throw error;
    });
    return { body: createReadStream(file), size: stats.size };
  }

  async delete(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  close(): void {}
}
