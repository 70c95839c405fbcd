// Channels: any member sees public channels; private channels are seen by their channel
// members only. Owners and admins create, update and delete; members join (with the
// channel's password when it has one) and add others to private channels they are in.
import { and, asc, eq, isNotNull, or, sql } from "drizzle-orm";
import {
  channelMembers,
  channels,
  users,
  workspaceMembers,
  type Channel,
  type Visibility,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { forbidden, invalidField, notFound, unprocessable } from "../../errors.ts";
import type { Audience } from "../../events/catalog.ts";
import { writeWithEvents } from "../../events/streams.ts";
import { newId } from "../../ids.ts";
import { toChannelMemberRecord, toChannelRecord } from "../../records/workspace.ts";
import { isChannelMember, requireVisibleChannel } from "../../policy/places.ts";
import { hashPassword } from "../accounts/passwords.ts";
import { canManage, requireManager, requireManagerRole, requireMember } from "../../policy/workspaces.ts";
import { channelMentionCount, channelStartPosition, channelUnreadCount } from "../messaging/unread-counts.ts";
import { workspaceEvent } from "./events.ts";
import { checkJoinPassword, insertWithSlug, SLUG_TAKEN } from "./workspaces.ts";

const channelMemberRow = (channelId: string, userId: number) =>
  and(eq(channelMembers.channelId, channelId), eq(channelMembers.userId, userId));

/**
 * Who may see events about the channel (its creation, changes, membership): everyone who
 * follows the workspace for a public channel; for a private one its members, like the channel
 * itself, and `aboutUserId` (a member joining or leaving, who knew the channel).
 */
function channelAudience(channel: Pick<Channel, "id" | "visibility">, aboutUserId?: number): Audience | undefined {
  if (channel.visibility !== "private") return undefined;
  return aboutUserId === undefined ? { channel_id: channel.id } : { channel_id: channel.id, user_id: aboutUserId };
}

/**
 * Public channels and the private ones the caller is in, each with the caller's read state
 * (docs/unread.md): their position, counts and `muted` where they are a member, nulls on a
 * public channel they have not joined. One query after the membership check, however many
 * channels: each count is an index range that stops at COUNT_CAP.
 */
export async function listChannels(deps: Deps, userId: number, workspaceId: string) {
  await requireMember(deps.db, workspaceId, userId);
  const rows = await deps.db
    .select({
      channel: channels,
      isMember: sql<boolean>`${channelMembers.userId} is not null`,
      lastRead: channelMembers.lastReadMessageId,
      muted: channelMembers.muted,
      unread: sql<number | null>`case when ${channelMembers.userId} is not null
        then ${channelUnreadCount(userId, sql`${channels.id}`, sql`${channelMembers.lastReadMessageId}`)} end`,
      mentions: sql<number | null>`case when ${channelMembers.userId} is not null
        then ${channelMentionCount(userId, sql`${channels.id}`, sql`${channelMembers.lastReadMessageId}`)} end`,
    })
    .from(channels)
    .leftJoin(channelMembers, and(eq(channelMembers.channelId, channels.id), eq(channelMembers.userId, userId)))
    .where(
      and(
        eq(channels.workspaceId, workspaceId),
        or(eq(channels.visibility, "public"), isNotNull(channelMembers.userId)),
      ),
    )
    .orderBy(asc(channels.name), asc(channels.id));
  return rows.map((row) => ({
    ...toChannelRecord(row.channel),
    is_member: row.isMember,
    last_read_message_id: row.isMember ? row.lastRead : null,
    unread_count: row.isMember ? Number(row.unread) : null,
    mention_count: row.isMember ? Number(row.mentions) : null,
    muted: row.isMember ? row.muted : null,
  }));
}

type ChannelInput = {
  name: string;
  slug?: string | undefined;
  visibility?: Visibility | undefined;
  password?: string | null | undefined;
};

export async function createChannel(deps: Deps, userId: number, workspaceId: string, input: ChannelInput) {
  await requireManager(deps.db, workspaceId, userId);
  const passwordHash = input.password ? await hashPassword(input.password) : null;
  const now = deps.clock.now();
  const channel = await writeWithEvents(deps, async (tx, emit) => {
    const created = await insertWithSlug(input.slug, input.name, "channel", async (slug) => {
      const [row] = await tx
        .insert(channels)
        .values({
          id: newId("channel", now.getTime()),
          workspaceId,
          name: input.name,
          slug,
          visibility: input.visibility ?? "public",
          passwordHash,
          createdBy: userId,
          createdAt: now,
          updatedAt: now,
        })
        .onConflictDoNothing({ target: [channels.workspaceId, channels.slug] })
        .returning();
      return row;
    });
    // The creator is the channel's first member (for a private channel, its only one).
    await tx.insert(channelMembers).values({ channelId: created.id, userId, joinedAt: now });
    const audience = channelAudience(created, userId);
    emit(
      workspaceEvent(workspaceId, "channel.created", { channel: toChannelRecord(created) }, audience),
      workspaceEvent(workspaceId, "channel.member_joined", { channel_id: created.id, user_id: userId }, audience),
    );
    return created;
  });
  return toChannelRecord(channel);
}

export async function updateChannel(
  deps: Deps,
  userId: number,
  workspaceId: string,
  channelId: string,
  input: Partial<ChannelInput>,
) {
  const { membership, channel } = await requireVisibleChannel(deps.db, workspaceId, userId, channelId);
  requireManagerRole(membership);
  // Everyone belongs in #general: it stays public and open.
  if (channel.isGeneral && input.visibility === "private") {
    throw invalidField("visibility", "The general channel must stay public.");
  }
  if (channel.isGeneral && input.password) {
    throw invalidField("password", "The general channel cannot have a password.");
  }
  const passwordHash =
    input.password === undefined ? undefined : input.password === null ? null : await hashPassword(input.password);
  const updated = await writeWithEvents(deps, async (tx, emit) => {
    const [row] = await tx
      .update(channels)
      .set({
        ...(input.name !== undefined && { name: input.name }),
        ...(input.slug !== undefined && { slug: input.slug }),
        ...(input.visibility !== undefined && { visibility: input.visibility }),
        ...(passwordHash !== undefined && { passwordHash }),
        updatedAt: deps.clock.now(),
      })
      .where(eq(channels.id, channel.id))
      .returning()
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) throw invalidField("slug", SLUG_TAKEN);
        throw error;
      });
    // Seen by those who may see the channel as it is now.
    emit(workspaceEvent(workspaceId, "channel.updated", { channel: toChannelRecord(row!) }, channelAudience(row!)));
    return row!;
  });
  return toChannelRecord(updated);
}

function isUniqueViolation(error: unknown): boolean {
  const code =
    (error as { code?: string; cause?: { code?: string } }).code ??
    (error as { cause?: { code?: string } }).cause?.code;
  return code === "23505";
}

export async function deleteChannel(deps: Deps, userId: number, workspaceId: string, channelId: string): Promise<void> {
  const { membership, channel } = await requireVisibleChannel(deps.db, workspaceId, userId, channelId);
  requireManagerRole(membership);
  if (channel.isGeneral) throw unprocessable("The general channel cannot be deleted.");
  await writeWithEvents(deps, async (tx, emit) => {
    // The cascade takes the channel's messages and their attachments; the attachments' files
    // are queued for deletion in this transaction (file_deletions) and deleted after it.
    await tx.delete(channels).where(eq(channels.id, channel.id));
    emit(workspaceEvent(workspaceId, "channel.deleted", { channel_id: channel.id }, channelAudience(channel)));
  });
}

/** Joins a public channel (its password when it has one); a private one only by being added. */
export async function joinChannel(
  deps: Deps,
  userId: number,
  workspaceId: string,
  channelId: string,
  password: string | undefined,
) {
  const { channel } = await requireVisibleChannel(deps.db, workspaceId, userId, channelId);
  if (!(await isChannelMember(deps.db, channel.id, userId))) {
    await checkJoinPassword(deps, channel.passwordHash, password, {
      bucket: "channelPassword",
      key: `${userId}|${channel.id}`,
    });
    await addChannelMember(deps, workspaceId, channel, userId);
  }
  return toChannelRecord(channel);
}

async function addChannelMember(deps: Deps, workspaceId: string, channel: Channel, userId: number): Promise<void> {
  await writeWithEvents(deps, async (tx, emit) => {
    const inserted = await tx
      .insert(channelMembers)
      // Joining starts the read position at the newest message (docs/unread.md).
      .values({
        channelId: channel.id,
        userId,
        joinedAt: deps.clock.now(),
        lastReadMessageId: channelStartPosition(channel.id),
      })
      .onConflictDoNothing()
      .returning({ userId: channelMembers.userId });
    if (inserted.length === 0) return;
    const data = { channel_id: channel.id, user_id: userId };
    emit(workspaceEvent(workspaceId, "channel.member_joined", data, channelAudience(channel, userId)));
  });
}

export async function listChannelMembers(deps: Deps, userId: number, workspaceId: string, channelId: string) {
  const { channel } = await requireVisibleChannel(deps.db, workspaceId, userId, channelId);
  const rows = await deps.db
    .select({ user: users, joinedAt: channelMembers.joinedAt })
    .from(channelMembers)
    .innerJoin(users, eq(users.id, channelMembers.userId))
    .where(eq(channelMembers.channelId, channel.id))
    .orderBy(asc(channelMembers.joinedAt), asc(users.id));
  return rows.map((row) => toChannelMemberRecord(channel.id, row.user, row.joinedAt));
}

/** Owners, admins and the channel's own members add workspace members to a channel. */
export async function addToChannel(
  deps: Deps,
  userId: number,
  workspaceId: string,
  channelId: string,
  targetUserId: number,
) {
  const { membership, channel } = await requireVisibleChannel(deps.db, workspaceId, userId, channelId);
  if (!canManage(membership.member.role) && !(await isChannelMember(deps.db, channel.id, userId))) throw forbidden();
  const [target] = await deps.db
    .select({ user: users })
    .from(workspaceMembers)
    .innerJoin(users, eq(users.id, workspaceMembers.userId))
    .where(and(eq(workspaceMembers.workspaceId, workspaceId), eq(workspaceMembers.userId, targetUserId)));
  if (!target) throw invalidField("user_id", "The selected user id is not a member of this workspace.");
  await addChannelMember(deps, workspaceId, channel, targetUserId);
  const [row] = await deps.db.select().from(channelMembers).where(channelMemberRow(channel.id, targetUserId));
  return toChannelMemberRecord(channel.id, target.user, row!.joinedAt);
}

/** Owners and admins remove anyone from a channel; anyone may leave. */
export async function removeFromChannel(
  deps: Deps,
  userId: number,
  workspaceId: string,
  channelId: string,
  targetUserId: number,
) {
  const { membership, channel } = await requireVisibleChannel(deps.db, workspaceId, userId, channelId);
  if (targetUserId !== userId && !canManage(membership.member.role)) throw forbidden();
  await writeWithEvents(deps, async (tx, emit) => {
    const removed = await tx.delete(channelMembers).where(channelMemberRow(channel.id, targetUserId)).returning();
    if (removed.length === 0) throw notFound("That user is not a member of this channel.");
    const data = { channel_id: channel.id, user_id: targetUserId };
    emit(workspaceEvent(workspaceId, "channel.member_left", data, channelAudience(channel, targetUserId)));
  });
}
