CREATE TABLE "file_deletions" (
	"storage_key" text PRIMARY KEY NOT NULL,
	"queued_at" timestamp with time zone DEFAULT now() NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE INDEX "file_deletions_queued_at_idx" ON "file_deletions" USING btree ("queued_at");--> statement-breakpoint
CREATE INDEX "access_tokens_expires_at_idx" ON "access_tokens" USING btree ("expires_at") WHERE "access_tokens"."expires_at" is not null;--> statement-breakpoint
-- Every deleted attachment queues its stored file for deletion, in the deleting transaction,
-- whatever deleted the row: a cascade from a workspace, channel, conversation or message, the
-- staged-file prune. The service deletes the bytes after the commit; a periodic job catches up.
CREATE FUNCTION "queue_attachment_file_deletion"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "file_deletions" ("storage_key") VALUES (OLD."storage_key") ON CONFLICT DO NOTHING;
  RETURN NULL;
END;
$$;--> statement-breakpoint
CREATE TRIGGER "attachments_queue_file_deletion" AFTER DELETE ON "attachments"
  FOR EACH ROW EXECUTE FUNCTION "queue_attachment_file_deletion"();
