// Fake push services for tests, real servers on 127.0.0.1 (random ports):
//
// - startFakeExpo: Expo's send endpoint. Takes a JSON array of messages, answers one ticket
//   per message ({status: "ok", id}, or DeviceNotRegistered for an unregistered token).
// - startFakeFcm: FCM HTTP v1 plus Google's OAuth 2 token endpoint. Writes a service-account
//   JSON file (fresh RSA key, token_uri = this server's /token); /token checks the RS256
//   jwt-bearer assertion and issues access tokens; messages:send takes only tokens it issued.
// - startFakeApns: APNs over HTTP/2 with TLS (a self-signed certificate for 127.0.0.1 and
//   localhost, written out as the CA file). Writes a .p8 key (fresh EC P-256) and checks each
//   request's ES256 provider token (kid, iss = team id) against it.
//
// Each records what it accepted in `received`, and can be told to `fail(status, {retryAfter,
// times})` (the next `times` requests, or until `recover()`), to `hang()` (never answer until
// `recover()` or `stop()`), or that a device token is gone (`unregister(token)`).
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { jwtVerify } from "jose";
import { generate } from "selfsigned";
import { until } from "./wait.ts";
import { FakeMode } from "./fake-mode.ts";

export type FailOptions = {
  /** Retry-After header value (seconds, or an HTTP date). */
  retryAfter?: number | string;
  /** How many requests fail; all of them until recover() when absent. */
  times?: number;
  /** APNs only: the `reason` in the answer's body. */
  reason?: string;
};

export type PushFake<Received> = {
  received: Received[];
  fail(status: number, options?: FailOptions): void;
  /** Holds every following request unanswered, until recover() or stop(). */
  hang(): void;
  recover(): void;
  unregister(token: string): void;
  /** Resolves when `received` has at least `count` entries. */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
};

function waiter(received: unknown[]) {
  return async (count: number, timeoutMs = 5_000) => {
    await until(() => (received.length >= count ? true : undefined), `${count} pushes`, timeoutMs);
  };
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

function answerJson(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}

const retryAfterHeader = (options: FailOptions): Record<string, string> =>
  options.retryAfter === undefined ? {} : { "retry-after": String(options.retryAfter) };

async function listen(server: ReturnType<typeof createServer> | http2.Http2SecureServer): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

// ---------------------------------------------------------------------------------------- Expo

export type ExpoReceived = {
  to: string;
  title?: string;
  body?: string;
  data?: Record<string, string>;
  [field: string]: unknown;
  headers: IncomingHttpHeaders;
};

export type FakeExpo = PushFake<ExpoReceived> & {
  /** The full send URL (PUSH_EXPO_URL). */
  url: string;
  /** Requests that reached the send endpoint (failed and hung ones included). */
  readonly requests: number;
  /** Number of messages in each request, in order. */
  batchSizes: number[];
};

/** `onReceive` is called for each message accepted, as it is added to `received` (benchmarks time arrivals). */
export async function startFakeExpo(options: { onReceive?: (message: ExpoReceived) => void } = {}): Promise<FakeExpo> {
  const mode = new FakeMode<FailOptions>();
  const received: ExpoReceived[] = [];
  const batchSizes: number[] = [];
  const unregistered = new Set<string>();
  const sendPath = "/--/api/v2/push/send";

  const server = createServer(async (request, response) => {
    if (request.method !== "POST" || request.url !== sendPath) return answerJson(response, 404, {});
    const messages = JSON.parse(await readBody(request)) as ExpoReceived[];
    if (!Array.isArray(messages)) return answerJson(response, 400, { errors: [{ code: "VALIDATION_ERROR" }] });
    batchSizes.push(messages.length);
    const next = mode.next();
    if (next === "hang") return;
    if (next) {
      const { status, options } = next;
      const code = status === 429 ? "TOO_MANY_REQUESTS" : status >= 500 ? "INTERNAL_SERVER_ERROR" : "VALIDATION_ERROR";
      return answerJson(response, status, { errors: [{ code, message: "fake failure" }] }, retryAfterHeader(options));
    }
    const tickets = messages.map((message) => {
      if (unregistered.has(message.to)) {
        return {
          status: "error",
          message: `"${message.to}" is not a registered push notification recipient`,
          details: { error: "DeviceNotRegistered", expoPushToken: message.to },
        };
      }
      const accepted = { ...message, headers: request.headers };
      received.push(accepted);
      options.onReceive?.(accepted);
      return { status: "ok", id: randomUUID() };
    });
    answerJson(response, 200, { data: tickets });
  });
  const port = await listen(server);

  return {
    url: `http://127.0.0.1:${port}${sendPath}`,
    received,
    batchSizes,
    get requests() {
      return batchSizes.length;
    },
    fail: (status, options) => mode.fail(status, options),
    hang: () => mode.hang(),
    recover: () => mode.recover(),
    unregister: (token) => unregistered.add(token),
    waitFor: waiter(received),
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ----------------------------------------------------------------------------------------- FCM

export type FcmReceived = {
  token: string;
  /** The whole `message` object of the request body. */
  message: Record<string, any>;
  headers: IncomingHttpHeaders;
};

export type FakeFcm = PushFake<FcmReceived> & {
  env: { PUSH_FCM_URL: string; PUSH_FCM_CREDENTIALS: string };
  projectId: string;
  clientEmail: string;
  /** Access tokens issued by /token so far. */
  readonly tokenGrants: number;
  /** The token endpoint answers `status` (the next `times` requests, or until recover()). */
  failTokenEndpoint(status: number, options?: FailOptions): void;
  /** Forgets every issued access token: the next sends get 401 until a new one is fetched. */
  revokeAccessTokens(): void;
};

const FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging";
const FCM_STATUS_NAMES: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
};

function fcmError(code: number, errorCode?: string) {
  const status = FCM_STATUS_NAMES[code] ?? "UNKNOWN";
  const details = [{ "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", errorCode: errorCode ?? status }];
  return { error: { code, message: `fake ${status}`, status, details } };
}

export async function startFakeFcm(): Promise<FakeFcm> {
  const mode = new FakeMode<FailOptions>();
  const tokenMode = new FakeMode<FailOptions>();
  const received: FcmReceived[] = [];
  const unregistered = new Set<string>();
  const accessTokens = new Set<string>();
  let tokenGrants = 0;
  const projectId = "fake-project";
  const clientEmail = "push@fake-project.iam.gserviceaccount.com";
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const sendPath = `/v1/projects/${projectId}/messages:send`;
  let tokenUri = "";

  async function token(request: IncomingMessage, response: ServerResponse) {
    const form = new URLSearchParams(await readBody(request));
    const next = tokenMode.next();
    if (next === "hang") return;
    if (next) return answerJson(response, next.status, { error: "temporarily_unavailable" });
    try {
      if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") throw new Error("grant_type");
      const { payload } = await jwtVerify(form.get("assertion") ?? "", publicKey, {
        algorithms: ["RS256"],
        issuer: clientEmail,
        audience: tokenUri,
      });
      if (payload.scope !== FCM_SCOPE) throw new Error("scope");
    } catch {
      return answerJson(response, 400, { error: "invalid_grant", error_description: "Invalid JWT" });
    }
    const accessToken = `ya29.fake-${randomUUID()}`;
    accessTokens.add(accessToken);
    tokenGrants += 1;
    answerJson(
      response,
      200,
      { access_token: accessToken, expires_in: 3600, token_type: "Bearer" },
      { "cache-control": "no-store" },
    );
  }

  async function send(request: IncomingMessage, response: ServerResponse) {
    const body = JSON.parse(await readBody(request)) as { message?: Record<string, any> };
    const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? "")?.[1];
    if (!bearer || !accessTokens.has(bearer)) return answerJson(response, 401, fcmError(401));
    const next = mode.next();
    if (next === "hang") return;
    if (next) return answerJson(response, next.status, fcmError(next.status), retryAfterHeader(next.options));
    const message = body.message;
    if (typeof message?.token !== "string") return answerJson(response, 400, fcmError(400));
    if (unregistered.has(message.token)) return answerJson(response, 404, fcmError(404, "UNREGISTERED"));
    received.push({ token: message.token, message, headers: request.headers });
    answerJson(response, 200, { name: `projects/${projectId}/messages/${randomUUID()}` });
  }

  const server = createServer((request, response) => {
    if (request.method === "POST" && request.url === "/token") return void token(request, response);
    if (request.method === "POST" && request.url === sendPath) return void send(request, response);
    answerJson(response, 404, fcmError(404));
  });
  const port = await listen(server);
  const url = `http://127.0.0.1:${port}`;
  tokenUri = `${url}/token`;

  const directory = mkdtempSync(path.join(tmpdir(), "fake-fcm-"));
  const credentials = path.join(directory, "service-account.json");
  const account = {
    type: "service_account",
    project_id: projectId,
    private_key_id: "fake-key",
    private_key: privateKey.export({ type: "pkcs8", format: "pem" }),
    client_email: clientEmail,
    token_uri: tokenUri,
  };
  writeFileSync(credentials, JSON.stringify(account, null, 2));

  return {
    env: { PUSH_FCM_URL: url, PUSH_FCM_CREDENTIALS: credentials },
    projectId,
    clientEmail,
    received,
    get tokenGrants() {
      return tokenGrants;
    },
    fail: (status, options) => mode.fail(status, options),
    failTokenEndpoint: (status, options) => tokenMode.fail(status, options),
    hang: () => mode.hang(),
    recover: () => {
      mode.recover();
      tokenMode.recover();
    },
    unregister: (deviceToken) => unregistered.add(deviceToken),
    revokeAccessTokens: () => accessTokens.clear(),
    waitFor: waiter(received),
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------- APNs

export type ApnsReceived = {
  /** The device token from the path. */
  token: string;
  headers: http2.IncomingHttpHeaders;
  payload: Record<string, any>;
};

export type FakeApns = PushFake<ApnsReceived> & {
  env: {
    PUSH_APNS_URL: string;
    PUSH_APNS_KEY: string;
    PUSH_APNS_KEY_ID: string;
    PUSH_APNS_TEAM_ID: string;
    PUSH_APNS_TOPIC: string;
    PUSH_APNS_CA: string;
  };
  /** Distinct provider tokens (JWTs) seen on valid requests. */
  readonly providerTokens: number;
  /** HTTP/2 sessions (connections) clients opened. */
  readonly sessionsOpened: number;
};

const APNS_REASONS: Record<number, string> = {
  400: "BadTopic",
  403: "InvalidProviderToken",
  404: "BadPath",
  410: "Unregistered",
  413: "PayloadTooLarge",
  429: "TooManyRequests",
  500: "InternalServerError",
  503: "ServiceUnavailable",
};

export async function startFakeApns(): Promise<FakeApns> {
  const mode = new FakeMode<FailOptions>();
  const received: ApnsReceived[] = [];
  const unregistered = new Set<string>();
  const providerTokens = new Set<string>();
  const sessions = new Set<http2.ServerHttp2Session>();
  let sessionsOpened = 0;
  const keyId = "FAKEKEY123";
  const teamId = "FAKETEAM12";
  const topic = "com.example.chat";
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const tlsCertificate = await generate([{ name: "commonName", value: "localhost" }], {
    keyType: "ec",
    algorithm: "sha256",
    extensions: [
      { name: "basicConstraints", cA: true },
      { name: "keyUsage", digitalSignature: true, keyCertSign: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [
          { type: 2, value: "localhost" },
          { type: 7, ip: "127.0.0.1" },
        ],
      },
    ],
  });

  function answer(
    stream: http2.ServerHttp2Stream,
    status: number,
    body?: unknown,
    headers: Record<string, string> = {},
  ) {
    stream.respond({ ":status": status, "apns-id": randomUUID(), ...headers });
    stream.end(body === undefined ? undefined : JSON.stringify(body));
  }

  async function authorized(authorization: string | undefined): Promise<string | undefined> {
    const jwt = /^bearer (.+)$/i.exec(authorization ?? "")?.[1];
    if (!jwt) return undefined;
    try {
      const { protectedHeader } = await jwtVerify(jwt, publicKey, { algorithms: ["ES256"], issuer: teamId });
      return protectedHeader.kid === keyId ? jwt : undefined;
    } catch {
      return undefined;
    }
  }

  const server = http2.createSecureServer({ key: tlsCertificate.private, cert: tlsCertificate.cert });
  server.on("session", (session) => {
    sessionsOpened += 1;
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  server.on("stream", (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", async () => {
      const deviceToken = /^\/3\/device\/([^/?]+)$/.exec(headers[":path"] ?? "")?.[1];
      if (headers[":method"] !== "POST" || !deviceToken) return answer(stream, 404, { reason: "BadPath" });
      const jwt = await authorized(headers.authorization);
      if (!jwt) return answer(stream, 403, { reason: "InvalidProviderToken" });
      providerTokens.add(jwt);
      if (headers["apns-topic"] !== topic) return answer(stream, 400, { reason: "BadTopic" });
      const next = mode.next();
      if (next === "hang") return;
      if (next) {
        const reason = next.options.reason ?? APNS_REASONS[next.status] ?? "BadRequest";
        return answer(stream, next.status, { reason }, retryAfterHeader(next.options));
      }
      if (unregistered.has(deviceToken)) {
        return answer(stream, 410, { reason: "Unregistered", timestamp: Date.now() });
      }
      const payload = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, any>;
      received.push({ token: deviceToken, headers, payload });
      answer(stream, 200);
    });
  });
  const port = await listen(server);

  const directory = mkdtempSync(path.join(tmpdir(), "fake-apns-"));
  const keyFile = path.join(directory, `AuthKey_${keyId}.p8`);
  writeFileSync(keyFile, privateKey.export({ type: "pkcs8", format: "pem" }));
  const caFile = path.join(directory, "ca.pem");
  writeFileSync(caFile, tlsCertificate.cert);

  return {
    env: {
      PUSH_APNS_URL: `https://127.0.0.1:${port}`,
      PUSH_APNS_KEY: keyFile,
      PUSH_APNS_KEY_ID: keyId,
      PUSH_APNS_TEAM_ID: teamId,
      PUSH_APNS_TOPIC: topic,
      PUSH_APNS_CA: caFile,
    },
    received,
    get providerTokens() {
      return providerTokens.size;
    },
    get sessionsOpened() {
      return sessionsOpened;
    },
    fail: (status, options) => mode.fail(status, options),
    hang: () => mode.hang(),
    recover: () => mode.recover(),
    unregister: (deviceToken) => unregistered.add(deviceToken),
    waitFor: waiter(received),
    stop: async () => {
      for (const session of sessions) session.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

// ------------------------------------------------------------------------- what a device got

export type PushFakes = { expo: FakeExpo; fcm: FakeFcm; apns: FakeApns };
export type FakeDevice = { provider: "expo" | "fcm" | "apns"; token: string };

/**
 * One push a device got, read from its provider's request body: a notification (title, body,
 * data) or a silent badge update (`silent`: no title or body, no alert), each with the badge the
 * body carried (Expo `badge`, FCM `data.badge`, APNs `aps.badge`; undefined when it had none).
 * FCM's `data.badge` is taken out of `data`, which holds the ids the app opens.
 */
export type DevicePush =
  | { silent: false; title: string; body: string; data: Record<string, string>; badge: number | undefined }
  | { silent: true; badge: number | undefined };

export function pushesReceived(fakes: PushFakes, device: FakeDevice): DevicePush[] {
  const badgeOf = (value: unknown) => (value === undefined ? undefined : Number(value));
  switch (device.provider) {
    case "expo":
      return fakes.expo.received
        .filter((push) => push.to === device.token)
        .map((push) =>
          push.title === undefined && push.body === undefined
            ? { silent: true, badge: badgeOf(push.badge) }
            : {
                silent: false,
                title: push.title ?? "",
                body: push.body ?? "",
                data: push.data ?? {},
                badge: badgeOf(push.badge),
              },
        );
    case "fcm":
      return fakes.fcm.received
        .filter((push) => push.token === device.token)
        .map(({ message }) => {
          const { badge, ...data } = (message.data ?? {}) as Record<string, string>;
          return message.notification
            ? {
                silent: false,
                title: message.notification.title,
                body: message.notification.body,
                data,
                badge: badgeOf(badge),
              }
            : { silent: true, badge: badgeOf(badge) };
        });
    case "apns":
      return fakes.apns.received
        .filter((push) => push.token === device.token)
        .map(({ payload: { aps, ...data } }) =>
          aps.alert
            ? { silent: false, title: aps.alert.title, body: aps.alert.body, data, badge: badgeOf(aps.badge) }
            : { silent: true, badge: badgeOf(aps.badge) },
        );
  }
}
