-- The search index's keys (docs/search.md): the distinct one- and two-character pieces of lower-cased
-- text, none holding ASCII whitespace (a query's terms never hold whitespace, so a piece of a term is
-- always one of these). Characters are code points, as in the application's queryKeys().
CREATE FUNCTION "search_keys"("lowered" text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(DISTINCT piece), '{}'::text[]) FROM (
    SELECT substr(lowered, i, 1) AS piece FROM generate_series(1, length(lowered)) AS i
    UNION ALL
    SELECT substr(lowered, i, 2) FROM generate_series(1, length(lowered) - 1) AS i
  ) AS pieces
  WHERE piece !~ E'[ \t\n\r\f\v]'
$$;
--> statement-breakpoint
CREATE TABLE "consumer_backfills" (
	"name" text PRIMARY KEY NOT NULL,
	"before" text,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "message_search" (
	"message_id" text NOT NULL,
	"source" text NOT NULL,
	"place_id" text NOT NULL,
	"author_user_id" integer,
	"lowered" text NOT NULL,
	CONSTRAINT "message_search_pkey" PRIMARY KEY("message_id","source")
);
--> statement-breakpoint
ALTER TABLE "message_search" ADD CONSTRAINT "message_search_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "message_search_place_idx" ON "message_search" USING btree ("place_id","message_id");--> statement-breakpoint
CREATE INDEX "message_search_keys_idx" ON "message_search" USING gin (search_keys("lowered"));--> statement-breakpoint
-- Index the messages that exist now: the search consumer's backfill walks them, newest first (docs/search.md).
INSERT INTO "consumer_backfills" ("name") VALUES ('search');