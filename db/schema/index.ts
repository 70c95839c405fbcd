export * from "./users.ts";
export * from "./access-tokens.ts";
export * from "./sign-in-codes.ts";
