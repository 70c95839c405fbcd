export * from "./users.ts";
export * from "./access-tokens.ts";
export * from "./sign-in-codes.ts";
export * from "./social-accounts.ts";
export * from "./ephemeral-entries.ts";
export * from "./workspaces.ts";
export * from "./messages.ts";
export * from "./events.ts";
