// STORAGE_DRIVER=s3: objects in one bucket of AWS S3 or an S3-compatible server (MinIO, R2,
// Ceph...). A stream of unknown length goes up through lib-storage's Upload (multipart above
// 5 MiB, aborted when the stream fails, so no partial object remains); a buffer in one PutObject.
import {
  DeleteObjectCommand,
  GetObjectCommand,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import type { Readable } from "node:stream";
import { FileNotStoredError, type FileStorage, type StoredObject } from "./file-storage.ts";

export type S3Settings = {
  bucket: string;
  endpoint: string | undefined;
  region: string | undefined;
  accessKeyId: string | undefined;
  secretAccessKey: string | undefined;
};

export class S3FileStorage implements FileStorage {
  private readonly client: S3Client;
  private readonly bucket: string;

  constructor(settings: S3Settings) {
    this.bucket = settings.bucket;
    this.client = new S3Client({
      region: settings.region ?? "us-east-1",
      endpoint: settings.endpoint,
      // S3-compatible servers are addressed by host name alone: bucket in the path, not in a
      // sub-domain that would not resolve.
      forcePathStyle: Boolean(settings.endpoint),
      // Without explicit keys the SDK's default chain applies (environment, instance role).
      credentials:
        settings.accessKeyId && settings.secretAccessKey
          ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey }
          : undefined,
      // The SDK's default since 3.729 adds CRC checksums (as aws-chunked trailers) to every
      // upload, which many S3-compatible servers refuse; send them only where S3 requires them.
      ...(settings.endpoint && {
        requestChecksumCalculation: "WHEN_REQUIRED" as const,
        responseChecksumValidation: "WHEN_REQUIRED" as const,
      }),
    });
  }

  async put(key: string, content: Readable | Buffer, meta: { contentType: string; size?: number }): Promise<void> {
    if (Buffer.isBuffer(content)) {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: content,
          ContentType: meta.contentType,
          ContentLength: content.length,
        }),
      );
      return;
    }
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: content, ContentType: meta.contentType },
      leavePartsOnError: false,
    });
    await upload.done();
  }

  async get(key: string): Promise<StoredObject> {
    try {
      const object = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      // In Node the SDK's body is an http.IncomingMessage (a Readable) with SDK helpers mixed in.
      return { body: object.Body as Readable, size: object.ContentLength ?? 0 };
    } catch (error) {
      if (
        error instanceof NoSuchKey ||
        (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404)
      ) {
        throw new FileNotStoredError(key);
      }
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  close(): void {
    this.client.destroy();
  }
}
