import { bigint, index, integer, jsonb, pgTable, text } from "drizzle-orm/pg-core";
import { timestamptz } from "./columns.ts";

/**
 * Every job until it is done (server/jobs/outbox.ts). A change that needs a job (a mail to send)
 * writes the row in its own transaction, so the job exists exactly when the change committed.
 * The outbox relay hands it to the queue (BullMQ with Redis, the in-process queue without)
 * under its stable job id; the row goes when the job has run (or failed for good). A row handed
 * over a while ago and still here is handed again: if Redis lost the job (restarted empty), it
 * runs; if Redis still holds it, the queue ignores the known id. Nothing is lost, nothing doubled.
 */
export const jobOutbox = pgTable(
  "job_outbox",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    /** The job definition's name (server/jobs/definition.ts); its queue and retries come from there. */
    name: text("name").notNull(),
    payload: jsonb("payload").notNull(),
    /** The queue's job id: given by the caller, or a random one. */
    jobId: text("job_id").notNull().unique(),
    /** Not before this time (a delayed job). */
    runAt: timestamptz("run_at"),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    /** When the relay last handed it to the queue; null until it has. */
    handedAt: timestamptz("handed_at"),
    /** Failed hand-overs so far (the queue was unreachable). */
    attempts: integer("attempts").notNull().default(0),
  },
  (table) => [index("job_outbox_handed_at_idx").on(table.handedAt)],
);

export type JobOutboxRow = typeof jobOutbox.$inferSelect;
