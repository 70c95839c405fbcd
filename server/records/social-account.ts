import { z } from "zod";
import type { SocialAccount } from "../../db/schema/index.ts";
import { isoTimestamp } from "../clock.ts";
import { timestamp } from "./common.ts";

/** The document's "Linked social account". */
export const socialAccountRecord = z
  .object({
    id: z.number().int(),
    provider: z.string(),
    provider_email: z.string().nullable(),
    name: z.string().nullable(),
    avatar: z.string().nullable(),
    created_at: timestamp,
  })
  .meta({ id: "SocialAccount" });

/** The link-completion response carries only these four. */
export const linkedAccountRecord = socialAccountRecord
  .pick({
    id: true,
    provider: true,
    provider_email: true,
    name: true,
  })
  .meta({ id: "LinkedSocialAccount" });

export function toSocialAccountRecord(account: SocialAccount): z.infer<typeof socialAccountRecord> {
  return {
    id: account.id,
    provider: account.provider,
    provider_email: account.providerEmail,
    name: account.name,
    avatar: account.avatar,
    created_at: isoTimestamp(account.createdAt),
  };
}

export function toLinkedAccountRecord(account: SocialAccount): z.infer<typeof linkedAccountRecord> {
  return { id: account.id, provider: account.provider, provider_email: account.providerEmail, name: account.name };
}
