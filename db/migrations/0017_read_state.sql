CREATE TABLE "conversation_read_states" (
	"conversation_id" text NOT NULL,
	"user_id" integer NOT NULL,
	"last_read_message_id" text,
	"muted" boolean DEFAULT false NOT NULL,
	CONSTRAINT "conversation_read_states_pkey" PRIMARY KEY("conversation_id","user_id")
);
--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "channel_push" text DEFAULT 'mentions' NOT NULL;--> statement-breakpoint
ALTER TABLE "channel_members" ADD COLUMN "last_read_message_id" text;--> statement-breakpoint
ALTER TABLE "channel_members" ADD COLUMN "push" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE "channel_members" ADD COLUMN "muted" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "conversation_read_states" ADD CONSTRAINT "conversation_read_states_conversation_id_conversations_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."conversations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "conversation_read_states" ADD CONSTRAINT "conversation_read_states_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "conversation_read_states_user_id_idx" ON "conversation_read_states" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "messages_channel_replies_idx" ON "messages" USING btree ("channel_id","id") WHERE "messages"."parent_message_id" is not null and "messages"."deleted_at" is null;--> statement-breakpoint
CREATE INDEX "messages_channel_mentions_idx" ON "messages" USING btree ("channel_id","id") INCLUDE ("author_user_id","mentions_channel","mentioned_user_ids") WHERE "messages"."deleted_at" is null and ("messages"."mentions_channel" or "messages"."mentioned_user_ids" <> '{}'::integer[]);--> statement-breakpoint
-- Unread counts read a channel's live top-level messages after a position, and their authors,
-- from the history index alone (docs/unread.md): it carries author_user_id and deleted_at.
DROP INDEX "messages_channel_id_id_idx";--> statement-breakpoint
CREATE INDEX "messages_channel_id_id_idx" ON "messages" USING btree ("channel_id","id") INCLUDE ("author_user_id","deleted_at") WHERE "messages"."parent_message_id" is null;--> statement-breakpoint
-- Every membership that exists when read positions arrive starts at its place's newest message:
-- nobody wakes up to a thousand unread messages (docs/unread.md).
UPDATE "channel_members" cm SET "last_read_message_id" = greatest(
  (SELECT max(m."id") FROM "messages" m WHERE m."channel_id" = cm."channel_id" AND m."parent_message_id" IS NULL AND m."deleted_at" IS NULL),
  (SELECT max(r."id") FROM "messages" r WHERE r."channel_id" = cm."channel_id" AND r."parent_message_id" IS NOT NULL AND r."deleted_at" IS NULL));--> statement-breakpoint
INSERT INTO "conversation_read_states" ("conversation_id", "user_id", "last_read_message_id")
SELECT c."id", p."user_id", c."last_message_id" FROM "conversations" c CROSS JOIN LATERAL (VALUES (c."user_a_id"), (c."user_b_id")) AS p("user_id")
ON CONFLICT DO NOTHING;--> statement-breakpoint
-- Those counts need the newest messages' heap pages marked all-visible, which only a vacuum does.
-- By default an insert-only table is vacuumed after 20% new rows (2,000,000 of 10,000,000), so
-- the unread (newest) messages would be the ones every count fetched from the heap: vacuum
-- messages every 10,000 inserted rows, and after 2% of its rows changed.
ALTER TABLE "messages" SET (autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_scale_factor = 0.02);
