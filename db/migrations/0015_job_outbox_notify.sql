-- A commit that wrote job rows wakes the job outbox of every server process (LISTEN
-- chat_job_outbox, server/jobs/outbox.ts): the wake-up comes from the commit, so no caller has
-- to remember it. Once per statement; PostgreSQL folds the notifications of one transaction.
CREATE FUNCTION "job_outbox_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('chat_job_outbox', '');
	RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER "job_outbox_notify" AFTER INSERT ON "job_outbox" FOR EACH STATEMENT EXECUTE FUNCTION "job_outbox_notify"();
