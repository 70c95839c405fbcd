DROP INDEX "stream_events_position_idx";--> statement-breakpoint
DROP INDEX "stream_events_stream_position_idx";--> statement-breakpoint
CREATE UNIQUE INDEX "stream_events_position_idx" ON "stream_events" USING btree ("position") WHERE "stream_events"."position" is not null;--> statement-breakpoint
CREATE INDEX "stream_events_stream_position_idx" ON "stream_events" USING btree ("stream","position") WHERE "stream_events"."position" is not null;