// Where attachment bytes live. Services see only this seam; the driver (local disk or an S3
// bucket) is chosen from config at start-up (server/storage/index.ts).
import type { Readable } from "node:stream";

export type StoredObject = { body: Readable; size: number };

export interface FileStorage {
  /**
   * Stores the bytes under `key`. A stream is read to its end; when it fails (or is destroyed)
   * midway, put rejects and nothing is left under `key`. `size` is passed when known up front.
   */
  put(key: string, content: Readable | Buffer, meta: { contentType: string; size?: number }): Promise<void>;
  /** The object's bytes as a stream; FileNotStoredError when there is none. */
  get(key: string): Promise<StoredObject>;
  /** Removes the object; removing one that is not there is not an error. */
  delete(key: string): Promise<void>;
  /** Releases connections (the S3 client's keep-alive sockets). */
  close(): void;
}

/** A row names a key the driver does not have (deleted meanwhile, or lost). */
export class FileNotStoredError extends Error {
  override name = "FileNotStoredError";
  constructor(key: string) {
    super(`no stored object under ${key}`);
  }
}
