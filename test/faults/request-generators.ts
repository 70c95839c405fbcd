// The generators, the sender and the judge of test/faults/generated-requests.test.ts: bad REST
// requests drawn from GET /api/v1/openapi.json for every operation (each path and query
// parameter and body field mutated, the body as a whole too, plus cases drawn by fast-check),
// the raw HTTP sender (one connection per request; a body shorter than its Content-Length over
// a bare socket), and what makes an answer wrong (a 5xx, an undocumented error body, a leak).
// rpc-generators.ts builds the tRPC (HTTP and WebSocket) cases on top of the same values.
import { Agent, request as httpRequest } from "node:http";
import { connect } from "node:net";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { appRouter } from "../../routers/index.ts";
import { DEFAULT_PASSWORD, type RegisteredUser } from "../helpers/factories.ts";

export const SEED = Number(process.env.FAULTS_SEED ?? 20261123);
export const CONCURRENCY = Number(process.env.FAULTS_CONCURRENCY ?? 16);
export const REQUEST_TIMEOUT_MS = 20_000;
export const RANDOM_CASES_PER_OPERATION = 15;

// ---------------------------------------------------------------------------------------------
// The document

export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  const?: unknown;
  format?: string;
  $ref?: string;
};
export type Parameter = { name: string; in: string; required?: boolean; schema?: JsonSchema };
export type OpenApiOperation = {
  operationId?: string;
  parameters?: Parameter[];
  security?: unknown[];
  requestBody?: { content: Record<string, { schema?: JsonSchema }> };
};
export type OpenApiDocument = {
  paths: Record<string, Record<string, OpenApiOperation>>;
  components?: { schemas?: Record<string, JsonSchema> };
};

export type Operation = {
  method: string;
  /** The path template, e.g. /api/v1/workspaces/{workspace_id}/channels. */
  path: string;
  /** operationId, or METHOD path for the plain routes. */
  name: string;
  pathParams: Parameter[];
  queryParams: Parameter[];
  bodyType: string | undefined;
  bodySchema: JsonSchema | undefined;
  secured: boolean;
  /** The tRPC procedure serving it, when it is one. */
  procedure: { path: string; type: string } | undefined;
};

export function operationsOf(doc: OpenApiDocument): Operation[] {
  const procedures = new Map<string, { path: string; type: string }>();
  for (const [procedurePath, procedure] of Object.entries(appRouter._def.procedures as Record<string, any>)) {
    const openapi = procedure._def?.meta?.openapi as { method: string; path: string } | undefined;
    if (openapi)
      procedures.set(`${openapi.method.toUpperCase()} ${openapi.path}`, {
        path: procedurePath,
        type: procedure._def.type,
      });
  }
  const resolve = (schema: JsonSchema | undefined): JsonSchema | undefined =>
    schema?.$ref ? doc.components?.schemas?.[schema.$ref.split("/").pop()!] : schema;
  const operations: Operation[] = [];
  for (const [template, item] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const upper = method.toUpperCase();
      const parameters = operation.parameters ?? [];
      const [bodyType, bodyContent] = Object.entries(operation.requestBody?.content ?? {})[0] ?? [];
      operations.push({
        method: upper,
        path: template,
        name: operation.operationId ?? `${upper} ${template}`,
        pathParams: parameters.filter((parameter) => parameter.in === "path"),
        queryParams: parameters.filter((parameter) => parameter.in === "query"),
        bodyType,
        bodySchema: resolve(bodyContent?.schema),
        secured: (operation.security?.length ?? 0) > 0,
        procedure: procedures.get(`${upper} ${template}`),
      });
    }
  }
  return operations;
}

// ---------------------------------------------------------------------------------------------
// Values

/** JSON text put into a body as it is (numbers JSON.stringify cannot write, deep nesting). */
export class RawJson {
  constructor(readonly text: string) {}
}
export const raw = (text: string) => new RawJson(text);
export const MISSING = Symbol("missing");

export function serialize(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value))
    return `[${value.map((item) => (item === undefined ? "null" : serialize(item))).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value)
      .filter(([, item]) => item !== undefined)
      .map(([key, item]) => `${JSON.stringify(key)}:${serialize(item)}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export const deepObject = (levels: number) => `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`;
export const deepArray = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;

/** encodeURIComponent that also writes lone surrogates (as their WTF-8 bytes, invalid UTF-8). */
export function enc(value: string): string {
  let out = "";
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < value.length) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        out += encodeURIComponent(value.slice(i, i + 2));
        i++;
        continue;
      }
    }
    if (code >= 0xd800 && code <= 0xdfff) {
      out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
        .map((byte) => `%${byte.toString(16).toUpperCase()}`)
        .join("");
      continue;
    }
    out += encodeURIComponent(value[i]!);
  }
  return out;
}

export const STRING_ODDITIES: [string, unknown][] = [
  ["empty", ""],
  ["nul", "a\u0000b"],
  ["nul-only", "\u0000"],
  ["lone-high-surrogate", "a\ud800b"],
  ["lone-low-surrogate", "\udfff"],
  ["reversed-surrogates", "\udc00\ud800"],
  ["bom", "\ufeffname"],
  ["rtl-override", "\u202eabc"],
  ["zero-width", "\u200b\u200d\u2060"],
  ["emoji-zwj", "👩‍👩‍👧‍👦🏳️‍🌈"],
  ["combining-marks", `Z${"\u0336\u0337\u0338".repeat(200)}`],
  ["line-separators", "a\u2028b\u2029c"],
  ["noncharacters", "\ufffe\uffff\u{10ffff}"],
  ["control-chars", "\u0001\u0007\u001b[31m\u007f"],
  ["whitespace-only", " \t\r\n "],
  ["sql-ish", "' OR 1=1; -- \\"],
  ["like-wildcards", "%_%\\%"],
  ["format-string", "%s%n${x}{{7*7}}"],
  ["path-traversal", "../../../etc/passwd"],
  ["html", "<script>alert(1)</script>"],
  ["arabic-digits", "١٢٣"],
  ["fullwidth-digits", "１２３"],
  ["nan-string", "NaN"],
  ["infinity-string", "-Infinity"],
  ["exp-string", "1e308"],
  ["hex-string", "0x7fffffff"],
  ["int64-string", "9223372036854775808"],
  ["2^31-string", "2147483648"],
  ["negative-string", "-1"],
  ["huge-10k", "x".repeat(10_000)],
  ["huge-100k", "é".repeat(50_000)],
];

export const NUMBER_ODDITIES: [string, unknown][] = [
  ["0", 0],
  ["-1", -1],
  ["1", 1],
  ["2^31-1", 2147483647],
  ["2^31", 2147483648],
  ["2^32", 4294967296],
  ["-2^31-1", -2147483649],
  ["2^53-1", 9007199254740991],
  ["2^53", 9007199254740992],
  ["2^63", raw("9223372036854775808")],
  ["1e308", 1e308],
  ["-1e308", -1e308],
  ["1.5", 1.5],
  ["5e-324", 5e-324],
  ["neg-zero", raw("-0")],
  ["1e400-overflow", raw("1e400")],
  ["400-digit-int", raw(`1${"0".repeat(400)}`)],
  ["exp-int", raw("1E2")],
];

export const TYPE_ODDITIES: [string, unknown][] = [
  ["null", null],
  ["true", true],
  ["false", false],
  ["empty-array", []],
  ["array-of-null", [null]],
  ["array-of-string", ["x"]],
  ["empty-object", {}],
  ["object", { a: 1 }],
  ["proto-object", raw('{"__proto__":{"admin":true}}')],
  ["nested-arrays", [[[[]]]]],
  ["deep-5000", raw(deepObject(5000))],
  ["deep-100000", raw(deepArray(100_000))],
];

/** Values for a path segment or a query value: [label, raw string, the encoded form if not enc(raw)]. */
export const SEGMENT_ODDITIES: [string, string, string?][] = [
  ["nul", "a\u0000b"],
  ["nul-only", "\u0000"],
  ["lone-surrogate", "\ud800"],
  ["lone-low-surrogate", "x\udfff"],
  ["percent-alone", "%", "%"],
  ["bad-percent", "%ZZ", "%ZZ"],
  ["truncated-percent", "%E0%A4%A", "%E0%A4%A"],
  ["overlong-utf8", "%C0%AE", "%C0%AE"],
  ["invalid-utf8", "%FF%FE", "%FF%FE"],
  ["encoded-slash", "a/b"],
  ["double-encoded-nul", "%00", "%2500"],
  ["0", "0"],
  ["-1", "-1"],
  ["2^31-1", "2147483647"],
  ["2^31", "2147483648"],
  ["2^32", "4294967296"],
  ["2^53", "9007199254740992"],
  ["2^63", "9223372036854775808"],
  ["1e308", "1e308"],
  ["1e400", "1e400"],
  ["NaN", "NaN"],
  ["Infinity", "Infinity"],
  ["-0", "-0"],
  ["1.5", "1.5"],
  ["hex", "0x1f"],
  ["leading-space", " 1"],
  ["fullwidth-digits", "１２"],
  ["arabic-digits", "١٢"],
  ["empty", ""],
  ["huge-4000", "a".repeat(4000)],
  ["sql-ish", "1' OR '1'='1"],
  ["emoji", "😀👩‍👩‍👧"],
  ["rtl-override", "\u202e1"],
  ["bom", "\ufeff1"],
  ["combining", "1\u0301\u0302"],
  ["control", "\u0001\u001b"],
  ["unknown-prefixed-id", "ws_0000000000ZZZZZZZZZZZZZZZZ"],
  ["null-word", "null"],
  ["undefined-word", "undefined"],
  ["json", '{"a":1}'],
  ["array-notation", "[1]"],
];

export const JUNK_QUERY_LABELS = new Set([
  "nul",
  "lone-surrogate",
  "bad-percent",
  "invalid-utf8",
  "2^31",
  "2^63",
  "1e400",
  "NaN",
  "huge-4000",
  "emoji",
  "json",
  "empty",
]);

export const BOGUS_AUTHORIZATIONS = [
  "Bearer not-a-token",
  `Bearer ${"A".repeat(5000)}`,
  "Bearer tok_00000000000000000000000000|abc",
  "Bearer 1|abcdef",
  "Bearer ",
  "Bearer",
  "Basic Zm9vOmJhcg==",
  "bearer \u00e9\u00ff",
  "Bearer a b c",
  "Token abc",
];

// ---------------------------------------------------------------------------------------------
// Cases

export type Fixtures = {
  owner: RegisteredUser;
  other: RegisteredUser;
  workspaceId: string;
  channelId: string;
  extraChannelId: string;
  memberId: string;
  inviteId: string;
  inviteToken: string;
  patId: string;
  conversationId: string;
  channelMessageId: string;
  directMessageId: string;
  channelAttachmentId: string;
  directAttachmentId: string;
  /** A temporary room of the owner's, and a message in it. */
  roomId: string;
  roomMessageId: string;
  /** A stranger's places the owner cannot see: their ids go where the owner's ids go. */
  foreign: ForeignPlaces;
  /** Text written only into the stranger's private places: no answer to the owner may carry it. */
  marker: string;
};

/** What a stranger keeps to themselves (test/faults/generated-requests.test.ts makes them). */
export type ForeignPlaces = {
  /** A private workspace (the owner is not in it), its #general, a message and an attachment there. */
  workspaceId: string;
  channelId: string;
  channelMessageId: string;
  channelAttachmentId: string;
  memberId: string;
  inviteId: string;
  /** A public workspace of the stranger's that the owner has joined, and a private channel in it the owner is not in. */
  sharedWorkspaceId: string;
  privateChannelId: string;
  privateChannelMessageId: string;
  /** The stranger's direct conversation with a third user. */
  conversationId: string;
  directMessageId: string;
  directAttachmentId: string;
  /** A temporary room only the stranger is in (anyone holding its id may join it: never sent to join). */
  roomId: string;
  roomMessageId: string;
  /** The stranger's personal access token's id. */
  patId: string;
};

/** What an id names, from its parameter's name (and, for `{id}`, the path before it). */
export type IdKind =
  "workspace" | "channel" | "conversation" | "room" | "message" | "attachment" | "member" | "invite" | "token";

export function idKind(template: string | undefined, name: string): IdKind | undefined {
  switch (name) {
    case "workspace_id":
      return "workspace";
    case "channel_id":
      return "channel";
    case "conversation_id":
      return "conversation";
    case "room_id":
      return "room";
    case "message_id":
    case "parent_message_id":
      return "message";
    case "attachment_id":
      return "attachment";
  }
  if (name !== "id" || !template) return undefined;
  const before = template.split("/{id}")[0]!;
  if (before.endsWith("/workspaces")) return "workspace";
  if (before.endsWith("/channels")) return "channel";
  if (before.endsWith("/members")) return "member";
  if (before.endsWith("/invites")) return "invite";
  if (before.endsWith("/tokens")) return "token";
  return undefined;
}

/** Where a message or attachment id of `template` lives. */
const placeOf = (template: string | undefined): "channel" | "direct" | "room" =>
  template?.includes("/direct-") ? "direct" : template?.includes("/external/rooms") ? "room" : "channel";

/**
 * The stranger's places as consistent sets of ids: a request gets every id of one set (or one
 * of them, the rest the owner's). `hidden` are the kinds the owner must not reach through it
 * (the shared workspace itself is visible: the owner is a member).
 */
export function foreignSets(fx: Fixtures): {
  label: string;
  hidden: Set<IdKind>;
  value(kind: IdKind, template: string | undefined): string | undefined;
}[] {
  const f = fx.foreign;
  return [
    {
      label: "private-workspace",
      hidden: new Set<IdKind>(["workspace", "channel", "message", "attachment", "member", "invite"]),
      value: (kind, template) =>
        ({
          workspace: f.workspaceId,
          channel: f.channelId,
          message: placeOf(template) === "channel" ? f.channelMessageId : undefined,
          attachment: placeOf(template) === "channel" ? f.channelAttachmentId : undefined,
          member: f.memberId,
          invite: f.inviteId,
        })[kind as string],
    },
    {
      label: "private-channel",
      hidden: new Set<IdKind>(["channel", "message"]),
      value: (kind, template) =>
        ({
          workspace: f.sharedWorkspaceId,
          channel: f.privateChannelId,
          message: placeOf(template) === "channel" ? f.privateChannelMessageId : undefined,
        })[kind as string],
    },
    {
      label: "conversation",
      hidden: new Set<IdKind>(["conversation", "message", "attachment"]),
      value: (kind, template) =>
        ({
          conversation: f.conversationId,
          message: placeOf(template) === "direct" ? f.directMessageId : undefined,
          attachment: placeOf(template) === "direct" ? f.directAttachmentId : undefined,
        })[kind as string],
    },
    {
      label: "room",
      hidden: new Set<IdKind>(["room", "message"]),
      value: (kind, template) =>
        ({ room: f.roomId, message: placeOf(template) === "room" ? f.roomMessageId : undefined })[kind as string],
    },
    { label: "token", hidden: new Set<IdKind>(["token"]), value: (kind) => (kind === "token" ? f.patId : undefined) },
  ];
}

/**
 * Foreign variants of a set of named ids: for each set that reaches one of its hidden kinds,
 * every id of the set at once, and (when there are several) each one alone.
 */
export function foreignVariants(
  fx: Fixtures,
  template: string | undefined,
  names: string[],
): { label: string; values: Record<string, string>; elsewhere: string[] }[] {
  const variants: { label: string; values: Record<string, string>; elsewhere: string[] }[] = [];
  for (const set of foreignSets(fx)) {
    const values: Record<string, string> = {};
    /** Ids that name another kind of place than the set's (a conversation beside a channel). */
    const elsewhere: string[] = [];
    let hides = false;
    for (const name of names) {
      const kind = idKind(template, name);
      if (!kind) continue;
      const value = set.value(kind, template);
      if (!value) {
        elsewhere.push(name);
        continue;
      }
      values[name] = value;
      if (set.hidden.has(kind)) hides = true;
    }
    if (!hides) continue;
    variants.push({ label: `foreign:${set.label}`, values, elsewhere });
    const keys = Object.keys(values);
    if (keys.length > 1) {
      for (const key of keys) {
        if (set.hidden.has(idKind(template, key)!))
          variants.push({ label: `foreign:${set.label}.${key}-only`, values: { [key]: values[key]! }, elsewhere });
      }
    }
  }
  return variants;
}

/** Joining a temporary room by its id is what the id is for: never sent with the stranger's. */
export const JOINS_BY_ID = (template: string | undefined) => template === "/api/v1/external/rooms/{room_id}/join";

export type Auth = "user" | "none" | "bogus";
export type Body =
  | { kind: "none" }
  | { kind: "json"; value: unknown; contentType?: string }
  | { kind: "raw"; bytes: string | Buffer; contentType: string | undefined; pieces?: number };

export type Case = {
  op: Operation;
  mutation: string;
  auth: Auth;
  /** Which bogus Authorization value, when auth is "bogus". */
  bogus: string;
  url: string;
  body: Body;
  /** A body shorter than the Content-Length it declares (sent over a raw socket, then half-closed). */
  lyingLength?: boolean;
  /** The procedure's input, for the tRPC sample (path and query values merged with the body). */
  trpcInput: unknown;
  /** Path ids of a stranger's private place: any 2xx is a breach (and so is their marker in any answer). */
  foreign?: boolean;
};

export type Segment = { raw: string; encoded: string };
export const segment = (rawValue: string, encoded?: string): Segment => ({
  raw: rawValue,
  encoded: encoded ?? enc(rawValue),
});

export function firstBranch(schema: JsonSchema): JsonSchema {
  const branches = schema.anyOf ?? schema.oneOf;
  if (!branches) return schema;
  return firstBranch(branches.find((branch) => branch.type !== "null") ?? branches[0]!);
}

export function schemaValue(schema: JsonSchema): unknown {
  const base = firstBranch(schema);
  if (base.const !== undefined) return base.const;
  if (base.enum) return base.enum[0];
  const type = Array.isArray(base.type) ? base.type.find((t) => t !== "null") : base.type;
  switch (type) {
    case "integer":
    case "number":
      return Math.max(base.minimum ?? 1, (base.exclusiveMinimum ?? 0) + 1);
    case "boolean":
      return false;
    case "array":
      return base.minItems ? [schemaValue(base.items ?? {})] : [];
    case "object":
      return Object.fromEntries(Object.entries(base.properties ?? {}).map(([key, value]) => [key, schemaValue(value)]));
    default:
      return "x".repeat(Math.max(1, base.minLength ?? 1));
  }
}

export function baselineField(op: Operation, name: string, schema: JsonSchema, fx: Fixtures): unknown {
  switch (name) {
    case "email":
      return op.name === "auth-register" ? "fuzz-register@example.test" : fx.other.email;
    case "password":
      // An optional room password is left out of the baseline: hashing it for every generated
      // request costs minutes; its own mutations still send it.
      if (!op.bodySchema?.required?.includes("password")) return MISSING;
      return DEFAULT_PASSWORD;
    case "password_confirmation":
      return DEFAULT_PASSWORD;
    case "current_password":
      // Never the real one: a generated change-password must not revoke the user's other tokens.
      return "not-the-current-password";
    case "name":
      return "Fuzz Name";
    case "device_name":
      return "fuzz-device";
    case "avatar_url":
      return "https://example.test/avatar.png";
    case "abilities":
      return ["read"];
    case "slug":
      return "fuzz-slug";
    case "user_id":
    case "participant_user_id":
      return fx.other.id;
    case "role":
      return "member";
    case "content":
      return "hello";
    case "parent_message_id":
      return fx.channelMessageId;
    case "expires_in_days":
      return 7;
    case "token":
      return op.name === "otp-verify" ? "123456" : "not-a-reset-token";
    case "code":
      return "fuzz-code";
    case "state":
      return "fuzz-state";
    default:
      return schemaValue(schema);
  }
}

export function realPathValue(template: string, name: string, fx: Fixtures): string {
  switch (name) {
    case "workspace_id":
      return fx.workspaceId;
    case "channel_id":
      return fx.channelId;
    case "conversation_id":
      return fx.conversationId;
    case "attachment_id":
      return template.includes("direct-message") ? fx.directAttachmentId : fx.channelAttachmentId;
    case "room_id":
      return fx.roomId;
    case "message_id": {
      const place = placeOf(template);
      return place === "direct" ? fx.directMessageId : place === "room" ? fx.roomMessageId : fx.channelMessageId;
    }
    case "emoji":
      return "thumbsup";
    case "user_id":
      return String(fx.other.id);
    case "token":
      return fx.inviteToken;
    case "provider":
      return "google";
    case "hash":
      return "0123456789abcdef";
  }
  const before = template.split("/{id}")[0]!;
  if (before.endsWith("/email/verify")) return String(fx.owner.id);
  if (before.endsWith("/tokens")) return fx.patId;
  if (before.endsWith("/workspaces")) return fx.workspaceId;
  if (before.endsWith("/channels")) return fx.extraChannelId;
  if (before.endsWith("/members")) return fx.memberId;
  if (before.endsWith("/invites")) return fx.inviteId;
  return "1";
}

export function realQueryValue(op: Operation, name: string, fx: Fixtures): string {
  switch (name) {
    case "limit":
      return "10";
    case "before":
      return op.path.startsWith("/api/v1/direct") ? fx.directMessageId : fx.channelMessageId;
    case "parent_message_id":
      return fx.channelMessageId;
    case "expires":
    case "signature":
      return "";
    default:
      return "fuzz";
  }
}

/** Values for one body field: the shared oddities plus the field's own bounds. */
export function fieldMutations(schema: JsonSchema): [string, unknown][] {
  const base = firstBranch(schema);
  const own: [string, unknown][] = [["missing", MISSING]];
  if (base.maxLength !== undefined) {
    own.push(["maxLength", "a".repeat(base.maxLength)], ["maxLength+1", "a".repeat(base.maxLength + 1)]);
    own.push(["maxLength+1-astral", "😀".repeat(base.maxLength + 1)]);
  }
  if (base.minLength) own.push(["minLength-1", "a".repeat(base.minLength - 1)]);
  if (base.pattern) own.push(["pattern-miss-nul", "123\u000056"], ["pattern-miss-newline", "123456\n"]);
  if (base.minimum !== undefined) own.push(["minimum-1", base.minimum - 1], ["minimum", base.minimum]);
  if (base.exclusiveMinimum !== undefined) own.push(["exclusiveMinimum", base.exclusiveMinimum]);
  if (base.maximum !== undefined && Math.abs(base.maximum) < 2 ** 53) {
    own.push(["maximum", base.maximum], ["maximum+1", base.maximum + 1]);
  }
  if (base.enum) {
    const first = String(base.enum[0]);
    own.push(["enum-uppercase", first.toUpperCase()], ["enum+nul", `${first}\u0000`], ["enum+space", `${first} `]);
  }
  if (base.format === "uri") {
    own.push(
      ["uri-javascript", "javascript:alert(1)"],
      ["uri-broken-ipv6", "http://[::1"],
      ["uri-huge-host", `http://${"a".repeat(3000)}.test/`],
      ["uri-nul", "https://example.test/\u0000"],
    );
  }
  const type = Array.isArray(base.type) ? base.type[0] : base.type;
  if (type === "array") {
    const item = schemaValue(base.items ?? {});
    if (base.maxItems !== undefined) own.push(["maxItems+1", Array.from({ length: base.maxItems + 1 }, () => item)]);
    own.push(
      ["items-10000", Array.from({ length: 10_000 }, () => item)],
      ["items-nul", ["\u0000"]],
      ["items-lone-surrogate", ["\ud800"]],
      ["items-2^31", [2147483648]],
      ["items-object", [{ a: 1 }]],
      ["items-huge", ["x".repeat(100_000)]],
    );
  }
  return [...own, ...TYPE_ODDITIES, ...NUMBER_ODDITIES, ...STRING_ODDITIES];
}

export const MULTIPART_BOUNDARY = "----fuzzboundary7MA4YWxkTrZu0gW";

export function multipart(
  parts: { name: string; filename?: string; type?: string; content: string | Buffer }[],
  boundary = MULTIPART_BOUNDARY,
) {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let disposition = `form-data; name="${part.name}"`;
    if (part.filename !== undefined) disposition += `; filename="${part.filename}"`;
    chunks.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: ${disposition}\r\n${part.type ? `Content-Type: ${part.type}\r\n` : ""}\r\n`,
      ),
      Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content),
      Buffer.from("\r\n"),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

export function uploadBodies(): [string, Body][] {
  const type = `multipart/form-data; boundary=${MULTIPART_BOUNDARY}`;
  const good = multipart([{ name: "file", filename: "a.txt", type: "text/plain", content: "hello" }]);
  const rawBody = (bytes: Buffer | string, contentType: string | undefined = type): Body => ({
    kind: "raw",
    bytes,
    contentType,
  });
  const withFilename = (filename: string) => rawBody(multipart([{ name: "file", filename, content: "x" }]));
  return [
    ["multipart:truncated-half", rawBody(good.subarray(0, Math.floor(good.length / 2)))],
    ["multipart:truncated-before-closing-boundary", rawBody(good.subarray(0, good.length - 8))],
    ["multipart:truncated-in-headers", rawBody(good.subarray(0, 30))],
    ["multipart:no-closing-boundary", rawBody(good.subarray(0, good.length - `--${MULTIPART_BOUNDARY}--\r\n`.length))],
    ["multipart:only-preamble", rawBody("just some text, no parts")],
    ["multipart:empty-body", rawBody("")],
    ["multipart:no-boundary-param", rawBody(good, "multipart/form-data")],
    ["multipart:wrong-boundary", rawBody(good, "multipart/form-data; boundary=other")],
    ["multipart:boundary-too-long", rawBody(good, `multipart/form-data; boundary=${"b".repeat(200)}`)],
    ["multipart:wrong-field-name", rawBody(multipart([{ name: "upload", filename: "a.txt", content: "x" }]))],
    ["multipart:field-without-filename", rawBody(multipart([{ name: "file", content: "x" }]))],
    ["multipart:empty-file", rawBody(multipart([{ name: "file", filename: "empty.txt", content: "" }]))],
    [
      "multipart:two-files",
      rawBody(
        multipart([
          { name: "file", filename: "a.txt", content: "a" },
          { name: "file", filename: "b.txt", content: "b" },
        ]),
      ),
    ],
    ["multipart:filename-nul", withFilename("a\u0000b.txt")],
    ["multipart:filename-lone-surrogate", withFilename("a\ud800.txt")],
    ["multipart:filename-huge", withFilename(`${"n".repeat(5000)}.txt`)],
    ["multipart:filename-traversal", withFilename("../../etc/passwd")],
    ["multipart:filename-empty", withFilename("")],
    ["multipart:filename-rtl", withFilename("\u202etxt.exe")],
    [
      "multipart:invalid-utf8-filename",
      rawBody(
        Buffer.concat([
          Buffer.from(`--${MULTIPART_BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="`),
          Buffer.from([0xff, 0xfe, 0xc3, 0x28]),
          Buffer.from(`"\r\n\r\nx\r\n--${MULTIPART_BOUNDARY}--\r\n`),
        ]),
      ),
    ],
    [
      "multipart:part-type-garbage",
      rawBody(multipart([{ name: "file", filename: "a", type: "\u0001/\u0002", content: "x" }])),
    ],
    ["multipart:json-instead", { kind: "json", value: { file: "x" } }],
    ["multipart:no-body", { kind: "none" }],
    ["multipart:text-plain", rawBody("file=x", "text/plain")],
    ["multipart:urlencoded", rawBody("file=x", "application/x-www-form-urlencoded")],
    ["multipart:bad-content-type", rawBody(good, "multipart/")],
  ];
}

export function bodyLevelMutations(baseline: Record<string, unknown>): [string, Body][] {
  const json = serialize(baseline);
  const text = (bytes: string | Buffer, contentType: string | undefined = "application/json"): Body => ({
    kind: "raw",
    bytes,
    contentType,
  });
  return [
    ["no-body", { kind: "none" }],
    ["empty-body-json-type", text("")],
    ["empty-object", { kind: "json", value: {} }],
    ["malformed:open-brace", text("{")],
    ["malformed:missing-value", text('{"a":}')],
    ["malformed:trailing-comma", text(`${json.slice(0, -1)},}`)],
    ["malformed:single-quotes", text("{'a':1}")],
    ["malformed:NaN", text('{"a":NaN}')],
    ["malformed:bad-escape", text('{"a":"\\x00"}')],
    ["malformed:raw-control-char", text('{"a":"\u0001\u0000"}')],
    ["malformed:binary-garbage", text(Buffer.from([0, 1, 2, 0xff, 0xfe, 0x7b]))],
    ["truncated:half", text(json.slice(0, Math.floor(json.length / 2)))],
    ["truncated:last-char", text(json.slice(0, -1))],
    ["scalar:null", text("null")],
    ["scalar:number", text("42")],
    ["scalar:string", text('"x"')],
    ["scalar:true", text("true")],
    ["array:empty", text("[]")],
    ["array:of-baseline", text(`[${json}]`)],
    ["deep-object-5000", text(deepObject(5000))],
    ["deep-array-100000", text(deepArray(100_000))],
    ["deep-field-5000", { kind: "json", value: { ...baseline, extra: raw(deepObject(5000)) } }],
    ["huge-body-2MiB", text(`{"a":"${"x".repeat(2 * 1024 * 1024)}"}`)],
    ["content-type:text/plain", text(json, "text/plain")],
    ["content-type:xml", text("<a>1</a>", "application/xml")],
    ["content-type:multipart-no-boundary", text(json, "multipart/form-data")],
    ["content-type:multipart-with-json", text(json, "multipart/form-data; boundary=zzz")],
    [
      "content-type:urlencoded-junk",
      text("name=a%00b&name=2&x[]=1&%ZZ=1&__proto__[a]=1", "application/x-www-form-urlencoded"),
    ],
    ["content-type:urlencoded-lone-surrogate", text("name=%ED%A0%80", "application/x-www-form-urlencoded")],
    ["content-type:utf16", text(Buffer.from(`\ufeff${json}`, "utf16le"), "application/json; charset=utf-16")],
    ["content-type:vnd+json", text(json, "application/vnd.api+json")],
    ["content-type:uppercase", text(json, "APPLICATION/JSON; CHARSET=UTF-8")],
    ["content-type:list", text(json, "application/json, text/plain")],
    ["content-type:empty", text(json, "")],
    ["content-type:none", text(json, undefined)],
    ["content-type:star", text(json, "*/*")],
    ["content-type:octet-stream", text(Buffer.from([0, 159, 146, 150]), "application/octet-stream")],
    [
      "invalid-utf8",
      text(
        Buffer.concat([
          Buffer.from('{"name":"'),
          Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80]),
          Buffer.from('"}'),
        ]),
      ),
    ],
    ["utf8-bom", text(`\ufeff${json}`)],
    ["duplicate-keys", text(`{"name":"a","name":{"x":1},${json.slice(1)}`)],
    [
      "extra-fields",
      {
        kind: "json",
        value: { ...baseline, unknown_field: "x", "": 1, "\u0000": "nul key", "\ud800": 2, id: 1, user_id: 1 },
      },
    ],
    [
      "prototype-named-fields",
      { kind: "json", value: { ...baseline, valueOf: 1, toString: "x", hasOwnProperty: null, toJSON: {} } },
    ],
    ["proto-pollution", text(`{"__proto__":{"isAdmin":true,"role":"owner"},${json.slice(1)}`)],
    ["constructor-pollution", { kind: "json", value: { ...baseline, constructor: { prototype: { isAdmin: true } } } }],
  ];
}

export function buildCases(op: Operation, fx: Fixtures, random: RandomPools): Omit<Case, "auth" | "bogus">[] {
  const cases: Omit<Case, "auth" | "bogus">[] = [];
  const basePath: Record<string, Segment> = Object.fromEntries(
    op.pathParams.map((parameter) => [parameter.name, segment(realPathValue(op.path, parameter.name, fx))]),
  );
  const baseQuery: [string, Segment][] = op.queryParams.map((parameter) => [
    parameter.name,
    segment(realQueryValue(op, parameter.name, fx)),
  ]);
  const hasJsonBody = op.bodyType === "application/json";
  const baseBody: Record<string, unknown> = hasJsonBody
    ? Object.fromEntries(
        Object.entries(op.bodySchema?.properties ?? {})
          .map(([name, schema]) => [name, baselineField(op, name, schema, fx)] as const)
          .filter(([, value]) => value !== MISSING),
      )
    : {};
  const defaultBody: Body = hasJsonBody ? { kind: "json", value: baseBody } : { kind: "none" };
  const allIds = [
    fx.workspaceId,
    fx.channelId,
    fx.conversationId,
    fx.channelMessageId,
    fx.inviteId,
    fx.patId,
    fx.memberId,
    fx.channelAttachmentId,
  ];

  const emit = (
    mutation: string,
    parts: {
      path?: Record<string, Segment>;
      query?: [string, Segment][];
      body?: Body;
      lyingLength?: boolean;
      foreign?: boolean;
    } = {},
  ) => {
    const pathValues = { ...basePath, ...parts.path };
    const query = parts.query ?? baseQuery;
    const body = parts.body ?? defaultBody;
    const url =
      op.path.replace(/\{(\w+)\}/g, (_, name: string) => pathValues[name]!.encoded) +
      (query.length ? `?${query.map(([key, value]) => `${enc(key)}=${value.encoded}`).join("&")}` : "");
    const input: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(pathValues)) input[name] = value.raw;
    for (const [name, value] of query) input[name] = value.raw;
    if (body.kind === "json" && body.value !== null && typeof body.value === "object" && !Array.isArray(body.value)) {
      Object.assign(input, body.value);
    }
    cases.push({
      op,
      mutation,
      url,
      body,
      lyingLength: parts.lyingLength,
      ...(parts.foreign && { foreign: true }),
      trpcInput:
        body.kind === "raw" ? raw(typeof body.bytes === "string" ? body.bytes : body.bytes.toString("latin1")) : input,
    });
  };

  emit("baseline");

  // Path parameters.
  for (const parameter of op.pathParams) {
    for (const [label, rawValue, encoded] of SEGMENT_ODDITIES) {
      emit(`path.${parameter.name}=${label}`, { path: { [parameter.name]: segment(rawValue, encoded) } });
    }
    const real = basePath[parameter.name]!.raw;
    const otherKind = allIds.find((id) => id.split("_")[0] !== real.split("_")[0]) ?? "x";
    emit(`path.${parameter.name}=other-kind-id`, { path: { [parameter.name]: segment(otherKind) } });
    emit(`path.${parameter.name}=id+suffix`, { path: { [parameter.name]: segment(`${real}x`) } });
  }

  // A stranger's private places, by path (never a room to join: its id is its invitation).
  if (!JOINS_BY_ID(op.path)) {
    for (const variant of foreignVariants(
      fx,
      op.path,
      op.pathParams.map((parameter) => parameter.name),
    )) {
      const path = Object.fromEntries(Object.entries(variant.values).map(([name, value]) => [name, segment(value)]));
      emit(`path.${variant.label}`, { path, foreign: true });
    }
  }
  // ...by query (a search of the stranger's places, for the words only they wrote) and by body
  // field (a reply to, a read mark at, an attachment of theirs): no 2xx rule, the marker rule.
  for (const variant of foreignVariants(
    fx,
    op.path,
    op.queryParams.map((parameter) => parameter.name),
  )) {
    const query: [string, Segment][] = baseQuery.map(([name, value]) => [
      name,
      name === "q" ? segment(fx.marker) : variant.values[name] !== undefined ? segment(variant.values[name]) : value,
    ]);
    for (const name of Object.keys(variant.values)) {
      if (!query.some(([key]) => key === name)) query.push([name, segment(variant.values[name]!)]);
    }
    emit(`query.${variant.label}`, { query });
  }
  if (hasJsonBody) {
    const fields = Object.keys(op.bodySchema?.properties ?? {});
    for (const variant of foreignVariants(fx, op.path, [...fields, "attachment_id"])) {
      const body: Record<string, unknown> = { ...baseBody };
      for (const [name, value] of Object.entries(variant.values)) {
        if (name === "attachment_id") {
          if (fields.includes("attachment_ids")) body.attachment_ids = [value];
        } else body[name] = value;
      }
      emit(`body.${variant.label}`, { body: { kind: "json", value: body } });
    }
  }

  // Query parameters: declared ones...
  for (const parameter of op.queryParams) {
    const others = baseQuery.filter(([name]) => name !== parameter.name);
    for (const [label, rawValue, encoded] of SEGMENT_ODDITIES) {
      emit(`query.${parameter.name}=${label}`, { query: [...others, [parameter.name, segment(rawValue, encoded)]] });
    }
    emit(`query.${parameter.name}=missing`, { query: others });
    emit(`query.${parameter.name}=repeated`, {
      query: [...others, [parameter.name, segment("1")], [parameter.name, segment("2")]],
    });
    emit(`query.${parameter.name}=bracket-array`, { query: [...others, [`${parameter.name}[]`, segment("1")]] });
    emit(`query.${parameter.name}=bracket-object`, { query: [...others, [`${parameter.name}[a]`, segment("1")]] });
  }
  // ...and unknown ones, on every operation.
  for (const [label, rawValue, encoded] of SEGMENT_ODDITIES) {
    if (JUNK_QUERY_LABELS.has(label)) {
      emit(`query.unknown=${label}`, { query: [...baseQuery, ["unknown", segment(rawValue, encoded)]] });
    }
  }
  for (const key of ["__proto__", "constructor", "valueOf", "toString", "hasOwnProperty"]) {
    emit(`query.prototype-key=${key}`, { query: [...baseQuery, [key, segment("1")]] });
  }
  // Past Node's 16 KiB header limit: answered by the HTTP parser, before any route.
  emit("query.url-over-16KiB", { query: [...baseQuery, ["q", segment("u".repeat(20_000))]] });
  emit("query.nul-key", { query: [...baseQuery, ["a\u0000b", segment("1")]] });
  emit("query.many-params-1000", {
    query: [...baseQuery, ...Array.from({ length: 1000 }, (_, i): [string, Segment] => [`p${i}`, segment("1")])],
  });

  // Body fields.
  if (hasJsonBody) {
    for (const [name, schema] of Object.entries(op.bodySchema?.properties ?? {})) {
      for (const [label, value] of fieldMutations(schema)) {
        const body = { ...baseBody };
        if (value === MISSING) delete body[name];
        else body[name] = value;
        emit(`body.${name}=${label}`, { body: { kind: "json", value: body } });
      }
    }
  }

  // The body as a whole.
  if (op.bodyType === "multipart/form-data") {
    for (const [label, body] of uploadBodies()) {
      emit(label, { body });
      // The same bytes written in pieces, so the parser sees a part begin before the body ends.
      if (body.kind === "raw" && body.bytes.length > 0) emit(`${label}(in-pieces)`, { body: { ...body, pieces: 3 } });
    }
    emit("multipart:lying-content-length", { body: uploadBodies()[0]![1], lyingLength: true });
  } else if (op.method !== "GET") {
    for (const [label, body] of bodyLevelMutations(baseBody))
      emit(hasJsonBody ? label : `unexpected-body:${label}`, { body });
    emit("lying-content-length", { body: { kind: "json", value: baseBody }, lyingLength: true });
  }

  // Drawn by fast-check.
  for (let i = 0; i < RANDOM_CASES_PER_OPERATION; i++) {
    const draw = random.next();
    const fields = Object.keys(op.bodySchema?.properties ?? {});
    const where = draw.where % 4;
    if (where === 0 && hasJsonBody && fields.length) {
      const name = fields[draw.index % fields.length]!;
      emit(`random.body.${name}#${draw.id}`, { body: { kind: "json", value: { ...baseBody, [name]: draw.json } } });
    } else if (where === 1 && hasJsonBody) {
      emit(`random.body.extra#${draw.id}`, {
        body: { kind: "json", value: { ...baseBody, [draw.key]: draw.json } },
      });
    } else if (where === 2 && op.pathParams.length) {
      const name = op.pathParams[draw.index % op.pathParams.length]!.name;
      emit(`random.path.${name}#${draw.id}`, { path: { [name]: segment(draw.text) } });
    } else {
      const name = op.queryParams.length ? op.queryParams[draw.index % op.queryParams.length]!.name : draw.key || "q";
      emit(`random.query.${op.queryParams.length ? name : "unknown"}#${draw.id}`, {
        query: [...baseQuery.filter(([key]) => key !== name), [name, segment(draw.text)]],
      });
    }
  }
  return cases;
}

/** Methods sent to every path that does not document them (HEAD and CONNECT aside: no body to judge). */
export const UNDOCUMENTED_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PROPFIND", "TRACE"];

/**
 * Per path of the document: each method it does not document, and paths next to it that do not
 * exist (a suffix, a trailing slash, doubled slashes, upper case, a dot segment), each sent with
 * the baseline's ids and body.
 */
export function undocumentedCases(operations: Operation[], cases: Omit<Case, "auth" | "bogus">[]) {
  const documented = new Map<string, Set<string>>();
  for (const op of operations) documented.set(op.path, (documented.get(op.path) ?? new Set()).add(op.method));
  const out: Omit<Case, "auth" | "bogus">[] = [];
  for (const [template, methods] of documented) {
    const baseline = cases.find((testCase) => testCase.op.path === template && testCase.mutation === "baseline");
    if (!baseline) continue;
    const withoutBody = (method: string) => ["GET", "OPTIONS", "TRACE"].includes(method);
    for (const method of UNDOCUMENTED_METHODS) {
      if (methods.has(method)) continue;
      out.push({
        ...baseline,
        op: { ...baseline.op, method, name: `${method} ${template}`, procedure: undefined },
        mutation: `method.undocumented=${method}`,
        body: withoutBody(method) ? { kind: "none" } : baseline.body,
      });
    }
    const [pathname, query] = baseline.url.split("?");
    const suffix = query === undefined ? "" : `?${query}`;
    for (const [label, changed] of [
      ["suffix", `${pathname}/unknown`],
      ["trailing-slash", `${pathname}/`],
      ["double-slashes", pathname!.replace(/\//g, "//")],
      ["upper-case", pathname!.toUpperCase()],
      ["dot-segment", `${pathname}/../${pathname!.split("/").pop()}`],
      ["encoded-slashes", pathname!.replace(/\//g, "%2F")],
    ] as const) {
      // The operation's own method: a path that resolves to it (a trailing slash, a dot
      // segment) is that operation, and must be held back as it is when it deletes or revokes.
      out.push({ ...baseline, mutation: `path.unknown=${label}`, url: changed + suffix });
    }
  }
  return out;
}

export type Draw = { id: number; where: number; index: number; key: string; text: string; json: unknown };
export type RandomPools = { next(): Draw };

export function randomPools(seed: number, count: number): RandomPools {
  const jsonArbitrary = fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.string({ unit: "binary", maxLength: 40 }),
    fc.string({ unit: "grapheme", maxLength: 40 }),
    fc.integer(),
    fc.double(),
    fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map((value) => raw(value.toString())),
    fc.array(fc.string({ unit: "binary", maxLength: 8 }), { maxLength: 5 }),
  );
  const textArbitrary = fc.oneof(
    fc.string({ unit: "binary", maxLength: 40 }),
    fc.string({ unit: "grapheme-composite", maxLength: 20 }),
    fc.integer().map(String),
    fc.double().map(String),
    fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
  );
  const draws = fc.sample(
    fc.record({
      where: fc.nat(),
      index: fc.nat(),
      key: fc.string({ unit: "binary", maxLength: 12 }),
      text: textArbitrary,
      json: jsonArbitrary,
    }),
    { seed, numRuns: count },
  );
  let position = 0;
  return {
    next() {
      const draw = draws[position % draws.length]!;
      return { id: position++, ...draw };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Sending and judging

export type Outcome = { status?: number; text: string; error?: string };

export async function send(
  base: string,
  method: string,
  url: string,
  headers: Record<string, string>,
  body: Body,
  lyingLength = false,
): Promise<Outcome> {
  const requestHeaders: Record<string, string> = { Accept: "application/json", ...headers };
  let bytes: string | Buffer | undefined;
  if (body.kind === "json") {
    bytes = serialize(body.value);
    requestHeaders["Content-Type"] = body.contentType ?? "application/json";
  } else if (body.kind === "raw") {
    bytes = body.bytes;
    if (body.contentType !== undefined) requestHeaders["Content-Type"] = body.contentType;
  }
  if (lyingLength) return sendLying(base, method, url, requestHeaders, Buffer.from(bytes ?? ""));
  // Framed by its length whatever the method (node:http sends a DELETE body unframed otherwise).
  if (bytes !== undefined) requestHeaders["Content-Length"] = String(Buffer.byteLength(bytes));
  // Kept-alive connections (a fresh connection per request costs more than most requests here),
  // except for what may make the server drop the connection while the body is still going out
  // (a large body, a head past Node's 16 KiB limit, a body in pieces): those get one of their
  // own, so a reset is blamed on the request that caused it. A kept-alive connection the server
  // closed just as it was reused is retried once on a fresh one (Node's documented race).
  const size = bytes === undefined ? 0 : Buffer.byteLength(bytes);
  const pieces = body.kind === "raw" ? (body.pieces ?? 1) : 1;
  const alone = size > 64 * 1024 || url.length > 8 * 1024 || pieces > 1;
  const first = await attempt(base, method, url, requestHeaders, bytes, pieces, alone ? false : keepAlive);
  if (first.reusedSocket && first.outcome.status === undefined)
    return (await attempt(base, method, url, requestHeaders, bytes, pieces, false)).outcome;
  return first.outcome;
}

const keepAlive = new Agent({ keepAlive: true, maxSockets: 256, scheduling: "lifo" });

function attempt(
  base: string,
  method: string,
  url: string,
  headers: Record<string, string>,
  bytes: string | Buffer | undefined,
  pieces: number,
  agent: Agent | false,
): Promise<{ outcome: Outcome; reusedSocket: boolean }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolveAttempt) => {
    let settled = false;
    const resolve = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      resolveAttempt({ outcome, reusedSocket: request.reusedSocket });
    };
    const request = httpRequest(
      { host: hostname, port, method, path: url, headers, agent, timeout: REQUEST_TIMEOUT_MS },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () =>
          resolve({ status: response.statusCode, text: Buffer.concat(chunks).toString("utf8") }),
        );
        response.on("error", (error) => resolve({ text: "", error: `response: ${error.message}` }));
      },
    );
    request.on("timeout", () => request.destroy(new Error(`no answer in ${REQUEST_TIMEOUT_MS} ms`)));
    request.on("error", (error: NodeJS.ErrnoException) => resolve({ text: "", error: error.code ?? error.message }));
    if (bytes === undefined || pieces <= 1) {
      request.end(bytes);
      return;
    }
    const buffer = Buffer.from(bytes);
    const size = Math.ceil(buffer.length / pieces);
    void (async () => {
      for (let offset = 0; offset < buffer.length; offset += size) {
        request.write(buffer.subarray(offset, offset + size));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      request.end();
    })();
  });
}

/** Declares the full length, sends half the bytes, then half-closes: a client that went away. */
export function sendLying(
  base: string,
  method: string,
  url: string,
  headers: Record<string, string>,
  bytes: Buffer,
): Promise<Outcome> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString("utf8");
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
      resolve({ status: status ? Number(status) : undefined, text: text.split("\r\n\r\n").slice(1).join("\r\n\r\n") });
    };
    const timer = setTimeout(finish, 5000);
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("close", finish);
    socket.on("error", finish);
    socket.on("connect", () => {
      const head = [
        `${method} ${url} HTTP/1.1`,
        `Host: ${hostname}:${port}`,
        ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
        `Content-Length: ${bytes.length + 64}`,
        "Connection: close",
      ].join("\r\n");
      socket.write(`${head}\r\n\r\n`);
      socket.write(bytes.subarray(0, Math.ceil(bytes.length / 2)));
      socket.end();
    });
  });
}

export const LEAK = /Failed query|insert into|\bselect\s[\s\S]*\bfrom\b|\$argon2|\bat .+\.(ts|js):\d+/i;

/** The project's own folder (as the server process sees it), and what marks a file path or a module. */
const SOURCE_ROOT = fileURLToPath(new URL("../..", import.meta.url));
const FILE_PATH = /node_modules\/|file:\/\/\/|\b(server|routers|db|workers|client)\/[\w./-]*\.(ts|js|mjs|cjs)\b/;

/** A value no answer may carry: an environment secret, another user's credential, a stranger's words. */
export type Secret = { label: string; value: string };

/** What an answer leaks, if anything: SQL, a password hash, a stack, a file path, a secret. */
export function leakIn(text: string, secrets: readonly Secret[]): string | undefined {
  if (!text) return undefined;
  if (LEAK.test(text)) return "SQL, a hash or a stack";
  if (text.includes(SOURCE_ROOT) || FILE_PATH.test(text)) return "a file path";
  for (const secret of secrets) if (secret.value && text.includes(secret.value)) return `secret: ${secret.label}`;
  return undefined;
}

/** What is wrong with a REST answer: a 5xx, an undocumented 4xx body, or no answer at all. */
export function restProblem(
  outcome: Outcome,
  lyingLength: boolean,
  secrets: readonly Secret[] = [],
): { kind: "5xx" | "shape" | "no-response" | "leak"; detail: string } | undefined {
  if (outcome.status === undefined) {
    // A client that declared more bytes than it sent and went away may get no answer.
    return lyingLength ? undefined : { kind: "no-response", detail: outcome.error ?? "no answer" };
  }
  if (outcome.status >= 500) return { kind: "5xx", detail: "server error" };
  const leak = leakIn(outcome.text, secrets);
  if (leak) return { kind: "leak", detail: `the answer leaks ${leak}` };
  if (outcome.status < 400) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(outcome.text);
  } catch {
    return { kind: "shape", detail: "4xx body is not JSON" };
  }
  if (body === null || typeof body !== "object" || Array.isArray(body))
    return { kind: "shape", detail: "4xx body is not an object" };
  const { message, errors } = body as { message?: unknown; errors?: unknown };
  if (typeof message !== "string") return { kind: "shape", detail: "no string `message`" };
  if (outcome.status === 422) {
    if (errors === null || typeof errors !== "object" || Array.isArray(errors)) {
      return { kind: "shape", detail: "422 without an `errors` object" };
    }
    for (const [field, texts] of Object.entries(errors)) {
      if (!Array.isArray(texts) || !texts.every((text) => typeof text === "string")) {
        return { kind: "shape", detail: `errors.${field} is not an array of strings` };
      }
    }
  }
  return undefined;
}

export type Failure = {
  kind: string;
  method: string;
  path: string;
  mutation: string;
  status: string;
  detail: string;
  auth: string;
  sent: string;
  got: string;
  count: number;
};

export class FailureLog {
  readonly byKey = new Map<string, Failure>();
  add(failure: Omit<Failure, "count">) {
    // Dedupe: one entry per (kind, method, path, mutation family, status).
    const family = failure.mutation.replace(/#\d+$/, "");
    const key = [failure.kind, failure.method, failure.path, family, failure.status].join(" ");
    const known = this.byKey.get(key);
    if (known) known.count++;
    else this.byKey.set(key, { ...failure, mutation: family, count: 1 });
  }
  count(kind: string) {
    return [...this.byKey.values()]
      .filter((failure) => failure.kind === kind)
      .reduce((sum, failure) => sum + failure.count, 0);
  }
  /**
   * One entry per (kind, status, mutation, answer): the operations that failed the same way are
   * listed together, with one request as the example.
   */
  render(limit = 150): string {
    const groups = new Map<string, { first: Failure; operations: string[]; requests: number }>();
    for (const failure of this.byKey.values()) {
      const key = [
        failure.kind,
        failure.status,
        failure.mutation,
        failure.detail,
        failure.got.replace(/\b[a-z]{2,4}_[0-9A-Z]{26}\b/g, "<id>"),
      ].join("|");
      const group = groups.get(key) ?? { first: failure, operations: [], requests: 0 };
      group.operations.push(`${failure.method} ${failure.path}`);
      group.requests += failure.count;
      groups.set(key, group);
    }
    const list = [...groups.values()].sort(
      (a, b) =>
        a.first.kind.localeCompare(b.first.kind) ||
        a.first.mutation.localeCompare(b.first.mutation) ||
        a.first.path.localeCompare(b.first.path),
    );
    const lines = list.slice(0, limit).map(({ first, operations, requests }) => {
      const where =
        operations.length === 1 ? operations[0] : `${operations.length} operations: ${operations.join(", ")}`;
      return (
        `  [${first.kind}] ${first.status} mutation=${first.mutation}${first.detail ? ` (${first.detail})` : ""} ×${requests}\n` +
        `      on:   ${where}\n      e.g.: ${first.sent} (auth=${first.auth})\n      got:  ${first.got}`
      );
    });
    if (list.length > limit) lines.push(`  … and ${list.length - limit} more (see the JSON file)`);
    return lines.join("\n");
  }
}

export const excerpt = (text: string, length = 160) => {
  const shown = JSON.stringify(text.length > length ? `${text.slice(0, length)}…(${text.length} chars)` : text);
  return shown;
};

export function describeSent(testCase: Case): string {
  const body =
    testCase.body.kind === "none"
      ? "no body"
      : testCase.body.kind === "json"
        ? `json ${excerpt(serialize(testCase.body.value), 120)}`
        : `${testCase.body.contentType ?? "no content-type"} ${excerpt(
            typeof testCase.body.bytes === "string" ? testCase.body.bytes : testCase.body.bytes.toString("latin1"),
            120,
          )}`;
  return `${testCase.op.method} ${excerpt(testCase.url, 160)} ${body}${testCase.lyingLength ? " (Content-Length +64, half sent)" : ""}`;
}

export async function runPool<T>(items: T[], limit: number, work: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

// ---------------------------------------------------------------------------------------------

/** Ops whose success changes what the others rely on: sent after the rest. */
export const DESTRUCTIVE = (op: Operation) =>
  op.method === "DELETE" ||
  ["members-update", "auth-logout", "auth-webLogout", "auth-changePassword"].includes(op.name);
/** Ops that revoke the caller's own token: each authenticated one gets a token of its own. */
export const REVOKES_OWN_TOKEN = new Set(["auth-logout", "auth-webLogout", "auth.logout", "auth.webLogout"]);
