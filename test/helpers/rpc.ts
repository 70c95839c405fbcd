import { expect } from "vitest";
import { TRPCClientError } from "@chat-service/client";

/** The rejection of a typed-client call, which must be a TRPCClientError (to read `data.code`). */
export async function rejectionOf(promise: Promise<unknown>): Promise<TRPCClientError<any>> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(TRPCClientError);
  return error as TRPCClientError<any>;
}
