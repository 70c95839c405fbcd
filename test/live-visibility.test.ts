// Events go only to those who may see their record: what happens to a private channel (created,
// renamed, members added or removed, deleted) reaches its members, never the other members of
// the workspace, live or when they replay from the start, as REST answers them 404 for it.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { registerUser } from "./helpers/factories.ts";
import { arrived, collect, world, type Feed } from "./helpers/live.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const live = world(
  () => ctx.server,
  () => ctx.api,
);

const mentions = (feed: Feed, secrets: string[]) =>
  feed.received.filter(({ event }) => secrets.some((secret) => JSON.stringify(event).includes(secret)));

describe("events of a private channel", () => {
  it("reach its members and nobody else in the workspace, live and on replay from the start", async () => {
    const { owner, member: outsider, workspace, general } = await live.team();
    const insider = await registerUser(ctx.api, { name: "Insider" });
    expect((await ctx.api.post(`/api/v1/workspaces/${workspace.id}/join`, {}, { token: insider.token })).status).toBe(
      200,
    );
    const outsiderFeed = await live.attachedUserFeed(outsider);
    const insiderFeed = await live.attachedUserFeed(insider);
    const ownerFeed = await live.attachedUserFeed(owner);

    const name = `secret-${randomBytes(4).toString("hex")}`;
    const created = await ctx.api.post(
      `/api/v1/workspaces/${workspace.id}/channels`,
      { name, visibility: "private" },
      { token: owner.token },
    );
    expect(created.status).toBe(201);
    const secret = created.body.data as { id: string; slug: string };
    const renamed = `${name}-renamed`;
    const channelPath = `/api/v1/workspaces/${workspace.id}/channels/${secret.id}`;
    expect((await ctx.api.post(`${channelPath}/members`, { user_id: insider.id }, { token: owner.token })).status).toBe(
      201,
    );
    expect((await ctx.api.put(channelPath, { name: renamed }, { token: owner.token })).status).toBe(200);
    await live.post(owner, workspace.id, secret.id, "inside the secret channel");
    expect((await ctx.api.delete(`${channelPath}/members/${insider.id}`, { token: owner.token })).status).toBe(204);
    expect((await ctx.api.delete(channelPath, { token: owner.token })).status).toBe(204);
    // Seen by everyone, and published after all of the above.
    await live.post(owner, workspace.id, general.id, "barrier");
    await Promise.all([outsiderFeed, insiderFeed, ownerFeed].map((feed) => arrived(feed, "barrier")));

    const secrets = [secret.id, name, renamed];
    // The owner (a member throughout) saw all of it.
    expect(mentions(ownerFeed, secrets).map(({ event }) => event.type)).toEqual([
      "channel.created",
      "channel.member_joined",
      "channel.member_joined",
      "channel.updated",
      "message.created",
      "channel.member_left",
      "channel.deleted",
    ]);
    // The insider, added then removed, saw what happened while they were in it, and their removal.
    expect(mentions(insiderFeed, secrets).map(({ event }) => event.type)).toEqual([
      "channel.member_joined",
      "channel.updated",
      "message.created",
      "channel.member_left",
    ]);
    // The outsider saw nothing of it: not its id, not its names.
    expect(mentions(outsiderFeed, secrets)).toEqual([]);

    // Replaying everything from the start shows the outsider nothing either.
    const replayed = collect((handlers) =>
      live.chat(outsider.token).events.onUser.subscribe({ lastEventId: "0" }, handlers),
    );
    await arrived(replayed, "barrier");
    expect(replayed.errors).toEqual([]);
    expect(mentions(replayed, secrets)).toEqual([]);
    // ... while REST answers 404 for the channel, whatever its state.
    expect((await ctx.api.get(`${channelPath}/members`, { token: outsider.token })).status).toBe(404);
  });

  it("a public channel's events reach every member of the workspace", async () => {
    const { owner, member, workspace } = await live.team();
    const feed = await live.attachedUserFeed(member);
    const name = `open-${randomBytes(4).toString("hex")}`;
    const created = await ctx.api.post(
      `/api/v1/workspaces/${workspace.id}/channels`,
      { name, visibility: "public" },
      { token: owner.token },
    );
    expect(created.status).toBe(201);
    const event = await until(
      () => feed.received.find(({ event }) => event.type === "channel.created"),
      "the channel.created event",
    );
    expect(event.event).toMatchObject({ type: "channel.created", data: { channel: created.body.data } });
  });
});
