// The REST door: each procedure with an `openapi` meta is served at its `/api/v1/...` path, as
// trpc-to-openapi's node adapter does, and with its pieces (route table, query reading, the
// coercion of query strings). Around it we add what the API document asks and the adapter does
// not do: bodies read by us (any JSON charset, raw bytes kept; server/http/host.ts), the
// contract's success statuses (201, 204), and error bodies in the document's Laravel shape.
//
// Not createOpenApiNodeHttpHandler itself: on every call it built a WHATWG Request (headers,
// URL, a body stream, an AbortSignal) only to read its signal, which nothing here uses, and
// re-walked the input schema; that was about 250 µs of a post's CPU. Here the Node request goes
// to tRPC's procedure call as it is (callTRPCProcedure, as the WebSocket door calls it: no caller
// proxy built per request), and each procedure's schema is looked at once.
import type { IncomingMessage, ServerResponse } from "node:http";
import { callTRPCProcedure, TRPCError } from "@trpc/server";
import {
  acceptsRequestBody,
  coerceSchema,
  createProcedureCache,
  generateOpenApiDocument,
  getBody,
  getErrorFromUnknown,
  getInputOutputParsers,
  getQuery,
  instanceofZodTypeLikeVoid,
  instanceofZodTypeObject,
  instanceofZodTypeOptional,
  normalizePath,
  unwrapZodType,
  zodSupportsCoerce,
  type OpenApiMethod,
  type OpenApiProcedure,
  type OpenApiRouter,
} from "trpc-to-openapi";
import { ZodArray } from "zod/v4";
import type { AppRouter } from "../../routers/index.ts";
import { createHttpContext, type RequestContext } from "../context.ts";
import type { Deps } from "../deps.ts";
import { isSafeText } from "../input-text.ts";
import { AppError } from "../errors.ts";
import { appErrorToTRPC } from "../trpc-errors.ts";
import { checkCallerFirst, procedureMetas } from "../trpc.ts";
import { restError } from "./rest-errors.ts";

/** Success statuses by procedure path, from each procedure's meta. */
function successStatuses(router: AppRouter): Map<string, number> {
  return new Map(
    procedureMetas(router).flatMap(({ path, meta }) =>
      meta.successStatus ? [[path, meta.successStatus] as const] : [],
    ),
  );
}

/** What the adapter derived from a procedure's input schema on every call, derived once. */
type InputShape = {
  /** z.void() and the like: the procedure takes no input. */
  takesNoInput: boolean;
  /** Keys whose schema is an array (a single query value becomes a one-element array). */
  arrayKeys: string[];
};

function inputShapeOf(procedure: OpenApiProcedure): InputShape {
  const { inputParser } = getInputOutputParsers(procedure);
  const schema = unwrapZodType(inputParser, true);
  const arrayKeys: string[] = [];
  if (zodSupportsCoerce && instanceofZodTypeObject(schema)) {
    for (const [key, shape] of Object.entries(schema.shape)) {
      const isArray =
        shape instanceof ZodArray || (instanceofZodTypeOptional(shape) && shape.unwrap() instanceof ZodArray);
      if (isArray) arrayKeys.push(key);
    }
    // Query strings become numbers, booleans and dates where the schema says so (idempotent:
    // it marks the schema's members, which are shared with the tRPC door, as trpc-to-openapi did).
    coerceSchema(schema);
  }
  return { takesNoInput: instanceofZodTypeLikeVoid(schema), arrayKeys };
}

type Answer = { status: number; headers: Record<string, string | string[] | undefined>; body: string | undefined };

function send(res: ServerResponse, { status, headers, body }: Answer): void {
  res.statusCode = status;
  res.setHeader("Content-Type", "application/json");
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) res.setHeader(name, value);
  }
  // 204: no body, and no type for it.
  if (status === 204) {
    res.removeHeader("Content-Type");
    res.end();
    return;
  }
  res.end(body);
}

/** Bodies the host could not take (malformed, too large, of another type), answered by the REST door. */
const bodyRefusals = new WeakMap<IncomingMessage, AppError>();

/**
 * Hands the REST door a request whose body was refused: it answers for the route first (404),
 * then for the caller (401, 403 on an authenticated procedure), then with the body's refusal.
 */
export function refuseRestBody(req: IncomingMessage, error: AppError): void {
  bodyRefusals.set(req, error);
}

export function createRestHandler(deps: Deps, router: AppRouter) {
  const openApiRouter = router as unknown as OpenApiRouter;
  // As the adapter does: an invalid router (a bad openapi meta) fails at start-up, not in use.
  if (process.env.NODE_ENV !== "production") {
    generateOpenApiDocument(openApiRouter, { title: "", version: "", baseUrl: "" });
  }
  const statuses = successStatuses(router);
  const procedureOf = createProcedureCache(openApiRouter);
  const inputShapes = new WeakMap<OpenApiProcedure, InputShape>();

  function failure(error: TRPCError, ctx: RequestContext | undefined): Answer {
    if (error.code === "INTERNAL_SERVER_ERROR") deps.logger.error({ err: error.cause ?? error }, "request failed");
    const mapped = restError(error);
    return {
      status: mapped.status,
      headers: { ...ctx?.response.headers, ...mapped.headers },
      body: JSON.stringify(mapped.body),
    };
  }

  async function answer(req: IncomingMessage & { body?: unknown }): Promise<Answer> {
    const method = req.method as OpenApiMethod | "HEAD";
    const target = req.url!;
    const url = new URL(target.startsWith("/") ? `http://127.0.0.1${target}` : target);
    const found = procedureOf(method, normalizePath(url.pathname));
    const procedure = found?.procedure;
    if (!procedure) {
      // Can be used for warm-up, as with the adapter.
      if (method === "HEAD") return { status: 204, headers: {}, body: undefined };
      return failure(new TRPCError({ code: "NOT_FOUND", message: "Not found" }), undefined);
    }
    let ctx: RequestContext | undefined;
    try {
      const refusedBody = bodyRefusals.get(req);
      if (refusedBody) throw appErrorToTRPC(refusedBody);
      const useBody = acceptsRequestBody(method);
      const contentType = req.headers["content-type"];
      if (useBody && !contentType?.startsWith("application/json")) {
        throw new TRPCError({
          code: "UNSUPPORTED_MEDIA_TYPE",
          message: contentType ? `Unsupported content-type "${contentType}` : "Missing content-type header",
        });
      }
      let shape = inputShapes.get(procedure.procedure);
      if (!shape) inputShapes.set(procedure.procedure, (shape = inputShapeOf(procedure.procedure)));
      let input: Record<string, unknown> | undefined;
      if (!shape.takesNoInput) {
        const fields: Record<string, unknown> = {
          ...(useBody ? await getBody(req) : getQuery(req, url)),
          ...decodedPathInput(found.pathInput),
        };
        if (!useBody) {
          for (const key of shape.arrayKeys) {
            if (fields[key] !== undefined && !Array.isArray(fields[key])) fields[key] = [fields[key]];
          }
        }
        input = fields;
      }
      ctx = await createHttpContext(deps, req);
      const data = await callTRPCProcedure({
        router,
        path: procedure.path,
        getRawInput: async () => input,
        ctx,
        type: procedure.procedure._def.type,
        signal: undefined,
        batchIndex: 0,
      });
      return {
        status: ctx.response.status ?? statuses.get(procedure.path) ?? 200,
        headers: { ...ctx.response.headers },
        body: JSON.stringify(data),
      };
    } catch (cause) {
      // Refused before the procedure ran (its body's type, size or JSON): a caller who may not
      // call it at all hears that first (401, 403), as every bearer endpoint answers.
      if (ctx === undefined) {
        try {
          ctx = await createHttpContext(deps, req);
          checkCallerFirst(procedure.procedure, ctx);
        } catch (refusal) {
          return failure(getErrorFromUnknown(refusal instanceof AppError ? appErrorToTRPC(refusal) : refusal), ctx);
        }
      }
      return failure(getErrorFromUnknown(cause), ctx);
    }
  }

  return async (req: IncomingMessage & { body?: unknown }, res: ServerResponse) => {
    send(res, await answer(req));
  };
}

/**
 * Path parameters as the client meant them: percent-decoded (an emoji in a reaction's path).
 * One that does not decode, or decodes to text no record can hold (a NUL), stays as it came:
 * it names no record (404), or the procedure's input check answers it.
 */
function decodedPathInput(pathInput: Record<string, string>): Record<string, string> {
  const decoded: Record<string, string> = {};
  for (const [key, value] of Object.entries(pathInput)) {
    decoded[key] = value;
    try {
      const text = decodeURIComponent(value);
      if (isSafeText(text)) decoded[key] = text;
    } catch {
      // Malformed percent-encoding: kept as it came.
    }
  }
  return decoded;
}
