DROP INDEX "messages_parent_message_id_id_idx";--> statement-breakpoint
DROP INDEX "messages_conversation_id_id_idx";--> statement-breakpoint
DROP INDEX "messages_room_id_id_idx";--> statement-breakpoint
CREATE INDEX "messages_parent_message_id_id_idx" ON "messages" USING btree ("parent_message_id","id") WHERE "messages"."parent_message_id" is not null;--> statement-breakpoint
CREATE INDEX "messages_conversation_id_id_idx" ON "messages" USING btree ("conversation_id","id") WHERE "messages"."conversation_id" is not null;--> statement-breakpoint
CREATE INDEX "messages_room_id_id_idx" ON "messages" USING btree ("room_id","id") WHERE "messages"."room_id" is not null;