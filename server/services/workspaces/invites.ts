// Invites: owners and admins list, create and delete them; anyone may preview one (rate
// limited per IP by its procedure's meta, routers/invites.ts); a signed-in user accepts one to
// become a member.
import { randomBytes } from "node:crypto";
import { and, desc, eq, gt, isNull, or } from "drizzle-orm";
import { invites, users, workspaces } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { notFound } from "../../errors.ts";
import { isoTimestamp } from "../../clock.ts";
import { newId } from "../../ids.ts";
import { toInviteRecord } from "../../records/workspace.ts";
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

/** The public preview for the join screen (its throttle, 30 a minute per IP, is the procedure's). */
export async function previewInvite(deps: Deps, token: string) {
  const { invite, workspace, inviterName } = await validInvite(deps, token);
  return {
    workspace: {
      id: workspace.id,
      name: workspace.name,
      slug: workspace.slug,
      member_count: await memberCount(deps.db, workspace.id),
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
