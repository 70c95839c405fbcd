// The REST door: trpc-to-openapi serves each procedure at its `/api/v1/...` path. Around it we
// add what the API document asks and the adapter does not do: bodies read by us (any JSON
// charset, raw bytes kept), the contract's success statuses (201, 204), and error bodies in
// the document's Laravel shape instead of the adapter's own.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { TRPCError } from "@trpc/server";
import { createOpenApiNodeHttpHandler } from "trpc-to-openapi";
import type { AppRouter } from "../../routers/index.ts";
import { createHttpContext, type RequestContext } from "../context.ts";
import type { Deps } from "../deps.ts";
import { procedureMetas } from "../trpc.ts";
import { restError } from "./rest-errors.ts";

/** Success statuses by procedure path, from each procedure's meta. */
function successStatuses(router: AppRouter): Map<string, number> {
  return new Map(
    procedureMetas(router).flatMap(({ path, meta }) =>
      meta.successStatus ? [[path, meta.successStatus] as const] : [],
    ),
  );
}

export function createRestHandler(deps: Deps, router: AppRouter) {
  const statuses = successStatuses(router);
  const failures = new WeakMap<IncomingMessage, TRPCError>();

  const handler = createOpenApiNodeHttpHandler({
    router,
    createContext: ({ req }: { req: IncomingMessage }) => createHttpContext(deps, req),
    responseMeta: ({ ctx, paths, errors }) => {
      const context = ctx as RequestContext | undefined;
      const headers = { ...context?.response.headers };
      const firstError = errors[0];
      if (firstError) {
        const mapped = restError(firstError);
        return { status: mapped.status, headers: { ...headers, ...mapped.headers } };
      }
      const status = context?.response.status ?? statuses.get(paths?.[0] ?? "") ?? 200;
      return { status, headers };
    },
    onError: ({ error, req }) => {
      failures.set(req, error);
      if (error.code === "INTERNAL_SERVER_ERROR") deps.logger.error({ err: error.cause ?? error }, "request failed");
    },
  });

  return async (req: IncomingMessage & { body?: unknown }, res: ServerResponse) => {
    const end = res.end.bind(res) as (chunk?: unknown) => ServerResponse;
    res.end = ((chunk?: unknown) => {
      const failure = failures.get(req);
      if (failure) return end(JSON.stringify(restError(failure).body));
      if (res.statusCode === 204) {
        res.removeHeader("Content-Type");
        return end();
      }
      return end(chunk);
    }) as ServerResponse["end"];
    await handler(req, res);
  };
}
