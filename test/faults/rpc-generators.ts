// tRPC cases drawn from the router (appRouter's procedure list, the typed client's, with each
// procedure's zod input read as JSON Schema), for the two tRPC doors of the fault suite:
// - over HTTP: GET /trpc/<query>?input=…, POST /trpc/<mutation>, batches of either, raw bodies,
//   the wrong HTTP method, unknown procedures;
// - over WebSocket: request frames (queries, mutations, subscriptions) and batches pipelined on
//   long-lived sockets, malformed frames and request envelopes, connection params that cannot
//   be used, frames past the size limit.
// Each procedure's inputs: every field mutated as the REST generator mutates a body field (wrong
// types, out of range, oversized, NUL and lone surrogates, …), the input as a whole (scalars,
// arrays, 10,000 levels deep, unknown and prototype keys, 900 KiB), a stranger's private ids in
// place of the owner's, and inputs drawn by fast-check. Frames are written with the protocol's
// own vocabulary (server/http/trpc-ws-protocol.ts).
import fc from "fast-check";
import WebSocket from "ws";
import { z } from "zod";
import { appRouter } from "../../routers/index.ts";
import { jsonNestsDeeperThan, MAX_JSON_DEPTH, startsWithJsonArray } from "../../server/http/json-limits.ts";
import { MAX_BATCH, MAX_PAYLOAD_BYTES } from "../../server/http/trpc-websocket.ts";
import {
  clientFrames,
  PING,
  PONG,
  trpcSocketUrl,
  type ClientRequestMethod,
} from "../../server/http/trpc-ws-protocol.ts";
import {
  DESTRUCTIVE,
  deepArray,
  deepObject,
  enc,
  fieldMutations,
  firstBranch,
  foreignVariants,
  idKind,
  JOINS_BY_ID,
  leakIn,
  MISSING,
  raw,
  REVOKES_OWN_TOKEN,
  schemaValue,
  serialize,
  type Case,
  type Fixtures,
  type JsonSchema,
  type Operation,
  type Secret,
} from "./request-generators.ts";

// ---------------------------------------------------------------------------------------------
// Procedures and their inputs

export type Procedure = {
  path: string;
  type: ClientRequestMethod;
  /** The REST operation serving it, when it has one. */
  op: Operation | undefined;
  /** Its input's fields (JSON Schema of the zod input, as a client writes it). */
  properties: Record<string, JsonSchema>;
  destructive: boolean;
  revokesOwnToken: boolean;
};

export function proceduresOf(operations: Operation[]): Procedure[] {
  return Object.entries(appRouter._def.procedures as Record<string, any>).map(([path, procedure]) => {
    const op = operations.find((candidate) => candidate.procedure?.path === path);
    const properties: Record<string, JsonSchema> = {};
    for (const input of (procedure._def.inputs ?? []) as z.ZodType[]) {
      const schema = z.toJSONSchema(input, { io: "input", unrepresentable: "any" }) as JsonSchema;
      Object.assign(properties, firstBranch(schema).properties ?? {});
    }
    return {
      path,
      type: procedure._def.type as ClientRequestMethod,
      op,
      properties,
      destructive: op ? DESTRUCTIVE(op) : false,
      revokesOwnToken: REVOKES_OWN_TOKEN.has(path),
    };
  });
}

/** One input for one procedure, sent through both tRPC doors. */
export type RpcInput = {
  procedure: Procedure;
  label: string;
  /** undefined: no input at all. */
  input: unknown;
  /** Ids of a stranger's private place where the procedure looks its place up: only an error may answer. */
  foreign?: boolean;
};

const ID_OF_KIND: Record<string, (fx: Fixtures) => string> = {
  workspace: (fx) => fx.workspaceId,
  channel: (fx) => fx.channelId,
  conversation: (fx) => fx.conversationId,
  room: (fx) => fx.roomId,
};

/** The owner's real input: the REST baseline's when the procedure is an operation, else from the field names. */
export function baselineInput(procedure: Procedure, restBaseline: Case | undefined, fx: Fixtures) {
  const fromRest = (restBaseline?.trpcInput ?? {}) as Record<string, unknown>;
  const input: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(procedure.properties)) {
    if (name in fromRest) input[name] = fromRest[name];
    else if (name === "lastEventId") continue;
    else if (procedure.op)
      continue; // An optional field the REST baseline leaves out.
    else {
      const kind = idKind(undefined, name);
      input[name] = kind && ID_OF_KIND[kind] ? ID_OF_KIND[kind](fx) : schemaValue(schema);
    }
  }
  return input;
}

/** Whole inputs, whatever the procedure: the wrong shape, too deep, too big, unknown keys. */
function wholeInputs(baseline: Record<string, unknown>): [string, unknown][] {
  const json = serialize(baseline);
  const withKeys = (keys: string) => raw(json === "{}" ? `{${keys}}` : `{${keys},${json.slice(1)}`);
  return [
    ["no-input", undefined],
    ["null", null],
    ["true", true],
    ["number", 42],
    ["string", "x"],
    ["empty-string", ""],
    ["huge-string-100k", "x".repeat(100_000)],
    ["empty-array", []],
    ["array-of-baseline", [baseline]],
    ["empty-object", {}],
    ["nested-arrays", [[[[]]]]],
    ["deep-object-10000", raw(deepObject(10_000))],
    ["deep-array-10000", raw(deepArray(10_000))],
    ["deep-field-10000", { ...baseline, nested: raw(deepObject(10_000)) }],
    ["deep-object-65", raw(deepObject(65))],
    ["deep-object-63", raw(deepObject(63))],
    ["deep-array-100000", raw(deepArray(100_000))],
    ["unknown-keys", { ...baseline, unknown_key: "x", "": 1, "\u0000": "nul", "\ud800": 2, isAdmin: true }],
    [
      "many-unknown-keys-5000",
      { ...baseline, ...Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, i])) },
    ],
    ["proto-keys", withKeys('"__proto__":{"isAdmin":true},"constructor":{"prototype":{"isAdmin":true}}')],
    ["prototype-named-keys", { ...baseline, valueOf: 1, toString: "x", hasOwnProperty: null, toJSON: {} }],
    [
      "duplicate-keys",
      withKeys(
        Object.keys(baseline)
          .map((key) => `${JSON.stringify(key)}:{"x":1}`)
          .join(",") || '"a":1,"a":2',
      ),
    ],
    ["oversized-900KiB", { ...baseline, padding: "x".repeat(900 * 1024) }],
  ];
}

/** Fields that hold ids, and ids of the wrong kind or with a suffix for them. */
function idMutations(name: string, value: unknown, fx: Fixtures): [string, unknown][] {
  if (typeof value !== "string" || !/_[0-9A-Z]{20,}$/.test(value)) return [];
  const others = [fx.workspaceId, fx.channelId, fx.conversationId, fx.channelMessageId, fx.roomId, fx.patId];
  const otherKind = others.find((id) => id.split("_")[0] !== value.split("_")[0]) ?? "x";
  return [
    [`${name}=other-kind-id`, otherKind],
    [`${name}=id+suffix`, `${value}x`],
    [`${name}=id-lowercase`, value.toLowerCase()],
    [`${name}=id-truncated`, value.slice(0, -1)],
  ];
}

/** Valid and invalid positions for a subscription's lastEventId. */
const LAST_EVENT_IDS = [undefined, "0", "1", "999999999999999999"];

export function rpcInputs(
  procedures: Procedure[],
  restBaselines: Map<string, Case>,
  fx: Fixtures,
  seed: number,
  drawsPerProcedure = 12,
): RpcInput[] {
  const inputs: RpcInput[] = [];
  const draws = fc.sample(
    fc.record({
      where: fc.nat(3),
      index: fc.nat(),
      key: fc.string({ unit: "binary", maxLength: 12 }),
      json: fc.oneof(
        fc.jsonValue({ maxDepth: 4 }),
        fc.string({ unit: "binary", maxLength: 40 }),
        fc.string({ unit: "grapheme", maxLength: 40 }),
        fc.integer(),
        fc.double(),
        fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map((value) => raw(value.toString())),
      ),
    }),
    { seed, numRuns: procedures.length * drawsPerProcedure },
  );
  procedures.forEach((procedure, p) => {
    const baseline = baselineInput(procedure, procedure.op && restBaselines.get(procedure.op.name), fx);
    const add = (label: string, input: unknown, foreign?: boolean) =>
      inputs.push({ procedure, label, input, ...(foreign && { foreign: true }) });
    add("baseline", baseline);
    const fields = Object.keys(procedure.properties);
    for (const name of fields) {
      for (const [label, value] of fieldMutations(procedure.properties[name]!)) {
        const input = { ...baseline };
        if (value === MISSING) delete input[name];
        else input[name] = value;
        add(`${name}=${label}`, input);
      }
      for (const [label, value] of idMutations(name, baseline[name], fx)) add(label, { ...baseline, [name]: value });
    }
    for (const [label, input] of wholeInputs(baseline)) add(label, input);

    // A stranger's private places: where the procedure looks its place up (the path of its
    // operation, every id of a live-only procedure), and where it only refers to one.
    if (!JOINS_BY_ID(procedure.op?.path)) {
      const template = procedure.op?.path;
      const lookedUp = procedure.op ? procedure.op.pathParams.map((parameter) => parameter.name) : fields;
      const referred = fields.filter((name) => !lookedUp.includes(name));
      for (const variant of foreignVariants(fx, template, lookedUp)) {
        const lastEventIds = procedure.type === "subscription" ? LAST_EVENT_IDS : [undefined];
        // A live-only procedure's ids are alternatives (a channel, or a conversation): the
        // owner's place of another kind is left out, or it would be the one answered.
        const input = { ...baseline };
        if (!procedure.op) for (const name of variant.elsewhere) delete input[name];
        for (const lastEventId of lastEventIds) {
          add(
            `${variant.label}${lastEventId === undefined ? "" : `,lastEventId=${lastEventId}`}`,
            { ...input, ...variant.values, ...(lastEventId !== undefined && { lastEventId }) },
            true,
          );
        }
      }
      for (const variant of foreignVariants(fx, template, referred)) {
        add(`${variant.label}(referred)`, {
          ...baseline,
          ...variant.values,
          ...("q" in procedure.properties && { q: fx.marker }),
        });
      }
    }

    for (let i = 0; i < drawsPerProcedure; i++) {
      const draw = draws[p * drawsPerProcedure + i]!;
      if (draw.where === 0 && fields.length) {
        const name = fields[draw.index % fields.length]!;
        add(`random.${name}#${i}`, { ...baseline, [name]: draw.json });
      } else if (draw.where === 1) {
        add(`random.extra-key#${i}`, { ...baseline, [draw.key]: draw.json });
      } else {
        add(`random.whole#${i}`, draw.json);
      }
    }
  });
  return inputs;
}

/** Names next to each procedure's that the router does not have: typos, prefixes, prototype members. */
export function unknownProcedureNames(procedures: Procedure[]): string[] {
  const known = new Set(procedures.map((procedure) => procedure.path));
  const names = new Set<string>([
    "",
    "__proto__",
    "constructor",
    "toString",
    "hasOwnProperty",
    "constructor.prototype",
    "_def",
    "_def.procedures",
    "createCaller",
    `${"a".repeat(5000)}`,
    "a\u0000b",
    "..",
    "./me.get",
  ]);
  for (const procedure of procedures) {
    const [namespace] = procedure.path.split(".");
    names.add(`${procedure.path}x`);
    names.add(`${procedure.path}.`);
    names.add(`${procedure.path}.extra`);
    names.add(procedure.path.toUpperCase());
    names.add(`${namespace}`);
    names.add(`${namespace}._def`);
    names.add(`${namespace}.__proto__`);
    names.add(` ${procedure.path}`);
  }
  return [...names].filter((name) => !known.has(name));
}

// ---------------------------------------------------------------------------------------------
// tRPC over HTTP

export type HttpRpcCase = {
  /** GET, POST (single calls), batch, or another HTTP method. */
  door: "get" | "post" | "batch" | "other-method";
  procedure: string;
  label: string;
  method: string;
  url: string;
  body?: () => string | Buffer;
  contentType?: string;
  foreign?: boolean;
  destructive: boolean;
  revokesOwnToken: boolean;
};

/** GET URLs past this are left to the other doors: Node refuses the head (431) and drops the socket mid-write. */
export const MAX_GET_URL = 12_000;

const queryUrl = (path: string, input: unknown) =>
  `/trpc/${enc(path)}${input === undefined ? "" : `?input=${enc(serialize(input))}`}`;

/**
 * Single calls over HTTP: a share of the inputs drawn from the seed (every baseline and every
 * stranger's place among them); the WebSocket door gets them all.
 */
export function httpSingleCases(inputs: RpcInput[], seed: number, share = 1): HttpRpcCase[] {
  const cases: HttpRpcCase[] = [];
  const draws = fc.sample(fc.nat(999), { seed, numRuns: Math.max(1, inputs.length) });
  for (const [i, { procedure, label, input, foreign }] of inputs.entries()) {
    if (!foreign && label !== "baseline" && draws[i]! >= share * 1000) continue;
    const base = {
      procedure: procedure.path,
      label,
      destructive: procedure.destructive,
      revokesOwnToken: procedure.revokesOwnToken,
      ...(foreign && { foreign: true }),
    };
    if (procedure.type === "query") {
      // Encoded, the URL is at least as long as the input's JSON: skip the long ones unencoded.
      if (input !== undefined && serialize(input).length > MAX_GET_URL) continue;
      const url = queryUrl(procedure.path, input);
      if (url.length <= MAX_GET_URL) cases.push({ ...base, door: "get", method: "GET", url });
    } else if (procedure.type === "mutation") {
      cases.push({
        ...base,
        door: "post",
        method: "POST",
        url: `/trpc/${procedure.path}`,
        body: () => (input === undefined ? "" : serialize(input)),
        contentType: "application/json",
      });
    }
  }
  return cases;
}

/** Per procedure: raw bodies and query strings tRPC must refuse, the wrong methods, 1.5 MiB. */
export function httpRawCases(procedures: Procedure[]): HttpRpcCase[] {
  const cases: HttpRpcCase[] = [];
  const garbage: [string, string | Buffer, string?][] = [
    ["malformed-json", "{"],
    ["truncated-json", '{"id":"a'],
    ["trailing-garbage", "{}x"],
    ["nul-string", '{"workspace_id":"a\\u0000b","id":"\\u0000","name":"\\u0000"}'],
    ["lone-surrogate", '{"workspace_id":"\\ud800","id":"\\udfff","name":"\\ud800"}'],
    ["ids-2^31", '{"id":2147483648,"user_id":2147483648,"participant_user_id":9223372036854775808}'],
    ["deep-object-10000", deepObject(10_000)],
    ["deep-array-100000", deepArray(100_000)],
    ["text-plain", "{}", "text/plain"],
    ["octet-stream", Buffer.from([0, 1, 2, 0xff]), "application/octet-stream"],
    ["urlencoded", "a=1&b=%00", "application/x-www-form-urlencoded"],
    ["invalid-utf8", Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xed, 0xa0, 0x80, 0x22, 0x7d])],
    ["utf8-bom", "\ufeff{}"],
    ["oversized-1.5MiB", `{"padding":"${"x".repeat(1536 * 1024)}"}`],
  ];
  const rawGets: [string, string][] = [
    ["get-malformed-input", "?input=%7B"],
    ["get-lone-surrogate-input", "?input=%ED%A0%80"],
    ["get-invalid-percent", "?input=%ZZ"],
    ["get-input-twice", "?input=%7B%7D&input=1"],
    ["get-deep-input-3000", `?input=${"%5B".repeat(3000)}`],
    ["get-connection-params-junk", "?connectionParams=%7B%22token%22%3A42%7D"],
  ];
  for (const procedure of procedures) {
    if (procedure.type === "subscription") continue;
    const base = {
      procedure: procedure.path,
      destructive: procedure.destructive,
      revokesOwnToken: procedure.revokesOwnToken,
    };
    const url = `/trpc/${procedure.path}`;
    if (procedure.type === "mutation") {
      for (const [label, bytes, contentType] of garbage) {
        cases.push({
          ...base,
          door: "post",
          label,
          method: "POST",
          url,
          body: () => bytes,
          contentType: contentType ?? "application/json",
        });
      }
      cases.push({ ...base, door: "get", label: "wrong-method:GET", method: "GET", url: `${url}?input=%7B%7D` });
    } else {
      for (const [label, query] of rawGets)
        cases.push({ ...base, door: "get", label, method: "GET", url: url + query });
      cases.push({
        ...base,
        door: "post",
        label: "wrong-method:POST",
        method: "POST",
        url,
        body: () => "{}",
        contentType: "application/json",
      });
    }
    for (const method of ["PUT", "PATCH", "DELETE", "OPTIONS"]) {
      cases.push({ ...base, door: "other-method", label: `method=${method}`, method, url });
    }
  }
  return cases;
}

export function httpUnknownProcedureCases(names: string[]): HttpRpcCase[] {
  return names.flatMap((name): HttpRpcCase[] => {
    const base = { procedure: name, destructive: false, revokesOwnToken: false, label: "unknown-procedure" };
    const url = `/trpc/${enc(name)}`;
    return [
      { ...base, door: "get", method: "GET", url: `${url}?input=%7B%7D` },
      { ...base, door: "post", method: "POST", url, body: () => "{}", contentType: "application/json" },
    ];
  });
}

/** Batches (?batch=1) of 2 to 8 calls of one type, drawn from the inputs; and batches that cannot work. */
export function httpBatchCases(inputs: RpcInput[], procedures: Procedure[], seed: number, share = 0.5): HttpRpcCase[] {
  const usable = inputs.filter(
    (input) => input.procedure.type !== "subscription" && !input.procedure.destructive && !input.foreign,
  );
  const order = fc.sample(fc.nat(), { seed, numRuns: usable.length });
  const shuffled = usable
    .map((input, i) => ({ input, key: order[i]! }))
    .sort((a, b) => a.key - b.key)
    .map(({ input }) => input);
  const byType = {
    query: shuffled.filter((input) => input.procedure.type === "query"),
    mutation: shuffled.filter((input) => input.procedure.type === "mutation"),
  };
  const cases: HttpRpcCase[] = [];
  const batchBody = (members: RpcInput[]) =>
    `{${members
      .map((member, i) => (member.input === undefined ? undefined : `"${i}":${serialize(member.input)}`))
      .filter(Boolean)
      .join(",")}}`;
  for (const type of ["query", "mutation"] as const) {
    const pool = byType[type].slice(0, Math.floor(byType[type].length * share));
    for (let at = 0, n = 0; at < pool.length; n++) {
      const size = 2 + ((order[n % order.length] ?? 0) % 7);
      const members = pool.slice(at, at + size);
      at += size;
      const paths = members.map((member) => member.procedure.path).join(",");
      const label = `batch:${members.map((member) => member.label).join("|")}`;
      const base = { procedure: paths, label, destructive: false, revokesOwnToken: false };
      if (type === "query") {
        const url = `/trpc/${paths}?batch=1&input=${enc(batchBody(members))}`;
        if (url.length <= MAX_GET_URL) cases.push({ ...base, door: "batch", method: "GET", url });
      } else {
        const body = batchBody(members);
        cases.push({
          ...base,
          door: "batch",
          method: "POST",
          url: `/trpc/${paths}?batch=1`,
          body: () => body,
          contentType: "application/json",
        });
      }
    }
  }
  // Batches that cannot work: types mixed, inputs that do not match the calls, hundreds of calls.
  const query = procedures.find((procedure) => procedure.path === "me.get")!;
  const mutation = procedures.find((procedure) => procedure.path === "messages.typing")!;
  const odd: [string, string, string, string?][] = [
    ["batch:mixed-types", "POST", `/trpc/${query.path},${mutation.path}?batch=1`, "{}"],
    ["batch:mixed-types-get", "GET", `/trpc/${query.path},${mutation.path}?batch=1&input=%7B%7D`],
    ["batch:input-array", "POST", `/trpc/${mutation.path},${mutation.path}?batch=1`, "[{},{}]"],
    ["batch:input-scalar", "POST", `/trpc/${mutation.path},${mutation.path}?batch=1`, "1"],
    ["batch:input-keys-out-of-range", "POST", `/trpc/${mutation.path}?batch=1`, '{"5":{},"-1":{},"x":{}}'],
    ["batch:empty-path", "GET", "/trpc/?batch=1&input=%7B%7D"],
    ["batch:empty-members", "GET", `/trpc/,,${query.path},?batch=1&input=%7B%7D`],
    ["batch:not-1", "GET", `/trpc/${query.path},${query.path}?batch=true&input=%7B%7D`],
    ["batch:200-calls", "GET", `/trpc/${Array.from({ length: 200 }, () => query.path).join(",")}?batch=1`],
    ["batch:2000-calls", "GET", `/trpc/${Array.from({ length: 1500 }, () => "me.get").join(",")}?batch=1`],
    ["batch:mutation-60", "POST", `/trpc/${Array.from({ length: 60 }, () => mutation.path).join(",")}?batch=1`, "{}"],
    ["batch:unknown-member", "GET", `/trpc/${query.path},no.such?batch=1&input=%7B%7D`],
    ["batch:deep-input", "POST", `/trpc/${mutation.path},${mutation.path}?batch=1`, `{"0":${deepObject(10_000)}}`],
  ];
  for (const [label, method, url, body] of odd) {
    cases.push({
      door: "batch",
      procedure: "(batch)",
      label,
      method,
      url,
      destructive: false,
      revokesOwnToken: false,
      ...(body !== undefined && { body: () => body, contentType: "application/json" }),
    });
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------
// tRPC over WebSocket: the cases

export type WsAuth = "user" | "none" | "bogus";

export type WsCase = {
  /**
   * call: a query or mutation frame; subscription; batch: several requests in one frame;
   * malformed: a frame or envelope the host must refuse; params: connection params on a new
   * socket; oversized: a frame past MAX_PAYLOAD_BYTES on a new socket.
   */
  kind: "call" | "subscription" | "batch" | "malformed" | "params" | "oversized";
  procedure: string;
  label: string;
  /** The frame for request id `id` (a batch uses ids id … id + size - 1). */
  frame(id: number): string | Buffer;
  size: number;
  /** The answer may be `id: null` (malformed, too deep): sent on a socket one at a time. */
  serial: boolean;
  auth: WsAuth;
  foreign?: boolean;
  destructive: boolean;
  revokesOwnToken: boolean;
};

const INPUT_SLOT = "\u0001input-slot\u0001";
const INPUT_SLOT_JSON = JSON.stringify(INPUT_SLOT);

/** A request frame (clientFrames.request) whose input is written by serialize(): raw numbers, any depth. */
export function requestFrame(id: number, method: string, path: string, input: unknown): string {
  if (input === undefined) return clientFrames.request(id, method as ClientRequestMethod, path);
  return clientFrames
    .request(id, method as ClientRequestMethod, path, { input: INPUT_SLOT })
    .replace(INPUT_SLOT_JSON, () => serialize(input));
}

const nestsTooDeep = (text: string) =>
  jsonNestsDeeperThan(text, MAX_JSON_DEPTH + 2 + (startsWithJsonArray(text) ? 1 : 0));

/** Whether the host answers a text frame with `id: null` rather than by its id. */
export function answersWithNullId(text: string): boolean {
  if (nestsTooDeep(text)) return true;
  try {
    JSON.parse(text);
    return false;
  } catch {
    return true;
  }
}

/** A frame that is no valid request, sent on its own and harmless to the caller's account. */
function malformedCase(procedure: string, label: string, frame: WsCase["frame"]): WsCase {
  return wsCase({
    kind: "malformed",
    procedure,
    label,
    frame,
    serial: true,
    destructive: false,
    revokesOwnToken: false,
  });
}

function wsCase(
  partial: Omit<WsCase, "serial" | "size" | "auth"> & { size?: number; auth?: WsAuth; serial?: boolean },
): WsCase {
  const probe = partial.frame(1);
  return {
    size: 1,
    auth: "user",
    serial: typeof probe !== "string" || answersWithNullId(probe),
    ...partial,
  };
}

/** Every input as a frame of the procedure's own type. */
export function wsInputCases(inputs: RpcInput[]): WsCase[] {
  return inputs.map(({ procedure, label, input, foreign }): WsCase => {
    const text = requestFrame(1, procedure.type, procedure.path, input);
    // Past the 1 MiB frame limit: the host closes the socket (1009), so it gets one of its own.
    const oversized = Buffer.byteLength(text) > MAX_PAYLOAD_BYTES;
    return {
      kind: oversized ? "oversized" : procedure.type === "subscription" ? "subscription" : "call",
      procedure: procedure.path,
      label,
      frame: (id) => requestFrame(id, procedure.type, procedure.path, input),
      size: 1,
      // Written by serialize(), so valid JSON: only too deep an input is answered `id: null`.
      serial: oversized || nestsTooDeep(text),
      auth: "user",
      destructive: procedure.destructive,
      revokesOwnToken: procedure.revokesOwnToken,
      ...(foreign && { foreign: true }),
    };
  });
}

/** The wrong request type for each procedure, and names the router does not have. */
export function wsMethodCases(procedures: Procedure[], inputs: RpcInput[], unknownNames: string[]): WsCase[] {
  const cases: WsCase[] = [];
  const baselines = new Map(
    inputs.filter((input) => input.label === "baseline").map((input) => [input.procedure.path, input.input]),
  );
  const methods: ClientRequestMethod[] = ["query", "mutation", "subscription"];
  for (const procedure of procedures) {
    for (const method of methods) {
      if (method === procedure.type) continue;
      cases.push(
        wsCase({
          kind: method === "subscription" ? "subscription" : "call",
          procedure: procedure.path,
          label: `wrong-type:${method}`,
          frame: (id) => requestFrame(id, method, procedure.path, baselines.get(procedure.path)),
          destructive: false,
          revokesOwnToken: false,
        }),
      );
    }
  }
  unknownNames.forEach((name, i) => {
    const method = methods[i % methods.length]!;
    cases.push(
      wsCase({
        kind: method === "subscription" ? "subscription" : "call",
        procedure: name,
        label: `unknown-procedure:${method}`,
        frame: (id) => requestFrame(id, method, name, {}),
        destructive: false,
        revokesOwnToken: false,
      }),
    );
  });
  return cases;
}

/** Request envelopes the host must refuse (or answer), built from each procedure's baseline frame. */
export function wsMalformedCases(procedures: Procedure[], inputs: RpcInput[], seed: number): WsCase[] {
  const cases: WsCase[] = [];
  const baselines = new Map(
    inputs.filter((input) => input.label === "baseline").map((input) => [input.procedure.path, input.input]),
  );
  const cuts = fc.sample(fc.double({ min: 0.05, max: 0.95, noNaN: true }), {
    seed,
    numRuns: procedures.length * 3,
  });
  procedures.forEach((procedure, p) => {
    if (procedure.destructive || procedure.revokesOwnToken) return;
    const baselineFrame = (id: number) =>
      requestFrame(id, procedure.type, procedure.path, baselines.get(procedure.path));
    const request = (id: number) => JSON.parse(baselineFrame(id)) as Record<string, any>;
    const envelope = (label: string, change: (request: Record<string, any>) => unknown, binary = false) =>
      cases.push(
        malformedCase(procedure.path, label, (id) => {
          const text = JSON.stringify(change(request(id)));
          return binary ? Buffer.from(text) : text;
        }),
      );
    envelope("id=object", (r) => ({ ...r, id: { nested: r.id } }));
    envelope("id=array", (r) => ({ ...r, id: [r.id] }));
    envelope("id=true", (r) => ({ ...r, id: true }));
    envelope("id=null", (r) => ({ ...r, id: null }));
    envelope("id=missing", ({ id: _id, ...r }) => r);
    envelope("method=call", (r) => ({ ...r, method: "call" }));
    envelope("method=subscription.start", (r) => ({ ...r, method: "subscription.start" }));
    envelope("method=uppercase", (r) => ({ ...r, method: String(r.method).toUpperCase() }));
    envelope("method=number", (r) => ({ ...r, method: 1 }));
    envelope("params=missing", ({ params: _params, ...r }) => r);
    envelope("params=string", (r) => ({ ...r, params: procedure.path }));
    envelope("params=array", (r) => ({ ...r, params: [r.params] }));
    envelope("params.path=number", (r) => ({ ...r, params: { ...r.params, path: 42 } }));
    envelope("params.path=missing", (r) => ({ ...r, params: { input: r.params.input } }));
    envelope("params.lastEventId=number", (r) => ({ ...r, params: { ...r.params, lastEventId: 42 } }));
    envelope("jsonrpc=1.0", (r) => ({ ...r, jsonrpc: "1.0" }));
    envelope("batch-with-garbage", (r) => [r, "not a request"]);
    envelope("batch-with-null", (r) => [r, null]);
    envelope("binary-frame", (r) => r, true);
    for (let c = 0; c < 3; c++) {
      const cut = cuts[p * 3 + c]!;
      cases.push(
        malformedCase(procedure.path, `truncated@${cut.toFixed(2)}`, (id) => {
          const text = baselineFrame(id);
          return text.slice(0, Math.max(1, Math.floor(text.length * cut)));
        }),
      );
    }
    cases.push(malformedCase(procedure.path, "trailing-garbage", (id) => `${baselineFrame(id)}}x`));
    cases.push(malformedCase(procedure.path, "utf8-bom", (id) => `\ufeff${baselineFrame(id)}`));
  });
  for (const [label, text] of [
    ["not-json", "{not json"],
    ["scalar", "42"],
    ["string", '"text"'],
    ["null", "null"],
    ["empty-object", "{}"],
    ["deep-array-10000", deepArray(10_000)],
    ["deep-object-10000", deepObject(10_000)],
    ["unterminated-100000", "[".repeat(100_000)],
  ] as const) {
    cases.push(malformedCase("(frame)", label, () => text));
  }
  return cases;
}

/** Frames past MAX_PAYLOAD_BYTES (each on a socket of its own: the host closes it, 1009), for every eighth procedure. */
export function wsOversizedCases(procedures: Procedure[], inputs: RpcInput[]): WsCase[] {
  const baselines = new Map(
    inputs.filter((input) => input.label === "baseline").map((input) => [input.procedure.path, input.input]),
  );
  return procedures
    .filter((procedure, i) => i % 8 === 0 && !procedure.destructive && !procedure.revokesOwnToken)
    .map((procedure) => ({
      kind: "oversized" as const,
      procedure: procedure.path,
      label: "frame-1.1MiB",
      frame: (id: number) =>
        requestFrame(id, procedure.type, procedure.path, {
          ...(baselines.get(procedure.path) as Record<string, unknown>),
          padding: "x".repeat(1126 * 1024),
        }),
      size: 1,
      serial: true,
      auth: "user" as const,
      destructive: false,
      revokesOwnToken: false,
    }));
}

/** Batch frames of 2 to 10 requests drawn from the calls, and batches past MAX_BATCH. */
export function wsBatchCases(calls: WsCase[], seed: number, share = 0.3): WsCase[] {
  const usable = calls.filter(
    (call) => call.kind === "call" && !call.serial && !call.destructive && !call.foreign && call.auth === "user",
  );
  const sizes = fc.sample(fc.integer({ min: 2, max: 10 }), { seed, numRuns: usable.length });
  const pool = usable.slice(0, Math.floor(usable.length * share));
  const cases: WsCase[] = [];
  for (let at = 0, n = 0; at < pool.length; n++) {
    const members = pool.slice(at, at + sizes[n]!);
    at += members.length;
    cases.push(
      wsCase({
        kind: "batch",
        procedure: members.map((member) => member.procedure).join(","),
        label: `batch:${members.map((member) => member.label).join("|")}`,
        size: members.length,
        frame: (id) => `[${members.map((member, i) => member.frame(id + i) as string).join(",")}]`,
        destructive: false,
        revokesOwnToken: false,
      }),
    );
  }
  for (const size of [MAX_BATCH + 1, 500]) {
    cases.push(
      wsCase({
        kind: "batch",
        procedure: "me.get",
        label: `batch:over-limit-${size}`,
        size,
        frame: (id) =>
          `[${Array.from({ length: size }, (_, i) => clientFrames.request(id + i, "query", "me.get")).join(",")}]`,
        destructive: false,
        revokesOwnToken: false,
      }),
    );
  }
  return cases;
}

/** Connection params the host cannot use (each on a socket of its own), then one request on it. */
export function wsParamsCases(bogusTokens: string[]): WsCase[] {
  const params: [string, string | Buffer][] = [
    ...bogusTokens.map((token, i): [string, string] => [`bogus-token#${i}`, clientFrames.connectionParams({ token })]),
    ["no-token", clientFrames.connectionParams({})],
    ["data-string", JSON.stringify({ method: "connectionParams", data: "token" })],
    ["data-array", JSON.stringify({ method: "connectionParams", data: ["token"] })],
    ["data-number-values", JSON.stringify({ method: "connectionParams", data: { token: 42 } })],
    ["data-nested", JSON.stringify({ method: "connectionParams", data: { token: { value: "x" } } })],
    ["data-missing", JSON.stringify({ method: "connectionParams" })],
    ["data-deep-10000", `{"method":"connectionParams","data":${deepObject(10_000)}}`],
    ["data-huge", clientFrames.connectionParams({ token: "t".repeat(500_000) })],
    ["data-nul", clientFrames.connectionParams({ token: "a\u0000b" })],
    ["data-lone-surrogate", '{"method":"connectionParams","data":{"token":"\\ud800"}}'],
    ["method-other", JSON.stringify({ method: "query", data: { token: "x" } })],
    ["message-scalar", "42"],
    ["message-array", JSON.stringify([{ method: "connectionParams", data: {} }])],
    ["not-json", "token=abc"],
    ["binary", Buffer.from(clientFrames.connectionParams({ token: "x" }))],
    ["request-instead", clientFrames.request(1, "query", "me.get")],
  ];
  return params.map(([label, frame]) => ({
    kind: "params",
    procedure: "(connectionParams)",
    label,
    frame: () => frame,
    size: 1,
    serial: true,
    auth: "none",
    destructive: false,
    revokesOwnToken: false,
  }));
}

// ---------------------------------------------------------------------------------------------
// tRPC over WebSocket: the client

export type WsProblem = { kind: string; detail: string; frame: string; got: string };

/** What is wrong with one frame the server sent: a server error, a leak. */
export function frameProblem(text: string, secrets: readonly Secret[]): { kind: string; detail: string } | undefined {
  const leak = leakIn(text, secrets);
  if (leak) return { kind: "leak", detail: `the frame leaks ${leak}` };
  let frame: any;
  try {
    frame = JSON.parse(text);
  } catch {
    return { kind: "shape", detail: "a frame that is not JSON" };
  }
  const error = frame?.error;
  if (error && (error.data?.code === "INTERNAL_SERVER_ERROR" || error.data?.httpStatus >= 500 || error.code === -32603))
    return { kind: "5xx", detail: `${error.data?.code} ${error.message}` };
  return undefined;
}

type Pending = {
  ids: Set<number>;
  subscription: boolean;
  foreign: boolean;
  frames: string[];
  errors: number;
  data: number;
  started: number;
  resolve(): void;
};

/**
 * One socket to /trpc, signed in (or not) with connection params, that keeps many requests in
 * flight: each answer is matched to its request by id. A subscription that starts is stopped
 * at once (a stranger's that starts is left open: any event it then receives is a breach).
 * `serial()` sends a frame that may be answered with `id: null`, alone.
 */
export class WsLane {
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private nullWaiter: ((text: string) => void) | undefined;
  private serialQueue: Promise<void> = Promise.resolve();
  closeCode: number | undefined;
  readonly unexpected: { text: string; problem: { kind: string; detail: string } }[] = [];
  /** Data frames of subscriptions to a stranger's places, whenever they come. */
  foreignData = 0;
  private foreignIds = new Set<number>();

  private constructor(
    private readonly socket: WebSocket,
    private readonly secrets: readonly Secret[],
  ) {
    socket.on("message", (data, isBinary) => this.receive(data.toString(), isBinary));
    socket.on("close", (code) => {
      this.closeCode = code;
      for (const pending of this.pending.values()) pending.resolve();
      this.nullWaiter?.("");
    });
    socket.on("error", () => {});
  }

  static async open(baseUrl: string, token: string | undefined, secrets: readonly Secret[]): Promise<WsLane> {
    const socket = new WebSocket(trpcSocketUrl(baseUrl), { maxPayload: 64 * 1024 * 1024 });
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve());
      socket.once("error", reject);
    });
    socket.send(clientFrames.connectionParams(token === undefined ? {} : { token }));
    return new WsLane(socket, secrets);
  }

  get open(): boolean {
    return this.socket.readyState === WebSocket.OPEN;
  }

  private receive(text: string, isBinary: boolean) {
    if (!isBinary && text === PING) return this.socket.send(PONG);
    if (text === PONG) return;
    const problem = frameProblem(text, this.secrets);
    let frame: any;
    try {
      frame = JSON.parse(text);
    } catch {
      frame = undefined;
    }
    const id = frame?.id;
    if (typeof id === "number" && this.foreignIds.has(id) && frame?.result?.type === "data") this.foreignData++;
    const pending = typeof id === "number" ? this.pending.get(id) : undefined;
    if (id === null && this.nullWaiter) {
      const waiter = this.nullWaiter;
      this.nullWaiter = undefined;
      waiter(text);
      return;
    }
    if (!pending) {
      if (problem) this.unexpected.push({ text, problem });
      return;
    }
    pending.frames.push(text);
    const type = frame?.result?.type;
    if (frame?.error) pending.errors++;
    if (type === "data") pending.data++;
    if (!pending.subscription) {
      pending.ids.delete(id);
      if (pending.ids.size === 0) pending.resolve();
      return;
    }
    if (type === "started") {
      pending.started++;
      if (pending.foreign) {
        // Left open: a breach already, and any event it delivers shows what leaks.
        this.foreignIds.add(id);
        pending.resolve();
      } else this.socket.send(clientFrames.stop(id));
    } else if (frame?.error || type === "stopped") {
      // An error may be followed by "stopped"; either ends the request.
      pending.resolve();
    }
  }

  /** Sends a request frame (or batch) answered by id; resolves with what came back for it. */
  async request(
    testCase: WsCase,
    timeoutMs: number,
  ): Promise<{ frames: string[]; errors: number; data: number; started: number; timedOut: boolean; closed?: number }> {
    const first = this.nextId;
    this.nextId += testCase.size;
    const ids = new Set(Array.from({ length: testCase.size }, (_, i) => first + i));
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const pending: Pending = {
      ids,
      subscription: testCase.kind === "subscription",
      foreign: testCase.foreign ?? false,
      frames: [],
      errors: 0,
      data: 0,
      started: 0,
      resolve: () => {},
    };
    const done = new Promise<void>((resolve) => {
      pending.resolve = resolve;
      timer = setTimeout(() => {
        timedOut = true;
        resolve();
      }, timeoutMs);
    });
    for (const id of ids) this.pending.set(id, pending);
    if (this.open) this.socket.send(testCase.frame(first));
    else pending.resolve();
    await done;
    clearTimeout(timer);
    for (const id of ids) this.pending.delete(id);
    return {
      frames: pending.frames,
      errors: pending.errors,
      data: pending.data,
      started: pending.started,
      timedOut: timedOut && this.open,
      ...(!this.open && { closed: this.closeCode }),
    };
  }

  /** Sends a frame that may be answered with `id: null`, when no other such frame waits; resolves with the first answer. */
  serial(testCase: WsCase, timeoutMs: number): Promise<{ text: string | undefined; closed?: number }> {
    const run = async () => {
      const id = this.nextId;
      this.nextId += testCase.size;
      let timer: NodeJS.Timeout | undefined;
      const answer = await new Promise<string | undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
        this.nullWaiter = resolve;
        // An envelope with a usable id may be answered by it instead.
        const pending: Pending = {
          ids: new Set([id]),
          subscription: false,
          foreign: false,
          frames: [],
          errors: 0,
          data: 0,
          started: 0,
          resolve: () => resolve(pending.frames[0] ?? ""),
        };
        this.pending.set(id, pending);
        if (this.open) this.socket.send(testCase.frame(id));
        else resolve("");
      });
      clearTimeout(timer);
      this.nullWaiter = undefined;
      const late = this.pending.get(id);
      this.pending.delete(id);
      // A request that started a subscription: stopped, as the pipelined ones are.
      if (late && answer && JSON.parse(answer)?.result?.type === "started") this.socket.send(clientFrames.stop(id));
      return { text: answer || undefined, ...(!this.open && { closed: this.closeCode }) };
    };
    const result = this.serialQueue.then(run);
    this.serialQueue = result.then(
      () => {},
      () => {},
    );
    return result;
  }

  close(): void {
    this.socket.terminate();
  }
}

/** Sends `frame` on a socket of its own (after `params`, when given) and collects what comes back until it closes or goes quiet. */
export async function oneShotSocket(
  baseUrl: string,
  frames: (string | Buffer)[],
  options: {
    connectionParams?: boolean;
    /** Done once this holds for the frames received (else at close, or after timeoutMs). */
    until?: (texts: string[]) => boolean;
    timeoutMs?: number;
  } = {},
): Promise<{ texts: string[]; closeCode: number | undefined; error?: string }> {
  const socket = new WebSocket(trpcSocketUrl(baseUrl, { connectionParams: options.connectionParams ?? true }), {
    maxPayload: 64 * 1024 * 1024,
  });
  const texts: string[] = [];
  let closeCode: number | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve());
      socket.once("error", reject);
    });
  } catch (error) {
    return { texts, closeCode, error: (error as Error).message };
  }
  socket.on("error", () => {});
  return new Promise((resolve) => {
    const finish = () => {
      clearTimeout(deadline);
      socket.terminate();
      resolve({ texts, closeCode });
    };
    const deadline = setTimeout(finish, options.timeoutMs ?? 10_000);
    socket.on("message", (data) => {
      const text = data.toString();
      if (text === PING) socket.send(PONG);
      else texts.push(text);
      if (options.until?.(texts)) finish();
    });
    socket.on("close", (code) => {
      closeCode = code;
      finish();
    });
    for (const frame of frames) socket.send(frame);
  });
}
