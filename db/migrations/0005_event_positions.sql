CREATE SEQUENCE "public"."stream_positions" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1;--> statement-breakpoint
DROP INDEX "stream_events_stream_id_idx";--> statement-breakpoint
DROP INDEX "stream_events_unpublished_idx";--> statement-breakpoint
ALTER TABLE "stream_events" ADD COLUMN "position" bigint;--> statement-breakpoint
CREATE UNIQUE INDEX "stream_events_position_idx" ON "stream_events" USING btree ("position");--> statement-breakpoint
CREATE INDEX "stream_events_stream_position_idx" ON "stream_events" USING btree ("stream","position");--> statement-breakpoint
CREATE INDEX "stream_events_unpositioned_idx" ON "stream_events" USING btree ("id") WHERE "stream_events"."position" is null;--> statement-breakpoint
-- Events written before positions existed were sent to clients with their ids as resume
-- points: they keep them as positions, and new positions continue above every id handed out.
UPDATE "stream_events" SET "position" = "id", "published_at" = coalesce("published_at", now());--> statement-breakpoint
SELECT setval('stream_positions', "last_value", "is_called") FROM "stream_events_id_seq";
