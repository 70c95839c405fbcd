// Token abilities on live subscriptions (docs/api.md, "Abilities"): a subscription delivers
// what queries show, so it needs "read", over WebSocket and over server-sent events alike; a
// "read" token still cannot post, and a "write"-only token can post but neither query nor
// subscribe. The cookie's Origin check still applies to subscriptions (they are not "safe"
// like queries: a page of another site must not hold a stream open with the user's cookie).
import { describe, expect, it } from "vitest";
import type { ChatClient } from "@chat-service/client";
import { registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { attach, collect, world, type Feed } from "./helpers/live.ts";
import { rejectionOf } from "./helpers/rpc.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

const lacks = (ability: string) => `This token does not have the "${ability}" ability.`;

async function personalToken(user: RegisteredUser, abilities: string[]): Promise<string> {
  const response = await ctx.api.post(
    "/api/v1/tokens",
    { name: `live ${abilities.join("+")}`, abilities },
    { token: user.token },
  );
  expect(response.status).toBe(201);
  return response.body.access_token;
}

/** The first error a feed ends with (a refused subscription), within a few seconds. */
async function failureOf(feed: Feed): Promise<any> {
  return until(() => feed.errors[0], "the subscription to be refused", 5_000);
}

for (const door of ["WebSocket", "SSE"] as const) {
  const sse = door === "SSE";

  describe(`a read token over ${door}`, () => {
    it("subscribes to a channel and to its own stream, and receives events; it cannot post", async () => {
      const { owner, member, workspace, general } = await live.team();
      const read = await personalToken(member, ["read"]);
      const client: ChatClient = live.chat(read, { sse });

      const channelFeed = live.onChannel(client, { workspace_id: workspace.id, channel_id: general.id });
      await attach(
        channelFeed,
        () => live.post(owner, workspace.id, general.id, `hello ${door}`),
        ({ event }) => event.type === "message.created",
      );
      expect(channelFeed.errors).toEqual([]);
      expect(channelFeed.messages().some((message) => message.content === `hello ${door}`)).toBe(true);

      const userFeed = collect((handlers) => client.events.onUser.subscribe(undefined, handlers));
      let rename = 0;
      await attach(
        userFeed,
        () => ctx.api.patch("/api/v1/me", { name: `Reader ${++rename}` }, { token: member.token }),
        ({ event }) => event.type === "user.updated",
      );
      expect(userFeed.errors).toEqual([]);

      // Reading is all it may do.
      const rest = await ctx.api.post(
        `/api/v1/workspaces/${workspace.id}/channels/${general.id}/messages`,
        { content: "not allowed" },
        { token: read },
      );
      expect(rest.status).toBe(403);
      expect(rest.body).toEqual({ message: lacks("write") });
      const rpc = await rejectionOf(
        client.messages.post.mutate({ workspace_id: workspace.id, channel_id: general.id, content: "not allowed" }),
      );
      expect(rpc.data?.code).toBe("FORBIDDEN");
      expect(rpc.message).toBe(lacks("write"));
    });
  });

  describe(`a write-only token over ${door}`, () => {
    it("cannot subscribe (403, the read ability) but can post", async () => {
      const { member, workspace, general } = await live.team();
      const write = await personalToken(member, ["write"]);
      const client = live.chat(write, { sse });

      const channelError = await failureOf(
        live.onChannel(client, { workspace_id: workspace.id, channel_id: general.id }),
      );
      expect(channelError.data?.code).toBe("FORBIDDEN");
      expect(channelError.message).toBe(lacks("read"));
      const userError = await failureOf(collect((handlers) => client.events.onUser.subscribe(undefined, handlers)));
      expect(userError.data?.code).toBe("FORBIDDEN");

      const posted = await ctx.api.post(
        `/api/v1/workspaces/${workspace.id}/channels/${general.id}/messages`,
        { content: "written" },
        { token: write },
      );
      expect(posted.status).toBe(201);
    });
  });
}

describe("a subscription with the web session cookie", () => {
  async function sessionCookie(user: RegisteredUser): Promise<string> {
    const response = await ctx.api.post("/api/v1/auth/web/login", { email: user.email, password: user.password });
    expect(response.status).toBe(200);
    return response.headers
      .getSetCookie()
      .map((cookie) => cookie.split(";")[0]!)
      .find((cookie) => cookie.startsWith("chat_session="))!;
  }

  /** What an SSE subscription answers within its first second (status and text). */
  async function openStream(headers: Record<string, string>): Promise<{ status: number; text: string }> {
    const controller = new AbortController();
    const response = await fetch(`${ctx.server.url}/trpc/events.onUser`, {
      headers: { Accept: "text/event-stream", ...headers },
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    const deadline = Date.now() + 1_000;
    while (!text.includes("serialized-error")) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const chunk = await Promise.race([
        reader.read(),
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), left)),
      ]);
      if (!chunk || chunk.done) break;
      text += decoder.decode(chunk.value);
    }
    controller.abort();
    await reader.cancel().catch(() => {});
    return { status: response.status, text };
  }

  it("still needs a trusted Origin (the cookie rides along with cross-site requests)", async () => {
    const user = await registerUser(ctx.api);
    const cookie = await sessionCookie(user);
    const refusal =
      /event: serialized-error\ndata: .*"Cross-site request refused: the Origin is not trusted\.".*"FORBIDDEN"/;
    expect((await openStream({ Cookie: cookie, Origin: "http://evil.example" })).text).toMatch(refusal);
    expect((await openStream({ Cookie: cookie })).text).toMatch(refusal);

    const trusted = await openStream({ Cookie: cookie, Origin: new URL(ctx.server.config.appUrl).origin });
    expect(trusted.status).toBe(200);
    expect(trusted.text).toContain("event: connected");
    expect(trusted.text).not.toContain("serialized-error");
  });
});
