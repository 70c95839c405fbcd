// Slugs: letters, digits, dashes and underscores, at most 80; generated from the name when
// not given, unique per scope (workspaces globally, channels within their workspace).
import { randomBytes } from "node:crypto";

export const SLUG_MAX = 80;

export function slugify(name: string, fallback: string): string {
  const slug = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/-{2,}/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, SLUG_MAX)
    .replace(/-+$/, "");
  return slug || fallback;
}

/** Candidates to try in order: the base, then base-2 … base-9, then random suffixes. */
export function* slugCandidates(base: string): Generator<string> {
  yield base;
  for (let n = 2; n <= 9; n++) yield `${base.slice(0, SLUG_MAX - 2)}-${n}`;
  for (;;) yield `${base.slice(0, SLUG_MAX - 7)}-${randomBytes(3).toString("hex")}`;
}
