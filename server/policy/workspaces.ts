// Who may see and manage a workspace (contract, "Records" and roles): non-members get 404 for
// the workspace and everything under it; members who may not manage get 403.
import { and, eq, sql } from "drizzle-orm";
import type { Executor } from "../../db/client.ts";
import {
  workspaceMembers,
  workspaces,
  type Role,
  type Workspace,
  type WorkspaceMember,
} from "../../db/schema/index.ts";
import { forbidden, notFound } from "../errors.ts";

export type Membership = { workspace: Workspace; member: WorkspaceMember };

export const WORKSPACE_NOT_FOUND = "Workspace not found.";

export const canManage = (role: Role) => role === "owner" || role === "admin";

export async function findMembership(db: Executor, workspaceId: string, userId: number): Promise<Membership | null> {
  const [row] = await db
    .select({ workspace: workspaces, member: workspaceMembers })
    .from(workspaceMembers)
    .innerJoin(workspaces, eq(workspaces.id, workspaceMembers.workspaceId))
    .where(and(eq(workspaceMembers.workspaceId, workspaceId), eq(workspaceMembers.userId, userId)))
    .limit(1);
  return row ?? null;
}

/** The caller's membership, or 404 as if the workspace did not exist. */
export async function requireMember(db: Executor, workspaceId: string, userId: number): Promise<Membership> {
  const membership = await findMembership(db, workspaceId, userId);
  if (!membership) throw notFound(WORKSPACE_NOT_FOUND);
  return membership;
}

/**
 * Owners and admins manage channels, members, invites and webhooks. Check it only once the
 * record acted on is known to be visible to the caller: a record they cannot see is 404 (as
 * if it did not exist), 403 is for a visible record they may not change.
 */
export function requireManagerRole(membership: Membership): Membership {
  if (!canManage(membership.member.role)) throw forbidden();
  return membership;
}

/** The caller's membership when they manage the workspace: 404 for a non-member, 403 for a plain member. */
export async function requireManager(db: Executor, workspaceId: string, userId: number): Promise<Membership> {
  return requireManagerRole(await requireMember(db, workspaceId, userId));
}

export async function memberCount(db: Executor, workspaceId: string): Promise<number> {
  const [row] = await db
    .select({ count: sql<number>`count(*)::int` })
    .from(workspaceMembers)
    .where(eq(workspaceMembers.workspaceId, workspaceId));
  return row?.count ?? 0;
}
