import { z } from "zod";
import { messageRecord } from "./message.ts";

/** A search hit: the message in the caller's view, and where the terms were found. */
export const searchHitRecord = messageRecord
  .extend({
    matched_in: z
      .enum(["content", "translation"])
      .describe(
        "where every term was found: `content` (also when the translation has them too), or only in the caller's own stored translation",
      ),
  })
  .meta({ id: "MessageSearchHit" });

export const searchPageRecord = z.object({
  data: z.array(searchHitRecord),
  meta: z.object({
    next_cursor: z.string().nullable().describe("pass as `before` for the next (older) page; null on the last page"),
  }),
});

export type SearchHit = z.infer<typeof searchHitRecord>;
export type SearchPage = z.infer<typeof searchPageRecord>;
