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
	"keys" text[] NOT NULL,
	CONSTRAINT "message_search_pkey" PRIMARY KEY("message_id","source")
);
--> statement-breakpoint
ALTER TABLE "message_search" ADD CONSTRAINT "message_search_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "message_search_place_idx" ON "message_search" USING btree ("place_id","message_id");--> statement-breakpoint
CREATE INDEX "message_search_keys_idx" ON "message_search" USING gin ("keys");--> statement-breakpoint
-- Index the messages that exist now: the search consumer's backfill walks them, newest first (docs/search.md).
INSERT INTO "consumer_backfills" ("name") VALUES ('search');
