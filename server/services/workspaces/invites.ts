// Invites: owners and admins list, create and delete them; anyone may preview one (rate
// limited per IP); a signed-in user accepts one to become a member.
import { randomBytes } from "node:crypto";
import { and, desc, eq, gt, isNull, or } from "drizzle-orm";
import { invites, users, workspaces } from "../../../db/schema/index.ts";
import { appendResponseHeader, type RequestContext } from "../../context.ts";
import type { Deps } from "../../deps.ts";
import { AppError, notFound } from "../../errors.ts";
import { isoTimestamp } from "../../clock.ts";
import { newId } from "../../ids.ts";
import { toInviteRecord } from "../../records/workspace.ts";
import { THROTTLE_RULES } from "../throttle.ts";
import { canManage, memberCount, requireManager, requireMember } from "../../policy/workspaces.ts";
import { joinAsMember, workspaceRecordFor } from "./workspaces.ts";

export const INVALID_INVITE = "This invite link is not valid.";
const DAY_MS = 24 * 60 * 60 * 1000;

export async function listInvites(deps: Deps, userId: number, workspaceId: string) {
  await requireManager(deps.db, workspaceId, userId);
  const rows = await deps.db
    .select()
    .from(invites)
    .where(eq(invites.workspaceId, workspaceId))
    .orderBy(desc(invites.createdAt), desc(invites.id));
  return rows.map((invite) => toInviteRecord(invite, deps.config.appUrl));
}

export async function createInvite(
  deps: Deps,
  userId: number,
  workspaceId: string,
  expiresInDays: number | null | undefined,
) {
  await requireManager(deps.db, workspaceId, userId);
  const now = deps.clock.now();
  const [invite] = await deps.db
    .insert(invites)
    .values({
      id: newId("invite", now.getTime()),
      workspaceId,
      // 192 random bits: unguessable, short enough for a link.
      token: randomBytes(24).toString("base64url"),
      expiresAt: expiresInDays ? new Date(now.getTime() + expiresInDays * DAY_MS) : null,
      createdBy: userId,
      createdAt: now,
    })
    .returning();
  return toInviteRecord(invite!, deps.config.appUrl);
}

const INVITE_NOT_FOUND = "Invite not found.";

export async function deleteInvite(deps: Deps, userId: number, workspaceId: string, inviteId: string): Promise<void> {
  // Invites are seen by owners and admins only: to anyone else an invite does not exist.
  const membership = await requireMember(deps.db, workspaceId, userId);
  if (!canManage(membership.member.role)) throw notFound(INVITE_NOT_FOUND);
  const deleted = await deps.db
    .delete(invites)
    .where(and(eq(invites.id, inviteId), eq(invites.workspaceId, workspaceId)))
    .returning({ id: invites.id });
  if (deleted.length === 0) throw notFound(INVITE_NOT_FOUND);
}

/** The invite and its workspace while the invite is valid (not deleted, not expired). */
async function validInvite(deps: Deps, token: string) {
  const [row] = await deps.db
    .select({ invite: invites, workspace: workspaces, inviterName: users.name })
    .from(invites)
    .innerJoin(workspaces, eq(workspaces.id, invites.workspaceId))
    .leftJoin(users, eq(users.id, invites.createdBy))
    .where(and(eq(invites.token, token), or(isNull(invites.expiresAt), gt(invites.expiresAt, deps.clock.now()))))
    .limit(1);
  if (!row) throw notFound(INVALID_INVITE);
  return row;
}

/**
 * The public preview for the join screen. Rate limited per IP (30 a minute); every answer,
 * the 404 and the 429 included, carries x-ratelimit-limit and x-ratelimit-remaining.
 */
export async function previewInvite(ctx: RequestContext, token: string) {
  const limit = THROTTLE_RULES.invitePreview.points;
  appendResponseHeader(ctx, "x-ratelimit-limit", String(limit));
  try {
    const { remaining } = await ctx.deps.throttle.hit("invitePreview", ctx.ip);
    appendResponseHeader(ctx, "x-ratelimit-remaining", String(remaining));
  } catch (error) {
    if (error instanceof AppError && error.kind === "throttled")
      appendResponseHeader(ctx, "x-ratelimit-remaining", "0");
    throw error;
  }
  const { invite, workspace, inviterName } = await validInvite(ctx.deps, token);
  return {
    workspace: {
      id: workspace.id,
      name: workspace.name,
      slug: workspace.slug,
      member_count: await memberCount(ctx.deps.db, workspace.id),
    },
    inviter: { name: inviterName },
    expires_at: isoTimestamp(invite.expiresAt),
  };
}

/** Adds the caller to the invite's workspace; accepting again (already a member) changes nothing. */
export async function acceptInvite(deps: Deps, userId: number, token: string) {
  const { workspace } = await validInvite(deps, token);
  const result = await joinAsMember(deps, workspace, userId);
  return workspaceRecordFor(deps.db, workspace, result.role);
}
