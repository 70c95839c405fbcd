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
CREATE INDEX "messages_channel_unread_idx" ON "messages" USING btree ("channel_id","id") INCLUDE ("author_user_id","parent_message_id") WHERE "messages"."deleted_at" is null;--> statement-breakpoint
CREATE INDEX "messages_channel_mentions_idx" ON "messages" USING btree ("channel_id","id") INCLUDE ("author_user_id","mentions_channel","mentioned_user_ids") WHERE "messages"."deleted_at" is null and ("messages"."mentions_channel" or "messages"."mentioned_user_ids" <> '{}'::integer[]);--> statement-breakpoint
-- Every membership that exists when read positions arrive starts at its place's newest message:
-- nobody wakes up to a thousand unread messages (docs/unread.md).
UPDATE "channel_members" cm SET "last_read_message_id" = (SELECT max(m."id") FROM "messages" m WHERE m."channel_id" = cm."channel_id" AND m."deleted_at" IS NULL);--> statement-breakpoint
INSERT INTO "conversation_read_states" ("conversation_id", "user_id", "last_read_message_id")
SELECT c."id", p."user_id", c."last_message_id" FROM "conversations" c CROSS JOIN LATERAL (VALUES (c."user_a_id"), (c."user_b_id")) AS p("user_id")
ON CONFLICT DO NOTHING;
