// The whole API: every procedure is defined once here and served as typed RPC (/trpc over
// HTTP and WebSocket) and as REST (/api/v1/... through trpc-to-openapi).
import { router } from "../server/trpc.ts";
import { authRouter } from "./auth.ts";
import { channelsRouter } from "./channels.ts";
import { devicesRouter } from "./devices.ts";
import { directRouter } from "./direct.ts";
import { invitesRouter } from "./invites.ts";
import { membersRouter } from "./members.ts";
import { workspacesRouter } from "./workspaces.ts";
import { emailVerificationRouter } from "./email-verification.ts";
import { eventsRouter } from "./events.ts";
import { meRouter } from "./me.ts";
import { channelMessageRouter, directMessageRouter, roomMessageRouter } from "./message-actions.ts";
import { messagesRouter } from "./messages.ts";
import { notificationPreferencesRouter } from "./notification-preferences.ts";
import { otpRouter } from "./otp.ts";
import { outboundWebhooksRouter } from "./outbound-webhooks.ts";
import { passwordResetRouter } from "./password-reset.ts";
import { presenceRouter } from "./presence.ts";
import { readStateRouter } from "./read-state.ts";
import { roomsRouter } from "./rooms.ts";
import { searchRouter } from "./search.ts";
import { socialRouter } from "./social.ts";
import { tokensRouter } from "./tokens.ts";
import { webhooksRouter } from "./webhooks.ts";

export const appRouter = router({
  auth: authRouter,
  emailVerification: emailVerificationRouter,
  events: eventsRouter,
  me: meRouter,
  otp: otpRouter,
  passwordReset: passwordResetRouter,
  social: socialRouter,
  tokens: tokensRouter,
  devices: devicesRouter,
  workspaces: workspacesRouter,
  channels: channelsRouter,
  members: membersRouter,
  invites: invitesRouter,
  messages: messagesRouter,
  channelMessage: channelMessageRouter,
  direct: directRouter,
  directMessage: directMessageRouter,
  webhooks: webhooksRouter,
  outboundWebhooks: outboundWebhooksRouter,
  rooms: roomsRouter,
  roomMessage: roomMessageRouter,
  notificationPreferences: notificationPreferencesRouter,
  readState: readStateRouter,
  search: searchRouter,
  presence: presenceRouter,
});

export type AppRouter = typeof appRouter;
