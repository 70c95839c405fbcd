import { z } from "zod";
import { VISIBILITIES } from "../db/schema/index.ts";
import { dataOf, listOf, listResponse } from "../server/records/common.ts";
import { workspaceRecord } from "../server/records/workspace.ts";
import {
  createWorkspace,
  getWorkspace,
  joinWorkspace,
  listWorkspaces,
} from "../server/services/workspaces/workspaces.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { joinPasswordInput, nameInput, slugInput } from "./inputs.ts";

const tags = ["Workspaces"];

export const workspacesRouter = router({
  list: authedProcedure
    .meta({
      openapi: {
        summary: "List the caller's workspaces",
        method: "GET",
        path: "/api/v1/workspaces",
        tags,
        description: "The caller's workspaces.",
      },
    })
    .input(z.void())
    .output(listOf(workspaceRecord))
    .query(async ({ ctx }) => listResponse(await listWorkspaces(ctx.deps, ctx.auth.user.id))),

  create: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        summary: "Create a workspace",
        method: "POST",
        path: "/api/v1/workspaces",
        tags,
        description: "The caller becomes its owner; a public #general channel comes with it.",
      },
    })
    .input(
      z.object({
        name: nameInput(120),
        slug: slugInput.optional(),
        visibility: z.enum(VISIBILITIES).optional(),
        password: joinPasswordInput.optional(),
      }),
    )
    .output(dataOf(workspaceRecord))
    .mutation(async ({ ctx, input }) => ({ data: await createWorkspace(ctx.deps, ctx.auth.user.id, input) })),

  get: authedProcedure
    .meta({
      openapi: {
        summary: "Get a workspace",
        description: "For its members; 404 for anyone else.",
        method: "GET",
        path: "/api/v1/workspaces/{id}",
        tags,
      },
    })
    .input(z.object({ id: z.string() }))
    .output(dataOf(workspaceRecord))
    .query(async ({ ctx, input }) => ({ data: await getWorkspace(ctx.deps, ctx.auth.user.id, input.id) })),

  join: authedProcedure
    .meta({
      openapi: {
        summary: "Join a public workspace",
        method: "POST",
        path: "/api/v1/workspaces/{id}/join",
        tags,
        description: "Joins a public workspace (with its password when it has one).",
      },
    })
    .input(z.object({ id: z.string(), password: z.string().optional() }))
    .output(dataOf(workspaceRecord))
    .mutation(async ({ ctx, input }) => ({
      data: await joinWorkspace(ctx.deps, ctx.auth.user.id, input.id, input.password),
    })),
});
