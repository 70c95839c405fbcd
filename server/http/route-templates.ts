// The route a request took, as its template (`/api/v1/workspaces/{workspace_id}/channels`):
// the metrics' `route` label, which must never carry ids (one series per id would grow without
// end), and the request log's way to find path segments that are secrets (`/invites/{token}`).
import { procedureMetas } from "../trpc.ts";

type Template = { template: string; pattern: RegExp; secretSegments: number[] };

/** Any request that matches no route: one label for all of them. */
export const UNMATCHED_ROUTE = "(unmatched)";

/** Path parameters whose values are credentials: never logged. */
const SECRET_PARAMS = new Set(["token"]);

/** The routes that are not procedures (server/http/host.ts), as templates. */
const PLAIN_ROUTES = [
  "/healthz",
  "/readyz",
  "/metrics",
  "/api/v1/openapi.json",
  "/api/v1/asyncapi.json",
  "/api/v1/files",
  "/api/v1/message-attachments/{id}/download",
  "/api/v1/direct-message-attachments/{id}/download",
  "/webhooks/{webhook}/messages",
  "/internal/admin-command",
];

function compile(template: string): Template {
  const segments = template.split("/");
  const secretSegments = segments.flatMap((segment, index) =>
    SECRET_PARAMS.has(segment.replace(/^\{|\}$/g, "")) && segment.startsWith("{") ? [index] : [],
  );
  const source = segments
    .map((segment) => (segment.startsWith("{") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return { template, pattern: new RegExp(`^${source}$`), secretSegments };
}

/** Templates with more literal segments first, so `/channels/{id}` never takes `/channels/search`. */
const literalSegments = (template: string) => template.split("/").filter((segment) => !segment.startsWith("{")).length;

export function routeTemplates(router: { _def: { procedures: object } }) {
  const procedures = procedureMetas(router);
  const restPaths = procedures.flatMap(({ meta }) => (meta.openapi?.path ? [meta.openapi.path] : []));
  const templates = [...new Set([...PLAIN_ROUTES, ...restPaths])]
    .sort((a, b) => literalSegments(b) - literalSegments(a))
    .map(compile);
  const rpcPaths = new Set(procedures.map(({ path }) => path));

  function find(pathname: string): Template | undefined {
    return templates.find(({ pattern }) => pattern.test(pathname));
  }

  return {
    /** The template of a request path; tRPC calls by procedure name (a batch as one label). */
    templateOf(pathname: string): string {
      if (pathname.startsWith("/trpc/")) {
        const procedure = pathname.slice("/trpc/".length);
        if (procedure.includes(",")) return "/trpc/(batch)";
        return rpcPaths.has(procedure) ? pathname : UNMATCHED_ROUTE;
      }
      if (pathname === "/docs" || pathname.startsWith("/docs/")) return "/docs";
      if (pathname === "/admin/queues" || pathname.startsWith("/admin/queues/")) return "/admin/queues";
      return find(pathname)?.template ?? UNMATCHED_ROUTE;
    },
    /** The path with the values of secret parameters (`{token}`) replaced. */
    redactPath(pathname: string, replacement: string): string {
      const match = find(pathname);
      if (!match || match.secretSegments.length === 0) return pathname;
      const segments = pathname.split("/");
      for (const index of match.secretSegments) segments[index] = replacement;
      return segments.join("/");
    },
  };
}

export type RouteTemplates = ReturnType<typeof routeTemplates>;
