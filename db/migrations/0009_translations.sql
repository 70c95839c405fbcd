CREATE TABLE "message_translations" (
	"message_id" text NOT NULL,
	"language" text NOT NULL,
	"status" text NOT NULL,
	"content" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "message_translations_message_id_language_pk" PRIMARY KEY("message_id","language")
);
--> statement-breakpoint
CREATE TABLE "translation_cache" (
	"key" text PRIMARY KEY NOT NULL,
	"content" text NOT NULL,
	"used_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "language" text;--> statement-breakpoint
ALTER TABLE "message_translations" ADD CONSTRAINT "message_translations_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "translation_cache_used_at_idx" ON "translation_cache" USING btree ("used_at");