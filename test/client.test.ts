// The typed tRPC client (@chat-service/client) against the real server: queries and mutations over
// HTTP batching, typed errors, and live events over the client's WebSocket link.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createChatClient, TRPCClientError, type ChatClient, type StreamEvent } from "@chat-service/client";
import { restClient, type RestClient } from "./helpers/api.ts";
import { DEFAULT_PASSWORD, registerUser, uniqueEmail } from "./helpers/factories.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";
import { rejectionOf } from "./helpers/rpc.ts";

let server: TestServer;
let api: RestClient;
const clients: ChatClient[] = [];

beforeAll(async () => {
  server = await startTestServer();
  api = restClient(server.url);
});
afterAll(async () => {
  for (const client of clients) {
    try {
      client.close();
    } catch {
      // Reported by the close() test below; the server's shutdown closes the sockets anyway.
    }
  }
  await server?.close();
});

/** A client that is closed after the file (Node 20 has no global WebSocket: pass ws's). */
function chat(token?: string): ChatClient {
  const client = createChatClient({
    url: server.url,
    token,
    webSocket: { WebSocket },
  });
  clients.push(client);
  return client;
}

const registration = (overrides: Record<string, unknown> = {}) => ({
  name: "Client User",
  email: uniqueEmail("client"),
  password: DEFAULT_PASSWORD,
  password_confirmation: DEFAULT_PASSWORD,
  ...overrides,
});

describe("queries and mutations over HTTP", () => {
  it("registers and signs in with the token response", async () => {
    const anonymous = chat();
    const body = registration({ device_name: "Node script" });
    const registered = await anonymous.auth.register.mutate(body);
    expect(registered).toEqual({
      access_token: expect.stringMatching(/^chat_/),
      token_type: "Bearer",
      user: { id: expect.any(Number), name: "Client User", email: body.email },
    });
    const login = await anonymous.auth.login.mutate({
      email: body.email,
      password: DEFAULT_PASSWORD,
      device_name: "CLI",
    });
    expect(login).toEqual({ access_token: expect.any(String), token_type: "Bearer", user: registered.user });
    expect(login.access_token).not.toBe(registered.access_token);
  });

  it("reads and updates the caller's own record with the token", async () => {
    const registered = await chat().auth.register.mutate(registration({ preferred_language: "th" }));
    const client = chat(registered.access_token);
    const me = await client.me.get.query();
    expect(me).toMatchObject({
      id: registered.user.id,
      name: "Client User",
      email: registered.user.email,
      email_verified_at: null,
      is_active: true,
      preferred_language: "th",
      avatar_url: null,
    });
    expect(me.created_at).toMatch(/\+00:00$/);

    const updated = await client.me.update.mutate({
      name: "Renamed Via Client",
      avatar_url: "https://cdn.example.test/a.png",
    });
    expect(updated).toMatchObject({
      id: registered.user.id,
      name: "Renamed Via Client",
      avatar_url: "https://cdn.example.test/a.png",
    });
    expect((await client.me.get.query()).name).toBe("Renamed Via Client");
    // The REST door sees the same record.
    expect((await api.get("/api/v1/me", { token: registered.access_token })).body.name).toBe("Renamed Via Client");
  });

  it("changes the password and logs out through RPC", async () => {
    const registered = await chat().auth.register.mutate(registration());
    const client = chat(registered.access_token);
    const changed = await client.auth.changePassword.mutate({
      current_password: DEFAULT_PASSWORD,
      password: "another-password",
      password_confirmation: "another-password",
    });
    expect(changed).toEqual({ message: "Password changed." });
    const wrong = await rejectionOf(
      client.auth.changePassword.mutate({
        current_password: "nope-nope",
        password: "x-password",
        password_confirmation: "x-password",
      }),
    );
    expect(wrong.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      errors: { current_password: ["The password is incorrect."] },
    });
    expect(await client.auth.logout.mutate()).toEqual({ message: "Logged out." });
    expect((await rejectionOf(client.me.get.query())).data.code).toBe("UNAUTHORIZED");
    const relogin = await chat().auth.login.mutate({ email: registered.user.email, password: "another-password" });
    expect(relogin.user.id).toBe(registered.user.id);
  });

  it("creates, lists and deletes personal access tokens", async () => {
    const registered = await chat().auth.register.mutate(registration());
    const client = chat(registered.access_token);
    const created = await client.tokens.create.mutate({ name: "CI bot", abilities: ["read"] });
    expect(created).toEqual({
      data: {
        id: expect.any(String),
        name: "CI bot",
        abilities: ["read"],
        last_used_at: null,
        created_at: expect.any(String),
      },
      access_token: expect.any(String),
      token_type: "Bearer",
    });

    const listed = await client.tokens.list.query();
    expect(listed.data.map((token) => token.name).sort()).toEqual(["CI bot", "sign-in"]);
    expect(listed.meta.total).toBe(2);

    // The new token reads but cannot write.
    const readOnly = chat(created.access_token);
    expect((await readOnly.me.get.query()).id).toBe(registered.user.id);
    expect((await rejectionOf(readOnly.me.update.mutate({ name: "Nope" }))).data?.code).toBe("FORBIDDEN");

    await client.tokens.delete.mutate({ id: created.data.id });
    expect((await client.tokens.list.query()).data.map((token) => token.name)).toEqual(["sign-in"]);
    expect((await rejectionOf(readOnly.me.get.query())).data?.code).toBe("UNAUTHORIZED");
    // Deleting it again: the token is gone.
    expect((await rejectionOf(client.tokens.delete.mutate({ id: created.data.id }))).data?.code).toBe("NOT_FOUND");
  });
});

describe("the client itself", () => {
  it("answers queries without a WebSocket implementation (documented usage, Node 20)", async () => {
    const user = await registerUser(api);
    // The header's example: createChatClient({ url, token }) then chat.me.get.query(). Queries go
    // over HTTP, so a runtime without a global WebSocket (Node 20) must be able to make them.
    const client = createChatClient({ url: server.url, token: user.token });
    clients.push(client);
    expect((await client.me.get.query()).id).toBe(user.id);
  });

  it("close() closes the client without throwing", async () => {
    const user = await registerUser(api);
    const client = createChatClient({
      url: server.url,
      token: user.token,
      webSocket: { WebSocket },
    });
    expect((await client.me.get.query()).id).toBe(user.id);
    expect(() => client.close()).not.toThrow();
  });
});

describe("typed errors", () => {
  it("rejects a bad registration with UNPROCESSABLE_CONTENT, 422 and field errors", async () => {
    const error = await rejectionOf(
      chat().auth.register.mutate(registration({ password: "short", password_confirmation: "short" })),
    );
    expect(error.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      httpStatus: 422,
      errors: { password: ["The password field must be at least 8 characters."] },
    });
    expect(Object.keys(error.data.errors)).toEqual(["password"]);
  });

  it("keys a taken e-mail under email", async () => {
    const body = registration();
    await chat().auth.register.mutate(body);
    const error = await rejectionOf(chat().auth.register.mutate({ ...body, email: body.email.toUpperCase() }));
    expect(error.data).toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      httpStatus: 422,
      errors: { email: ["The email has already been taken."] },
    });
  });

  it("answers me.get without a token with UNAUTHORIZED", async () => {
    const error = await rejectionOf(chat().me.get.query());
    expect(error.data).toMatchObject({ code: "UNAUTHORIZED", httpStatus: 401 });
  });

  it("answers a throttled login with TOO_MANY_REQUESTS and retryAfter", async () => {
    const user = await registerUser(api);
    const client = chat();
    for (let attempt = 1; attempt <= 5; attempt++) {
      const error = await rejectionOf(client.auth.login.mutate({ email: user.email, password: "wrong-password" }));
      expect(error.data.code).toBe("UNPROCESSABLE_CONTENT");
    }
    const error = await rejectionOf(client.auth.login.mutate({ email: user.email, password: user.password }));
    expect(error.data).toMatchObject({ code: "TOO_MANY_REQUESTS", httpStatus: 429 });
    expect(error.data.retryAfter).toEqual(expect.any(Number));
    expect(error.data.retryAfter).toBeGreaterThan(0);
    expect(error.data.retryAfter).toBeLessThanOrEqual(60);
  });
});

describe("live events over the WebSocket link", () => {
  type Received = { id: string | undefined; event: StreamEvent };

  /** Subscribes to events.onUser; collects what onData gets, unwrapping tracked envelopes. */
  function subscribe(client: ChatClient) {
    const received: Received[] = [];
    const raw: unknown[] = [];
    const errors: unknown[] = [];
    let started = false;
    const subscription = client.events.onUser.subscribe(undefined, {
      onStarted: () => {
        started = true;
      },
      onData: (value) => {
        raw.push(value);
        // tracked() events reach the client as { id, data } envelopes.
        const envelope = value as unknown as { id?: string; data?: StreamEvent };
        const event =
          envelope.data && typeof envelope.data === "object" && "type" in envelope.data
            ? envelope.data
            : (value as unknown as StreamEvent);
        received.push({ id: envelope.id, event });
      },
      onError: (error) => errors.push(error),
    });
    return { received, raw, errors, subscription, isStarted: () => started };
  }

  it("delivers the caller's own user.updated events, with an id, and nobody else's", async () => {
    const me = await registerUser(api, { name: "Subscriber" });
    const other = await registerUser(api, { name: "Someone Else" });
    const live = subscribe(chat(me.token));
    await until(() => (live.isStarted() ? true : undefined), "the subscription to start");

    // The server may still be attaching to the event bus when "started" arrives: update until
    // the first event comes through.
    const deadline = Date.now() + 10_000;
    let attempt = 0;
    while (
      !live.received.some(
        ({ event }) => event.type === "user.updated" && event.data.user.name.startsWith("Subscriber renamed"),
      )
    ) {
      if (Date.now() > deadline) throw new Error("no user.updated event arrived");
      attempt++;
      const patched = await api.patch("/api/v1/me", { name: `Subscriber renamed ${attempt}` }, { token: me.token });
      expect(patched.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(live.errors).toEqual([]);

    // Now the subscription is attached: another user's update, then one more of ours.
    expect((await api.patch("/api/v1/me", { name: "Other renamed" }, { token: other.token })).status).toBe(200);
    expect((await api.patch("/api/v1/me", { name: "Final name" }, { token: me.token })).status).toBe(200);
    const final = await until(
      () => live.received.find(({ event }) => event.type === "user.updated" && event.data.user.name === "Final name"),
      "the final event",
    );

    expect(live.raw.at(-1)).toEqual({
      id: expect.any(String),
      data: expect.objectContaining({ type: "user.updated" }),
    });
    expect(final.id).toEqual(expect.any(String));
    expect(final.event).toMatchObject({
      id: final.id,
      type: "user.updated",
      created_at: expect.stringMatching(/\+00:00$/),
      data: { user: { id: me.id, name: "Final name", email: me.email } },
    });
    for (const { id, event } of live.received) {
      if (event.type !== "user.updated") throw new Error(`unexpected ${event.type}`);
      expect(event.data.user.id).toBe(me.id);
      expect(id).toEqual(expect.any(String));
    }
    expect(live.received.map(({ event }) => event.type === "user.updated" && event.data.user.name)).not.toContain(
      "Other renamed",
    );
    expect(new Set(live.received.map(({ id }) => id)).size).toBe(live.received.length);
    live.subscription.unsubscribe();
  });

  it("refuses a subscription without a token with UNAUTHORIZED", async () => {
    const live = subscribe(chat());
    const error = await until(() => live.errors[0], "the subscription error");
    expect(error).toBeInstanceOf(TRPCClientError);
    expect((error as TRPCClientError<any>).data?.code).toBe("UNAUTHORIZED");
    expect(live.received).toEqual([]);
    live.subscription.unsubscribe();
  });

  it("refuses a subscription with a revoked token", async () => {
    const user = await registerUser(api);
    expect((await api.post("/api/v1/auth/app/logout", undefined, { token: user.token })).status).toBe(200);
    const live = subscribe(chat(user.token));
    const error = await until(() => live.errors[0], "the subscription error");
    expect((error as TRPCClientError<any>).data?.code).toBe("UNAUTHORIZED");
    live.subscription.unsubscribe();
  });
});
