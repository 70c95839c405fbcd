// Types for the parts of @20minutes/s3rver (a maintained fork of s3rver) the tests use.
declare module "@20minutes/s3rver" {
  import type { AddressInfo } from "node:net";
  import type { Server } from "node:http";

  type Options = {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    configureBuckets?: { name: string }[];
  };

  class S3rver {
    constructor(options?: Options);
    httpServer: Server | undefined;
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
  }
  export = S3rver;
}
