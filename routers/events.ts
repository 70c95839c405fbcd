// Live events of everything the user can see: their own account, their workspaces' membership
// and channel changes, and messages in their channels and conversations.
import { userEvents } from "../server/services/messaging/live.ts";
import { authedProcedure, router } from "../server/trpc.ts";
import { trackedStream } from "../server/trpc-live.ts";
import { resumable } from "./live.ts";

export const eventsRouter = router({
  onUser: authedProcedure
    .input(resumable.optional())
    .subscription(async ({ ctx, input, signal }) =>
      trackedStream(await userEvents(ctx.deps, ctx.auth, { lastEventId: input?.lastEventId }, signal)),
    ),
});
