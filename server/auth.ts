// Who is calling: the user, the token they came with and how it arrived. Below the doors
// (server/context.ts builds it) and the services (which act for it), so neither imports the other.
import type { AccessToken, User } from "../db/schema/index.ts";

export type Auth = {
  user: User;
  token: AccessToken;
  /** How the credential arrived: cookie-authenticated writes must pass the Origin check. */
  via: "bearer" | "cookie" | "connection";
};
