// Workspace members: anyone in the workspace lists them; owners and admins change roles and
// remove members; anyone may leave. A member cannot change roles, an admin cannot touch an
// owner or make one, and the last owner can be neither demoted nor removed.
import { and, asc, eq, inArray, sql } from "drizzle-orm";
import type { Transaction } from "../../../db/client.ts";
import {
  channelMembers,
  channels,
  users,
  workspaceMembers,
  workspaces,
  type Language,
  type Role,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { forbidden, invalidField, notFound, unprocessable } from "../../errors.ts";
import { writeWithEvents } from "../../events/streams.ts";
import { toMemberRecord } from "../../records/workspace.ts";
import { canManage, requireMember } from "../../policy/workspaces.ts";
import { workspaceEvent } from "./events.ts";

export const MEMBER_NOT_FOUND = "Member not found.";

export async function listMembers(deps: Deps, userId: number, workspaceId: string) {
  await requireMember(deps.db, workspaceId, userId);
  const rows = await deps.db
    .select({ member: workspaceMembers, user: users })
    .from(workspaceMembers)
    .innerJoin(users, eq(users.id, workspaceMembers.userId))
    .where(eq(workspaceMembers.workspaceId, workspaceId))
    .orderBy(asc(workspaceMembers.joinedAt), asc(workspaceMembers.id));
  return rows.map((row) => toMemberRecord(row.member, row.user));
}

/** Locks the workspace row so that two role changes cannot both remove "the last" owner. */
async function lockedTarget(tx: Transaction, workspaceId: string, memberId: string) {
  await tx.select({ id: workspaces.id }).from(workspaces).where(eq(workspaces.id, workspaceId)).for("update");
  const [target] = await tx
    .select({ member: workspaceMembers, user: users })
    .from(workspaceMembers)
    .innerJoin(users, eq(users.id, workspaceMembers.userId))
    .where(and(eq(workspaceMembers.id, memberId), eq(workspaceMembers.workspaceId, workspaceId)));
  if (!target) throw notFound(MEMBER_NOT_FOUND);
  return target;
}

async function ownerCount(tx: Transaction, workspaceId: string): Promise<number> {
  const [row] = await tx
    .select({ count: sql<number>`count(*)::int` })
    .from(workspaceMembers)
    .where(and(eq(workspaceMembers.workspaceId, workspaceId), eq(workspaceMembers.role, "owner")));
  return row?.count ?? 0;
}

export async function updateMember(
  deps: Deps,
  userId: number,
  workspaceId: string,
  memberId: string,
  input: { role: Role; preferredLanguage?: Language | null | undefined },
) {
  const caller = await requireMember(deps.db, workspaceId, userId);
  return writeWithEvents(deps, async (tx, emit) => {
    const target = await lockedTarget(tx, workspaceId, memberId);
    const changesRole = input.role !== target.member.role;
    const isSelf = target.member.userId === userId;
    if (!canManage(caller.member.role)) {
      // A member may set their own language in the workspace, never a role.
      if (!isSelf || changesRole) throw forbidden();
    } else if (caller.member.role === "admin" && (target.member.role === "owner" || input.role === "owner")) {
      // An admin neither makes owners nor touches an owner's membership in any way.
      throw forbidden("Only an owner can make, change or remove owners.");
    }
    if (changesRole && target.member.role === "owner" && (await ownerCount(tx, workspaceId)) === 1) {
      throw invalidField("role", "The last owner of a workspace cannot be demoted.");
    }
    const [updated] = await tx
      .update(workspaceMembers)
      .set({
        role: input.role,
        ...(input.preferredLanguage !== undefined && { preferredLanguage: input.preferredLanguage }),
      })
      .where(eq(workspaceMembers.id, memberId))
      .returning();
    const record = toMemberRecord(updated!, target.user);
    emit(workspaceEvent(workspaceId, "member.updated", { member: record }));
    return record;
  });
}

/** Removes a member (or the caller leaves) with their channel memberships in the workspace. */
export async function removeMember(deps: Deps, userId: number, workspaceId: string, memberId: string): Promise<void> {
  const caller = await requireMember(deps.db, workspaceId, userId);
  await writeWithEvents(deps, async (tx, emit) => {
    const target = await lockedTarget(tx, workspaceId, memberId);
    const isSelf = target.member.userId === userId;
    if (!isSelf) {
      if (!canManage(caller.member.role)) throw forbidden();
      if (caller.member.role === "admin" && target.member.role === "owner")
        throw forbidden("Only an owner can remove an owner.");
    }
    if (target.member.role === "owner" && (await ownerCount(tx, workspaceId)) === 1) {
      throw unprocessable(
        "The last owner of a workspace cannot leave or be removed: make another member an owner first.",
      );
    }
    const workspaceChannels = tx
      .select({ id: channels.id })
      .from(channels)
      .where(eq(channels.workspaceId, workspaceId));
    await tx
      .delete(channelMembers)
      .where(
        and(eq(channelMembers.userId, target.member.userId), inArray(channelMembers.channelId, workspaceChannels)),
      );
    await tx.delete(workspaceMembers).where(eq(workspaceMembers.id, memberId));
    emit(workspaceEvent(workspaceId, "member.left", { member_id: target.member.id, user_id: target.member.userId }));
  });
}
