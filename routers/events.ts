// Live events over WebSocket (or SSE): typed subscriptions, not REST.
import { tracked } from "@trpc/server";
import { topicMessages } from "../server/events/stream.ts";
import { userEvent, userTopic } from "../server/events/user-events.ts";
import { authedProcedure, router } from "../server/trpc.ts";

export const eventsRouter = router({
  /** Everything that happens to the caller's own account, as it happens. */
  onUser: authedProcedure.subscription(async function* ({ ctx, signal }) {
    for await (const message of topicMessages(ctx.deps.events, userTopic(ctx.auth.user.id), signal)) {
      const event = userEvent.parse(message);
      yield tracked(event.id, event);
    }
  }),
});
