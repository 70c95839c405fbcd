import { z } from "zod";
import type { AccessToken } from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { timestamp } from "./common.ts";

export const accessTokenRecord = z
  .object({
    id: z.string(),
    name: z.string(),
    abilities: z.array(z.string()),
    last_used_at: timestamp.nullable(),
    created_at: timestamp,
  })
  .meta({ id: "AccessToken" });

export function toAccessTokenRecord(token: AccessToken): z.infer<typeof accessTokenRecord> {
  return {
    id: token.id,
    name: token.name,
    abilities: token.abilities,
    last_used_at: isoTimestamp(token.lastUsedAt),
    created_at: isoTimestamp(token.createdAt),
  };
}
