CREATE TABLE "consumer_cursors" (
	"name" text PRIMARY KEY NOT NULL,
	"position" bigint NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
-- The outbound dispatcher's cursor becomes the outbound consumer's; push and translation were
-- enqueued by the post itself until now, so their consumers start at the newest position.
INSERT INTO "consumer_cursors" ("name", "position") SELECT 'outbound', "position" FROM "outbound_dispatch" WHERE "id" = 1;
--> statement-breakpoint
INSERT INTO "consumer_cursors" ("name", "position") VALUES
	('push', coalesce((SELECT max("position") FROM "stream_events"), 0)),
	('translation', coalesce((SELECT max("position") FROM "stream_events"), 0))
	ON CONFLICT DO NOTHING;
--> statement-breakpoint
DROP TABLE "outbound_dispatch" CASCADE;
