// The dispatcher: turns the workspace events of the durable event stream (stream_events, the
// one live delivery reads) into outbound deliveries. It reads the events positioned after its
// cursor (outbound_dispatch), and in one transaction writes a delivery and its first job for
// each active webhook of the event's workspace that asked for its type (and existed when it
// happened), and moves the cursor past them. A crash before the commit leaves the cursor where
// it was (the events are read again); after it, the jobs are in the outbox: nothing is lost,
// nothing doubled. Every process runs one; the cursor's row lock (SKIP LOCKED) lets one at a time
// work. Woken when this process's relay positions events, and every second otherwise.
import { and, asc, eq, gt, inArray, lte, sql } from "drizzle-orm";
import { rowsOf, type Database } from "../../../db/client.ts";
import { outboundDeliveries, outboundDispatch, outboundWebhooks, streamEvents } from "../../../db/schema/index.ts";
import { isoTimestamp, type Clock } from "../../clock.ts";
import type { EventPayload } from "../../events/streams.ts";
import { newId } from "../../ids.ts";
import { enqueueJobs } from "../../jobs/outbox.ts";
import type { JobOutbox } from "../../jobs/outbox.ts";
import { oncePer, type Logger } from "../../logger.ts";
import { RunLoop } from "../../run-loop.ts";
import { deliveryBody, outboundWorkspaceOf } from "./events.ts";
import { deliverJobId, outboundJobs } from "./jobs.ts";

/** Events read per transaction. */
const BATCH_SIZE = 500;
const POLL_MS = 1_000;
/** A wake waits this long, so the events of many commits go in one transaction. */
const GATHER_MS = 50;

type DispatchDeps = { db: Database; clock: Clock; logger: Logger; jobOutbox: Pick<JobOutbox, "wake"> };

export class OutboundDispatcher {
  private closed = false;
  private readonly runs = new RunLoop(
    () => this.runBatch(),
    () => !this.closed,
  );
  private poller: NodeJS.Timeout | undefined;
  private gathering: NodeJS.Timeout | undefined;
  private readonly mayWarn = oncePer();

  constructor(private readonly deps: DispatchDeps) {}

  start(): void {
    this.poller = setInterval(() => this.runs.request(), POLL_MS).unref();
    this.runs.request();
  }

  /** Events were positioned: dispatch them shortly. */
  wake(): void {
    if (this.closed || this.gathering) return;
    this.gathering = setTimeout(() => {
      this.gathering = undefined;
      this.runs.request();
    }, GATHER_MS);
  }

  /** Dispatches what is positioned now; resolves when done (tests, shutdown). */
  async flush(): Promise<void> {
    this.runs.request();
    await this.runs.idle();
  }

  async close(): Promise<void> {
    clearInterval(this.poller);
    clearTimeout(this.gathering);
    this.closed = true;
    await this.runs.idle();
  }

  private async runBatch(): Promise<boolean> {
    try {
      const { read, written } = await this.dispatchOnce();
      if (written > 0) this.deps.jobOutbox.wake();
      return read === BATCH_SIZE;
    } catch (error) {
      if (this.mayWarn()) this.deps.logger.warn({ err: error }, "outbound webhooks: dispatch failed; will retry");
      return false;
    }
  }

  /** One transaction: the events after the cursor (up to BATCH_SIZE), their deliveries and jobs, the cursor moved. */
  async dispatchOnce(): Promise<{ read: number; written: number }> {
    return this.deps.db.transaction(async (tx) => {
      // The cursor, the newest position, and whether any webhook listens: the common case
      // (nothing new, or no active webhook anywhere) ends here or with the cursor moved.
      const [state] = rowsOf<{ position: string; newest: string | null; listening: boolean }>(
        await tx.execute(sql`
          select d.position::text as position,
            (select max(${streamEvents.position}) from ${streamEvents})::text as newest,
            exists (select 1 from ${outboundWebhooks} where ${outboundWebhooks.isActive}) as listening
          from ${outboundDispatch} d where d.id = 1 for update skip locked`),
      );
      if (!state) return { read: 0, written: 0 }; // another process is dispatching
      const position = Number(state.position);
      const newest = state.newest === null ? position : Number(state.newest);
      if (newest <= position) return { read: 0, written: 0 };
      if (!state.listening) {
        await tx
          .update(outboundDispatch)
          .set({ position: newest, updatedAt: this.deps.clock.now() })
          .where(eq(outboundDispatch.id, 1));
        return { read: 0, written: 0 };
      }

      const events = await tx
        .select({ position: streamEvents.position, payload: streamEvents.payload, createdAt: streamEvents.createdAt })
        .from(streamEvents)
        .where(and(gt(streamEvents.position, position), lte(streamEvents.position, newest)))
        .orderBy(asc(streamEvents.position))
        .limit(BATCH_SIZE);
      const reachedTo = events.length === BATCH_SIZE ? events.at(-1)!.position! : newest;
      const workspaceIds = [
        ...new Set(events.flatMap((event) => outboundWorkspaceOf(event.payload as EventPayload) ?? [])),
      ];
      const webhooks = workspaceIds.length
        ? await tx
            .select({
              id: outboundWebhooks.id,
              workspaceId: outboundWebhooks.workspaceId,
              events: outboundWebhooks.events,
              createdAt: outboundWebhooks.createdAt,
            })
            .from(outboundWebhooks)
            .where(and(inArray(outboundWebhooks.workspaceId, workspaceIds), eq(outboundWebhooks.isActive, true)))
        : [];

      // Each event for each active webhook of its workspace that asked for its type and existed then.
      const matches = events.flatMap((event) => {
        const payload = event.payload as EventPayload;
        const workspaceId = outboundWorkspaceOf(payload);
        return webhooks
          .filter(
            (webhook) =>
              webhook.workspaceId === workspaceId &&
              webhook.events.includes(payload.type) &&
              event.createdAt >= webhook.createdAt,
          )
          .map((webhook) => ({ event, payload, workspaceId: workspaceId!, webhook }));
      });
      const now = this.deps.clock.now();
      // Ids share the millisecond; sorted and handed out in event order, the log (by id) keeps that order.
      const ids = matches.map(() => newId("delivery", now.getTime())).sort();
      const deliveries = matches.map(
        ({ event, payload, workspaceId, webhook }, index): typeof outboundDeliveries.$inferInsert => ({
          id: ids[index]!,
          webhookId: webhook.id,
          event: payload.type,
          eventPosition: event.position,
          body: deliveryBody({
            id: ids[index]!,
            event: payload.type,
            createdAt: isoTimestamp(event.createdAt),
            workspaceId,
            data: payload.data,
          }),
          status: "pending",
          attempts: 0,
          nextAttemptAt: now,
          createdAt: now,
        }),
      );
      if (deliveries.length > 0) {
        await tx.insert(outboundDeliveries).values(deliveries);
        await enqueueJobs(
          tx,
          now,
          outboundJobs.deliver,
          deliveries.map(({ id }) => {
            const payload = { deliveryId: id, attempt: 1 };
            return { payload, jobId: deliverJobId(payload) };
          }),
        );
      }
      await tx.update(outboundDispatch).set({ position: reachedTo, updatedAt: now }).where(eq(outboundDispatch.id, 1));
      return { read: events.length, written: deliveries.length };
    });
  }
}
