// Workspaces: list the caller's, create (the caller becomes owner; a general channel comes
// with it), get, and join a public one (with its password when it has one).
import { and, asc, eq, sql } from "drizzle-orm";
import type { Executor, Transaction } from "../../../db/client.ts";
import {
  channelMembers,
  channels,
  workspaceMembers,
  workspaces,
  users,
  type Role,
  type Visibility,
  type Workspace,
} from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { invalidField, notFound } from "../../errors.ts";
import { newId } from "../../ids.ts";
import { toMemberRecord, toWorkspaceRecord } from "../../records/workspace.ts";
import { hashPassword, verifyPassword } from "../accounts/passwords.ts";
import type { ThrottleBucket } from "../throttle.ts";
import { memberCount, requireMember, WORKSPACE_NOT_FOUND } from "../../policy/workspaces.ts";
import type { EventEntry } from "../../events/catalog.ts";
import { streams, writeWithEvents } from "../../events/streams.ts";
import { channelStartPosition } from "../messaging/unread-counts.ts";
import { workspaceEvent } from "./events.ts";
import { slugCandidates, slugify } from "./slugs.ts";

export const SLUG_TAKEN = "The slug has already been taken.";

export async function workspaceRecordFor(db: Executor, workspace: Workspace, role: Role) {
  return toWorkspaceRecord(workspace, role, await memberCount(db, workspace.id));
}

export async function listWorkspaces(deps: Deps, userId: number) {
  const rows = await deps.db
    .select({
      workspace: workspaces,
      role: workspaceMembers.role,
      memberCount: sql<number>`(select count(*)::int from ${workspaceMembers} as counted where counted.workspace_id = ${workspaces.id})`,
    })
    .from(workspaceMembers)
    .innerJoin(workspaces, eq(workspaces.id, workspaceMembers.workspaceId))
    .where(eq(workspaceMembers.userId, userId))
    .orderBy(asc(workspaces.name), asc(workspaces.id));
  return rows.map((row) => toWorkspaceRecord(row.workspace, row.role, row.memberCount));
}

export async function getWorkspace(deps: Deps, userId: number, workspaceId: string) {
  const { workspace, member } = await requireMember(deps.db, workspaceId, userId);
  return workspaceRecordFor(deps.db, workspace, member.role);
}

/**
 * Inserts with the given slug (taken: 422 key slug), or with the first free one generated
 * from the name. The unique index decides races; ON CONFLICT DO NOTHING keeps the
 * transaction usable to try the next candidate.
 */
export async function insertWithSlug<T>(
  explicitSlug: string | undefined,
  name: string,
  fallback: string,
  insert: (slug: string) => Promise<T | undefined>,
): Promise<T> {
  if (explicitSlug) {
    const row = await insert(explicitSlug);
    if (!row) throw invalidField("slug", SLUG_TAKEN);
    return row;
  }
  for (const candidate of slugCandidates(slugify(name, fallback))) {
    const row = await insert(candidate);
    if (row) return row;
  }
  throw new Error("unreachable: slug candidates are endless");
}

export async function createWorkspace(
  deps: Deps,
  userId: number,
  input: {
    name: string;
    slug?: string | undefined;
    visibility?: Visibility | undefined;
    password?: string | undefined;
  },
) {
  const passwordHash = input.password ? await hashPassword(input.password) : null;
  const now = deps.clock.now();
  const workspace = await writeWithEvents(deps, async (tx, emit) => {
    const created = await insertWithSlug(input.slug, input.name, "workspace", async (slug) => {
      const [row] = await tx
        .insert(workspaces)
        .values({
          id: newId("workspace", now.getTime()),
          name: input.name,
          slug,
          visibility: input.visibility ?? "private",
          passwordHash,
          ownerId: userId,
          createdAt: now,
          updatedAt: now,
        })
        .onConflictDoNothing({ target: workspaces.slug })
        .returning();
      return row;
    });
    await tx
      .insert(workspaceMembers)
      .values({ id: newId("member", now.getTime()), workspaceId: created.id, userId, role: "owner", joinedAt: now });
    const [general] = await tx
      .insert(channels)
      .values({
        id: newId("channel", now.getTime()),
        workspaceId: created.id,
        name: "general",
        slug: "general",
        visibility: "public",
        isGeneral: true,
        createdBy: userId,
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    await tx.insert(channelMembers).values({ channelId: general!.id, userId, joinedAt: now });
    // The owner's own stream follows them into it, as a member's does when they join.
    emit(workspaceJoined(userId, created.id));
    return created;
  });
  return toWorkspaceRecord(workspace, "owner", 1);
}

/**
 * Adds a user as a member (and to the general channel), unless already one: joining twice
 * is harmless. Returns the role the user has afterwards and whether they were added.
 */
async function addMember(
  tx: Transaction,
  workspace: Workspace,
  userId: number,
  now: Date,
): Promise<{ role: Role; added: boolean; memberId: string }> {
  const [inserted] = await tx
    .insert(workspaceMembers)
    .values({ id: newId("member", now.getTime()), workspaceId: workspace.id, userId, role: "member", joinedAt: now })
    .onConflictDoNothing({ target: [workspaceMembers.workspaceId, workspaceMembers.userId] })
    .returning();
  if (!inserted) {
    const [existing] = await tx
      .select()
      .from(workspaceMembers)
      .where(and(eq(workspaceMembers.workspaceId, workspace.id), eq(workspaceMembers.userId, userId)));
    return { role: existing!.role, added: false, memberId: existing!.id };
  }
  const [general] = await tx
    .select({ id: channels.id })
    .from(channels)
    .where(and(eq(channels.workspaceId, workspace.id), eq(channels.isGeneral, true)));
  if (general) {
    await tx
      .insert(channelMembers)
      .values({ channelId: general.id, userId, joinedAt: now, lastReadMessageId: channelStartPosition(general.id) })
      .onConflictDoNothing();
  }
  return { role: inserted.role, added: true, memberId: inserted.id };
}

/** On the user's own stream: they are in the workspace now (their live subscription follows them in). */
function workspaceJoined(userId: number, workspaceId: string): EventEntry {
  return { stream: streams.user(userId), type: "workspace.joined", scope: { workspace_id: workspaceId }, data: {} };
}

/**
 * Adds the user as a member in one transaction with its events (member.joined on the
 * workspace's stream, workspace.joined on theirs); a member already is one, and nothing changes.
 */
export async function joinAsMember(deps: Deps, workspace: Workspace, userId: number) {
  return writeWithEvents(deps, async (tx, emit) => {
    const result = await addMember(tx, workspace, userId, deps.clock.now());
    if (result.added) {
      const [row] = await tx
        .select({ member: workspaceMembers, user: users })
        .from(workspaceMembers)
        .innerJoin(users, eq(users.id, workspaceMembers.userId))
        .where(eq(workspaceMembers.id, result.memberId));
      emit(
        workspaceEvent(workspace.id, "member.joined", { member: toMemberRecord(row!.member, row!.user) }),
        workspaceJoined(userId, workspace.id),
      );
    }
    return result;
  });
}

export async function joinWorkspace(deps: Deps, userId: number, workspaceId: string, password: string | undefined) {
  const [workspace] = await deps.db.select().from(workspaces).where(eq(workspaces.id, workspaceId)).limit(1);
  if (!workspace) throw notFound(WORKSPACE_NOT_FOUND);
  const existing = await deps.db
    .select({ role: workspaceMembers.role })
    .from(workspaceMembers)
    .where(and(eq(workspaceMembers.workspaceId, workspaceId), eq(workspaceMembers.userId, userId)));
  if (existing[0]) return workspaceRecordFor(deps.db, workspace, existing[0].role);
  // A private workspace is joined by invite only, and is invisible to non-members.
  if (workspace.visibility !== "public") throw notFound(WORKSPACE_NOT_FOUND);
  await checkJoinPassword(deps, workspace.passwordHash, password, {
    bucket: "workspacePassword",
    key: `${userId}|${workspace.id}`,
  });
  const result = await joinAsMember(deps, workspace, userId);
  return workspaceRecordFor(deps.db, workspace, result.role);
}

/**
 * A workspace's or channel's password, required to join without an invite (422 key password).
 * Tries are throttled per user and workspace or channel, as sign-in is: every try counts, a
 * right password clears the count; past the limit, 429 with Retry-After before any check.
 */
export async function checkJoinPassword(
  deps: Deps,
  passwordHash: string | null,
  password: string | undefined,
  throttle: { bucket: Extract<ThrottleBucket, "workspacePassword" | "channelPassword">; key: string },
): Promise<void> {
  if (!passwordHash) return;
  await deps.throttle.hit(throttle.bucket, throttle.key);
  if (!password) throw invalidField("password", "The password field is required.");
  if (!(await verifyPassword(passwordHash, password))) throw invalidField("password", "The password is incorrect.");
  await deps.throttle.reset(throttle.bucket, throttle.key);
}
