CREATE TABLE "user_presence" (
	"user_id" integer PRIMARY KEY NOT NULL,
	"setting" text DEFAULT 'auto' NOT NULL,
	"dnd_until" timestamp with time zone,
	"status_text" varchar(400),
	"status_emoji" text,
	"status_expires_at" timestamp with time zone,
	"last_seen_at" timestamp with time zone,
	"version" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE "user_presence" ADD CONSTRAINT "user_presence_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;