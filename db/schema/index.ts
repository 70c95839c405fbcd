export * from "./users.ts";
export * from "./access-tokens.ts";
