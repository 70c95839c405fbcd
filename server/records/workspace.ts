// Records of the workspaces area, with the contract's fields.
import { z } from "zod";
import {
  LANGUAGES,
  ROLES,
  VISIBILITIES,
  type Channel,
  type Invite,
  type User,
  type Workspace,
  type WorkspaceMember,
} from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { timestamp } from "./common.ts";

export const workspaceRecord = z
  .object({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    visibility: z.enum(VISIBILITIES),
    has_password: z.boolean(),
    owner_id: z.number().int(),
    role: z.enum(ROLES).describe("the caller's role"),
    member_count: z.number().int(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Workspace" });

export function toWorkspaceRecord(
  workspace: Workspace,
  role: WorkspaceMember["role"],
  memberCount: number,
): z.infer<typeof workspaceRecord> {
  return {
    id: workspace.id,
    name: workspace.name,
    slug: workspace.slug,
    visibility: workspace.visibility,
    has_password: workspace.passwordHash !== null,
    owner_id: workspace.ownerId,
    role,
    member_count: memberCount,
    created_at: isoTimestamp(workspace.createdAt),
    updated_at: isoTimestamp(workspace.updatedAt),
  };
}

export const channelRecord = z
  .object({
    id: z.string(),
    workspace_id: z.string(),
    name: z.string(),
    slug: z.string(),
    visibility: z.enum(VISIBILITIES),
    has_password: z.boolean(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Channel" });

/** The caller's read state on a record of a list (docs/unread.md): null where they keep none. */
export const readStateFields = {
  last_read_message_id: z.string().nullable().describe("everything up to this message is read (null: nothing yet)"),
  unread_count: z
    .number()
    .int()
    .nullable()
    .describe("top-level messages after the position, not yours (stops at 1000)"),
  mention_count: z
    .number()
    .int()
    .nullable()
    .describe("messages after the position that mention you, replies included (stops at 1000)"),
  muted: z.boolean().nullable().describe("a muted place pushes nothing and adds nothing to the badge"),
};

/** A channel in the caller's channel list: with `is_member`, and their read state (nulls when not a member). */
export const channelListRecord = channelRecord
  .extend({ is_member: z.boolean(), ...readStateFields })
  .meta({ id: "ChannelWithReadState" });

export function toChannelRecord(channel: Channel): z.infer<typeof channelRecord> {
  return {
    id: channel.id,
    workspace_id: channel.workspaceId,
    name: channel.name,
    slug: channel.slug,
    visibility: channel.visibility,
    has_password: channel.passwordHash !== null,
    created_at: isoTimestamp(channel.createdAt),
    updated_at: isoTimestamp(channel.updatedAt),
  };
}

export const memberRecord = z
  .object({
    id: z.string(),
    workspace_id: z.string(),
    user_id: z.number().int(),
    name: z.string(),
    email: z.string(),
    avatar_url: z.string().nullable(),
    role: z.enum(ROLES),
    preferred_language: z.enum(LANGUAGES).nullable().describe("null: the user's own preferred_language applies"),
    joined_at: timestamp,
  })
  .meta({ id: "Member" });

export function toMemberRecord(member: WorkspaceMember, user: User): z.infer<typeof memberRecord> {
  return {
    id: member.id,
    workspace_id: member.workspaceId,
    user_id: user.id,
    name: user.name,
    email: user.email,
    avatar_url: user.avatarUrl,
    role: member.role,
    preferred_language: member.preferredLanguage,
    joined_at: isoTimestamp(member.joinedAt),
  };
}

/** A member of a channel (the contract's added channel-membership endpoints). */
export const channelMemberRecord = z
  .object({
    channel_id: z.string(),
    user_id: z.number().int(),
    name: z.string(),
    avatar_url: z.string().nullable(),
    joined_at: timestamp,
  })
  .meta({ id: "ChannelMember" });

export function toChannelMemberRecord(
  channelId: string,
  user: User,
  joinedAt: Date,
): z.infer<typeof channelMemberRecord> {
  return {
    channel_id: channelId,
    user_id: user.id,
    name: user.name,
    avatar_url: user.avatarUrl,
    joined_at: isoTimestamp(joinedAt),
  };
}

export const inviteRecord = z
  .object({
    id: z.string(),
    workspace_id: z.string(),
    token: z.string(),
    url: z.string(),
    expires_at: timestamp.nullable().describe("null: never expires"),
    created_by: z.number().int().nullable(),
    created_at: timestamp,
  })
  .meta({ id: "Invite" });

export function toInviteRecord(invite: Invite, appUrl: string): z.infer<typeof inviteRecord> {
  return {
    id: invite.id,
    workspace_id: invite.workspaceId,
    token: invite.token,
    url: `${appUrl}/invites/${invite.token}`,
    expires_at: isoTimestamp(invite.expiresAt),
    created_by: invite.createdBy,
    created_at: isoTimestamp(invite.createdAt),
  };
}

export const invitePreviewRecord = z
  .object({
    workspace: z.object({ id: z.string(), name: z.string(), slug: z.string(), member_count: z.number().int() }),
    inviter: z.object({ name: z.string().nullable() }),
    expires_at: timestamp.nullable(),
  })
  .meta({ id: "InvitePreview" });
