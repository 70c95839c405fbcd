// Token abilities (Sanctum-style). Sign-in tokens and web sessions carry "*"; personal access
// tokens carry what their owner chose. A procedure needs "read" (queries) or "write"
// (mutations) unless it names another ability or none.
export const ABILITIES = ["*", "read", "write", "automation", "temporary-rooms:extend"] as const;
export type Ability = (typeof ABILITIES)[number];

export function tokenCan(abilities: readonly string[], ability: Ability): boolean {
  return abilities.includes("*") || abilities.includes(ability);
}
