// A generated authorization test: every procedure of the router (and the plain file routes)
// is called by every kind of caller, through every door it has (typed RPC at /trpc, REST at
// /api/v1, subscriptions over WebSocket and over SSE), against one fixture world built through
// the public API. What each call must answer is computed from the visibility rules (contract
// "Conventions", "Records" and roles; docs/api.md), not written per case:
//
//  - anonymous: 401 {"message":"Unauthenticated."} / UNAUTHORIZED on every bearer procedure;
//  - a record the caller may not see (the first record on the call's path that is hidden from
//    them): 404 with exactly the answer of the same call naming a record that does not exist;
//  - a record the caller can see but may not act on: 403;
//  - otherwise the procedure's own answer;
//  - and no answer to a caller, whatever its status, carries identifying data (ids, names,
//    slugs, contents, tokens) of a record hidden from that caller, nor does a list include it.
//
// A procedure added to the router without an entry in WALK fails the first test (and the
// type check: WALK is a mapped type over every procedure path). A last part follows accepted
// subscriptions (live and resumed) while private things happen, and checks what they deliver.
import { randomBytes } from "node:crypto";
import { EventSource } from "eventsource";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChatClient, TRPCClientError, type ChatClient, type RouterInputs } from "@chat-service/client";
import { appRouter } from "../routers/index.ts";
import { procedureMetas, type ProcedureMeta } from "../server/trpc.ts";
import type { ApiResponse } from "./helpers/api.ts";
import { registerUser, uniqueEmail, type RegisteredUser } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();

// ---------------------------------------------------------------------------------------------
// Callers and the records they may see
// ---------------------------------------------------------------------------------------------

const CALLERS = ["anonymous", "stranger", "outsider", "member", "admin", "owner", "other"] as const;
type Caller = (typeof CALLERS)[number];
type SignedIn = Exclude<Caller, "anonymous">;
/**
 * Users who never call: the bystander is a workspace member others add to and remove from
 * channels; the foreigner owns another workspace none of the callers is in (its records are
 * named through this workspace's paths).
 */
type Person = SignedIn | "bystander" | "foreigner";
const PEOPLE: Person[] = ["stranger", "outsider", "member", "admin", "owner", "other", "bystander", "foreigner"];

/**
 * The fixture world, by caller:
 * - owner: created the workspace, the public channel and the private channel;
 * - admin: workspace admin, not in the private channel;
 * - member: plain workspace member, in the private channel; owns the personal access token and
 *   the uploads; in the direct conversation with the owner and in one with `other`;
 * - outsider: plain workspace member outside the private channel;
 * - other: plain workspace member outside the private channel, in a conversation of its own
 *   with the member (a different signed-in user for user-owned records);
 * - stranger: signed in, not in the workspace; anonymous: no credentials.
 */
const ROLE: Record<Caller, "owner" | "admin" | "member" | null> = {
  anonymous: null,
  stranger: null,
  outsider: "member",
  member: "member",
  admin: "admin",
  owner: "owner",
  other: "member",
};
const IN_PRIVATE_CHANNEL: readonly Caller[] = ["owner", "member"];
/** The fixture public channel (and every fresh public channel): its creator only. */
const IN_PUBLIC_CHANNEL: readonly Caller[] = ["owner"];
const IN_CONVERSATION: readonly Caller[] = ["owner", "member"];
const IN_OTHER_CONVERSATION: readonly Caller[] = ["other", "member"];
const TOKEN_OWNER: Caller = "member";
const DEVICE_OWNER: Caller = "member";
const UPLOADER: Caller = "member";
/** Fresh temporary rooms: created by ROOM_OWNER (on the free plan), joined by `other`. */
const ROOM_OWNER: SignedIn = "member";
const IN_ROOM: readonly Caller[] = ["member", "other"];

const inWorkspace = (caller: Caller) => ROLE[caller] !== null;
const manages = (caller: Caller) => ROLE[caller] === "owner" || ROLE[caller] === "admin";

/** Which id of a call's input names the record at this level. */
type Level =
  | "workspace"
  | "channel"
  | "member"
  | "invite"
  | "webhook"
  | "outboundWebhook"
  | "room"
  | "conversation"
  | "token"
  | "device"
  | "attachment"
  | "message";
/** A record on a call's path, and who may see it. */
type Link = {
  level: Level;
  what: string;
  visibleTo: (caller: Caller) => boolean;
  /** The status of a missing record at this level, when not 404 (a record named in a request body: 422). */
  missingStatus?: number;
};

const R = {
  workspace: { level: "workspace", what: "the workspace", visibleTo: inWorkspace },
  publicChannel: { level: "channel", what: "a public channel", visibleTo: inWorkspace },
  privateChannel: {
    level: "channel",
    what: "a private channel",
    visibleTo: (caller) => IN_PRIVATE_CHANNEL.includes(caller),
  },
  member: { level: "member", what: "a workspace member", visibleTo: inWorkspace },
  invite: { level: "invite", what: "an invite (owners and admins only)", visibleTo: manages },
  /** Webhooks: a plain member is refused (403) rather than told they do not exist (contract). */
  webhook: { level: "webhook", what: "an inbound webhook", visibleTo: inWorkspace },
  outboundWebhook: { level: "outboundWebhook", what: "an outbound webhook", visibleTo: inWorkspace },
  room: { level: "room", what: "a temporary room (its members only)", visibleTo: (caller) => IN_ROOM.includes(caller) },
  ownRoom: { level: "room", what: "a temporary room (its owner only)", visibleTo: (caller) => caller === ROOM_OWNER },
  conversation: {
    level: "conversation",
    what: "the direct conversation",
    visibleTo: (caller) => IN_CONVERSATION.includes(caller),
  },
  otherConversation: {
    level: "conversation",
    what: "the other user's conversation",
    visibleTo: (caller) => IN_OTHER_CONVERSATION.includes(caller),
  },
  token: { level: "token", what: "a personal access token", visibleTo: (caller) => caller === TOKEN_OWNER },
  device: { level: "device", what: "a push device", visibleTo: (caller) => caller === DEVICE_OWNER },
  channelFile: {
    level: "attachment",
    what: "a file in the private channel",
    visibleTo: (caller) => IN_PRIVATE_CHANNEL.includes(caller),
  },
  directFile: {
    level: "attachment",
    what: "a file in the direct conversation",
    visibleTo: (caller) => IN_CONVERSATION.includes(caller),
  },
  stagedFile: { level: "attachment", what: "a staged upload", visibleTo: (caller) => caller === UPLOADER },
  general: { level: "channel", what: "#general", visibleTo: inWorkspace },
  /** A private channel's message as parent_message_id elsewhere: 422, as for a message that does not exist. */
  privateMessageInBody: {
    level: "message",
    what: "a message of the private channel",
    visibleTo: (caller) => IN_PRIVATE_CHANNEL.includes(caller),
    missingStatus: 422,
  },
  /** Another user's staged file in attachment_ids: 422 attachment_ids.N, as for a file that does not exist. */
  stagedFileInBody: {
    level: "attachment",
    what: "another user's staged upload",
    visibleTo: (caller) => caller === UPLOADER,
    missingStatus: 422,
  },
  wrongDoor: { level: "attachment", what: "a file asked for at the other kind's path", visibleTo: () => false },
  // Records of another workspace, named under this workspace's path: no caller sees them there.
  foreignChannel: { level: "channel", what: "a channel of another workspace", visibleTo: () => false },
  foreignMember: { level: "member", what: "a member of another workspace", visibleTo: () => false },
  foreignInvite: { level: "invite", what: "an invite of another workspace", visibleTo: () => false },
  // Messages, named at their place's path: seen by whoever reads the place.
  publicMessage: { level: "message", what: "a message of a public channel", visibleTo: inWorkspace },
  privateMessage: {
    level: "message",
    what: "a message of the private channel",
    visibleTo: (caller) => IN_PRIVATE_CHANNEL.includes(caller),
  },
  otherConversationMessage: {
    level: "message",
    what: "a message of the other user's conversation",
    visibleTo: (caller) => IN_OTHER_CONVERSATION.includes(caller),
  },
  roomMessage: {
    level: "message",
    what: "a message of a temporary room",
    visibleTo: (caller) => IN_ROOM.includes(caller),
  },
  // A message named in a read position's body (…/read, …/unread): 422 message_id when not there.
  publicMessageInBody: {
    level: "message",
    what: "a message of a public channel",
    visibleTo: inWorkspace,
    missingStatus: 422,
  },
  conversationMessageInBody: {
    level: "message",
    what: "a message of the direct conversation",
    visibleTo: (caller) => IN_CONVERSATION.includes(caller),
    missingStatus: 422,
  },
  misplacedMessageInBody: {
    level: "message",
    what: "a message of another place",
    visibleTo: () => false,
    missingStatus: 422,
  },
  /** A message named at the path of a place it is not in: not there, even for those who read it where it is. */
  misplacedMessage: { level: "message", what: "a message of another place", visibleTo: () => false },
} satisfies Record<string, Link>;

// ---------------------------------------------------------------------------------------------
// The table: procedure path → how to call it, and the rules that decide the answer
// ---------------------------------------------------------------------------------------------

type Namespace = keyof RouterInputs & string;
type ProcedurePath = { [N in Namespace]: `${N}.${keyof RouterInputs[N] & string}` }[Namespace];
type InputOf<P extends ProcedurePath> = P extends `${infer N}.${infer M}`
  ? N extends Namespace
    ? M extends keyof RouterInputs[N]
      ? RouterInputs[N][M]
      : never
    : never
  : never;

/** Typed RPC (HTTP batching, subscriptions over WebSocket), REST, and subscriptions over server-sent events. */
type Door = "rpc" | "rest" | "sse";
type CallContext = { caller: Caller; door: Door };

/** The ids a call names (by level), and the identifying data of fresh records made for it. */
type Target = {
  ids: Partial<Record<Level, string>>;
  /** Identifying data of the call's own records, secret from callers who may not see that level. */
  secrets?: Partial<Record<Level, string[]>>;
};

type Variant<I> = {
  label?: string;
  /** No credentials needed: every caller, anonymous included, gets the allowed answer. */
  public?: true;
  /** The records the call reaches, outermost first (a stranger stops at the workspace). */
  chain?: Link[];
  /** Who may act, once every record of the chain is visible (else 403). Default: everyone. */
  may?: (caller: Caller) => boolean;
  /**
   * The REST status(es) of the allowed answer when it is not the procedure's success status
   * (for instance 422 when the input is refused after the caller was let in). RPC: success
   * when they are 2xx, else an error with that httpStatus.
   */
  allowed?: number | readonly number[];
  /** Fresh records for a call that changes what it touches. Default: the fixture's (ids {}). */
  target?: (x: CallContext) => Promise<Target>;
  input: (t: Target, x: CallContext) => I;
  /** The credential to call with instead of the caller's own sign-in token (logout revokes it). */
  credential?: (x: CallContext) => Promise<string | undefined>;
  /** Further assertions on an allowed answer's body (lists include what the caller may see). */
  check?: (body: any, caller: Caller) => void;
};

type Walk = { [P in ProcedurePath]: Variant<InputOf<P>>[] };

// The fixture world, built in beforeAll (the table's builders run at call time).
let w: World;

const hex = (bytes = 4) => randomBytes(bytes).toString("hex");
const idOf = (t: Target, level: Level) => {
  const id = t.ids[level];
  if (id === undefined) throw new Error(`the target has no ${level} id`);
  return id;
};
const ids = (list: { id: string }[]) => list.map((entry) => entry.id);

const CHANNEL_KINDS = [
  { label: "public channel", link: R.publicChannel, visibility: "public", members: IN_PUBLIC_CHANNEL },
  { label: "private channel", link: R.privateChannel, visibility: "private", members: IN_PRIVATE_CHANNEL },
] as const;
type ChannelKind = (typeof CHANNEL_KINDS)[number];

/** The fixture channel of a kind (for calls that change nothing). */
const fixtureChannel = (kind: ChannelKind) => async (): Promise<Target> => ({
  ids: {
    workspace: w.workspace.id,
    channel: kind.visibility === "public" ? w.publicChannel.id : w.privateChannel.id,
  },
});

/** A fresh channel of a kind, with the kind's channel members (plus `extra`), made by the owner. */
const freshChannelOf =
  (kind: ChannelKind, extra: Person[] = []) =>
  async (): Promise<Target> => {
    const channel = await createChannel(kind.visibility, extra);
    return {
      ids: { workspace: w.workspace.id, channel: channel.id },
      secrets: { channel: [channel.name, channel.slug] },
    };
  };

const workspaceTarget = async (): Promise<Target> => ({ ids: { workspace: w.workspace.id } });

/** The other workspace's channel, named under this workspace's path. */
const foreignChannelTarget = async (): Promise<Target> => ({
  ids: { workspace: w.workspace.id, channel: w.foreign.channel.id },
});
/** A fresh channel of the other workspace (for calls that would change it), under this workspace's path. */
const freshForeignChannelTarget = async (): Promise<Target> => {
  const tag = hex();
  const channel = ok(
    await ctx.api.post(
      `/api/v1/workspaces/${w.foreign.id}/channels`,
      { name: `Abroad ${tag}`, slug: `abroad-${tag}` },
      { token: w.users.foreigner.token },
    ),
    201,
    "foreign channel create",
  ).data;
  return {
    ids: { workspace: w.workspace.id, channel: channel.id },
    secrets: { channel: [channel.name, channel.slug] },
  };
};
const FOREIGN = "a channel of another workspace";
const conversationTarget = async (): Promise<Target> => ({ ids: { conversation: w.conversation.id } });

// Messages after they are posted: each call acts on a fresh message (an edit, a delete or a
// reaction changes it), written by a known author, so that "its author" can be told apart from
// the place's moderators and from whoever else may read or post there. They are posted where
// no other entry reads the newest messages: fresh channels, #general, the other conversation,
// fresh rooms.

/** Who writes a message: a person, or the fixture's inbound webhook (a bot, in #general). */
type Author = Person | "bot";
/** The reaction of the walk: a Unicode emoji, percent-encoded in the REST path. */
const REACTION = "👍";

const nobody = () => false;

/** Who may change a message: its author (nobody among the callers for a bot's), and whoever `also` lets. */
const authorOr =
  (author: Author, also: (caller: Caller) => boolean = () => false) =>
  (caller: Caller) =>
    caller === author || also(caller);

/** Where a fresh message goes: its place's target, and that place's messages path. */
type Spot = { target: Target; path: string };

const channelMessagesPath = (t: Target) =>
  `/api/v1/workspaces/${idOf(t, "workspace")}/channels/${idOf(t, "channel")}/messages`;
/** A fresh channel of a kind (see freshChannelOf). */
const channelSpot = (kind: ChannelKind) => async (): Promise<Spot> => {
  const target = await freshChannelOf(kind)();
  return { target, path: channelMessagesPath(target) };
};
const generalSpot = async (): Promise<Spot> => {
  const target = { ids: { workspace: w.workspace.id, channel: w.general.id } };
  return { target, path: channelMessagesPath(target) };
};
const otherConversationSpot = async (): Promise<Spot> => ({
  target: { ids: { conversation: w.otherConversation.id } },
  path: `/api/v1/direct-conversations/${w.otherConversation.id}/messages`,
});
/** A fresh room (see freshRoom): the room of the call, or another one. */
const roomSpot = async (): Promise<Spot> => {
  const target = await freshRoom();
  return { target, path: `/api/v1/external/rooms/${idOf(target, "room")}/messages` };
};

/** A fresh message by `author` at a spot; with REACTION from `reactor` when one is named. */
const freshMessage = (spot: () => Promise<Spot>, author: Author, reactor?: SignedIn) => async (): Promise<Target> => {
  const { target, path } = await spot();
  const message = await writeMessage(author, target, path);
  if (reactor) await addReaction(reactor, `${path}/${message.id}`);
  return { ids: { ...target.ids, message: message.id }, secrets: { ...target.secrets, message: [message.content] } };
};

/** A message as the call names it: at a place's path, with who may do what to it there. */
type MessagePlace = {
  label: string;
  /** The place's records, then the message. */
  chain: Link[];
  author: Author;
  /** Who besides its author may delete it. */
  moderates: (caller: Caller) => boolean;
  /** Who may post there, and so react. */
  posts: (caller: Caller) => boolean;
  /** Who reacted (REACTION) to the message of a `reacted` target. */
  reactor: SignedIn;
  target: (reacted: boolean) => () => Promise<Target>;
};

/** Fresh messages by `author` at fresh or fixture spots. */
function placeOf(fields: Omit<MessagePlace, "target"> & { spot: () => Promise<Spot> }): MessagePlace {
  const { spot, ...place } = fields;
  return { ...place, target: (reacted) => freshMessage(spot, place.author, reacted ? place.reactor : undefined) };
}

/** A message named at the path of a place it is not in: hidden from everyone there (no rule comes into play). */
function misplaced(label: string, chain: Link[], target: () => Promise<Target>): MessagePlace {
  return { label, chain, author: "member", moderates: nobody, posts: nobody, reactor: "member", target: () => target };
}

const CHANNEL_MESSAGES: MessagePlace[] = [
  placeOf({
    // Its only channel member, who also manages the workspace.
    label: "public channel, the owner's message",
    chain: [R.workspace, R.publicChannel, R.publicMessage],
    author: "owner",
    reactor: "owner",
    moderates: manages,
    posts: (caller) => IN_PUBLIC_CHANNEL.includes(caller),
    spot: channelSpot(CHANNEL_KINDS[0]),
  }),
  placeOf({
    // Everyone is in #general: a plain member's message, which owners and admins may delete too.
    label: "#general, a plain member's message",
    chain: [R.workspace, R.general, R.publicMessage],
    author: "member",
    reactor: "member",
    moderates: manages,
    posts: inWorkspace,
    spot: generalSpot,
  }),
  placeOf({
    // A bot's message: nobody edits it; owners and admins delete it.
    label: "#general, a bot's message",
    chain: [R.workspace, R.general, R.publicMessage],
    author: "bot",
    reactor: "outsider",
    moderates: manages,
    posts: inWorkspace,
    spot: generalSpot,
  }),
  placeOf({
    // The admin may delete messages but cannot read this channel: 404.
    label: "private channel, the member's message",
    chain: [R.workspace, R.privateChannel, R.privateMessage],
    author: "member",
    reactor: "member",
    moderates: manages,
    posts: (caller) => IN_PRIVATE_CHANNEL.includes(caller),
    spot: channelSpot(CHANNEL_KINDS[1]),
  }),
  misplaced(
    "public channel, a message of the private channel",
    [R.workspace, R.publicChannel, R.misplacedMessage],
    async () => ({
      ids: { workspace: w.workspace.id, channel: w.publicChannel.id, message: w.privateMessageIds[0]! },
    }),
  ),
  misplaced(FOREIGN, [R.workspace, R.foreignChannel, R.misplacedMessage], async () => ({
    ids: { workspace: w.workspace.id, channel: w.foreign.channel.id, message: w.foreign.messageId },
  })),
];

const DIRECT_MESSAGES: MessagePlace[] = [
  placeOf({
    // The member's conversation with `other` (the one with the owner is listed by direct.messages).
    label: "the member's message",
    chain: [R.otherConversation, R.otherConversationMessage],
    author: "member",
    reactor: "other",
    moderates: nobody,
    posts: (caller) => IN_OTHER_CONVERSATION.includes(caller),
    spot: otherConversationSpot,
  }),
  misplaced("a message of the conversation with the owner", [R.otherConversation, R.misplacedMessage], async () => ({
    ids: { conversation: w.otherConversation.id, message: w.conversation.messageId },
  })),
];

const ROOM_MESSAGES: MessagePlace[] = [
  placeOf({
    // Written by the member who joined: the room's owner may delete it too.
    label: "a joiner's message",
    chain: [R.room, R.roomMessage],
    author: "other",
    reactor: "other",
    moderates: (caller) => caller === ROOM_OWNER,
    posts: (caller) => IN_ROOM.includes(caller),
    spot: roomSpot,
  }),
  placeOf({
    label: "the room owner's message",
    chain: [R.room, R.roomMessage],
    author: ROOM_OWNER,
    reactor: "other",
    moderates: (caller) => caller === ROOM_OWNER,
    posts: (caller) => IN_ROOM.includes(caller),
    spot: roomSpot,
  }),
  misplaced("a message of another room", [R.room, R.misplacedMessage], async () => {
    // Both rooms have the same members: the message is readable, in its own room.
    const [room, elsewhere] = await Promise.all([freshRoom(), freshMessage(roomSpot, "other")()]);
    return {
      ids: { room: idOf(room, "room"), message: idOf(elsewhere, "message") },
      secrets: { room: room.secrets!.room!, message: [...elsewhere.secrets!.message!, ...elsewhere.secrets!.room!] },
    };
  }),
];

/**
 * The five verbs on the messages of one kind of place (`where`: the path's ids of the place and
 * the message). Edit: its author only; delete: its author or the place's moderators; react:
 * whoever may post there; take a reaction back and list them: whoever may read.
 */
function messageVerbs<Where extends object>(places: MessagePlace[], where: (t: Target) => Where) {
  const each = <V>(make: (place: MessagePlace) => V) =>
    places.map((place) => ({ label: place.label, chain: place.chain, ...make(place) }));
  return {
    edit: each((place) => ({
      may: authorOr(place.author),
      target: place.target(false),
      input: (t: Target) => ({ ...where(t), content: `walk edit ${hex()}` }),
      check: (body: any) =>
        expect(body.data).toMatchObject({
          content: expect.stringMatching(/^walk edit /),
          edited_at: expect.any(String),
        }),
    })),
    delete: each((place) => ({
      may: authorOr(place.author, place.moderates),
      target: place.target(false),
      input: where,
    })),
    react: each((place) => ({
      may: place.posts,
      target: place.target(false),
      input: (t: Target) => ({ ...where(t), emoji: REACTION }),
      check: (body: any) => expect(body.data.reactions).toEqual([{ emoji: REACTION, count: 1, me: true }]),
    })),
    // The message carries the reactor's REACTION: theirs goes, anyone else has none to take back (204 too).
    unreact: each((place) => ({
      target: place.target(true),
      input: (t: Target) => ({ ...where(t), emoji: REACTION }),
    })),
    reactions: each((place) => ({
      target: place.target(true),
      input: where,
      check: (body: any) =>
        expect(body).toEqual({
          data: [{ emoji: REACTION, count: 1, user_ids: [w.users[place.reactor].id] }],
          meta: {},
        }),
    })),
  };
}

const CHANNEL_MESSAGE_VERBS = messageVerbs(CHANNEL_MESSAGES, (t) => ({
  workspace_id: idOf(t, "workspace"),
  channel_id: idOf(t, "channel"),
  message_id: idOf(t, "message"),
}));
const DIRECT_MESSAGE_VERBS = messageVerbs(DIRECT_MESSAGES, (t) => ({
  conversation_id: idOf(t, "conversation"),
  message_id: idOf(t, "message"),
}));
const ROOM_MESSAGE_VERBS = messageVerbs(ROOM_MESSAGES, (t) => ({
  room_id: idOf(t, "room"),
  message_id: idOf(t, "message"),
}));

/**
 * Read positions: a channel's members move theirs (403 for a public channel not joined); the
 * message is named in the body, so one that is not there is 422 `message_id`.
 */
const READ_CHANNEL = [
  ...CHANNEL_KINDS.map((kind) => ({
    label: kind.label,
    chain: [R.workspace, kind.link, kind.visibility === "public" ? R.publicMessageInBody : R.privateMessageInBody],
    may: (caller: Caller) => kind.members.includes(caller),
    target: freshMessage(channelSpot(kind), "owner"),
    input: (t: Target) => ({
      workspace_id: idOf(t, "workspace"),
      id: idOf(t, "channel"),
      message_id: idOf(t, "message"),
    }),
  })),
  {
    label: "#general, a member's message",
    chain: [R.workspace, R.general, R.publicMessageInBody],
    target: freshMessage(generalSpot, "member"),
    input: (t: Target) => ({
      workspace_id: idOf(t, "workspace"),
      id: idOf(t, "channel"),
      message_id: idOf(t, "message"),
    }),
  },
  {
    label: "#general, a message of the private channel",
    chain: [R.workspace, R.general, R.misplacedMessageInBody],
    target: async (): Promise<Target> => ({
      ids: { workspace: w.workspace.id, channel: w.general.id, message: w.privateMessageIds[0]! },
    }),
    input: (t: Target) => ({
      workspace_id: idOf(t, "workspace"),
      id: idOf(t, "channel"),
      message_id: idOf(t, "message"),
    }),
  },
  {
    label: FOREIGN,
    chain: [R.workspace, R.foreignChannel, R.misplacedMessageInBody],
    target: async (): Promise<Target> => ({
      ids: { workspace: w.workspace.id, channel: w.foreign.channel.id, message: w.foreign.messageId },
    }),
    input: (t: Target) => ({
      workspace_id: idOf(t, "workspace"),
      id: idOf(t, "channel"),
      message_id: idOf(t, "message"),
    }),
  },
];
const READ_CONVERSATION = [
  {
    chain: [R.conversation, R.conversationMessageInBody],
    target: async (): Promise<Target> => ({
      ids: { conversation: w.conversation.id, message: w.conversation.messageId },
    }),
    input: (t: Target) => ({ conversation_id: idOf(t, "conversation"), message_id: idOf(t, "message") }),
  },
  {
    label: "a message of the other conversation",
    chain: [R.conversation, R.misplacedMessageInBody],
    target: async (): Promise<Target> => ({
      ids: { conversation: w.conversation.id, message: w.privateMessageIds[1]! },
    }),
    input: (t: Target) => ({ conversation_id: idOf(t, "conversation"), message_id: idOf(t, "message") }),
  },
];

/** A channel's notification preferences: its members (403 for a public channel not joined). */
const CHANNEL_PREFERENCES = [
  ...CHANNEL_KINDS.map((kind) => ({
    label: kind.label,
    chain: [R.workspace, kind.link],
    may: (caller: Caller) => kind.members.includes(caller),
    target: fixtureChannel(kind),
    input: (t: Target) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "channel") }),
  })),
  {
    label: FOREIGN,
    chain: [R.workspace, R.foreignChannel],
    target: foreignChannelTarget,
    input: (t: Target) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "channel") }),
  },
];
const CONVERSATION_PREFERENCES = [
  {
    chain: [R.conversation],
    target: conversationTarget,
    input: (t: Target) => ({ conversation_id: idOf(t, "conversation") }),
  },
];

const WALK: Walk = {
  // ---- accounts ----
  "auth.register": [
    {
      public: true,
      input: () => {
        const password = "walk-password-1";
        return { name: "Walk Register", email: uniqueEmail("walk"), password, password_confirmation: password };
      },
    },
  ],
  "auth.login": [
    { public: true, allowed: 422, input: () => ({ email: uniqueEmail("walk"), password: "not-the-password" }) },
  ],
  "auth.webLogin": [
    { public: true, allowed: 422, input: () => ({ email: uniqueEmail("walk"), password: "not-the-password" }) },
  ],
  // Logout revokes the token used: each call signs out a token of its own (same user).
  "auth.logout": [{ credential: throwawayToken, input: () => undefined }],
  "auth.webLogout": [{ credential: throwawayToken, input: () => undefined }],
  // A wrong current password: the caller is let in, the input refused (a right one would sign
  // the caller's other tokens out).
  "auth.changePassword": [
    {
      allowed: 422,
      input: () => ({
        current_password: "not-the-password",
        password: "another-password-1",
        password_confirmation: "another-password-1",
      }),
    },
  ],
  "emailVerification.verify": [
    {
      public: true,
      allowed: 404,
      input: () => ({ id: 1, hash: "0".repeat(40), expires: "1", signature: "0".repeat(64) }),
    },
  ],
  "emailVerification.resend": [{ input: () => undefined }],
  "me.get": [{ input: () => undefined }],
  "me.update": [{ input: (_t, x) => ({ name: `Walk ${x.caller}` }) }],
  "otp.request": [{ public: true, input: () => ({ email: uniqueEmail("walk") }) }],
  "otp.verify": [{ public: true, allowed: 422, input: () => ({ email: uniqueEmail("walk"), token: "000000" }) }],
  "passwordReset.request": [{ public: true, allowed: 422, input: () => ({ email: uniqueEmail("walk") }) }],
  "passwordReset.reset": [
    {
      public: true,
      allowed: 422,
      input: () => ({
        token: "not-a-token",
        email: uniqueEmail("walk"),
        password: "walk-password-1",
        password_confirmation: "walk-password-1",
      }),
    },
  ],
  // No provider is configured: every social endpoint refuses the provider (422), after sign-in
  // where it needs one.
  "social.redirect": [{ public: true, allowed: 422, input: () => ({ provider: "nope" }) }],
  "social.callback": [{ public: true, allowed: 422, input: () => ({ provider: "nope", code: "code" }) }],
  "social.webRedirect": [{ public: true, allowed: 422, input: () => ({ provider: "nope" }) }],
  "social.webCallback": [
    { public: true, allowed: 422, input: () => ({ provider: "nope", code: "code", state: "state" }) },
  ],
  "social.accounts": [{ input: () => undefined, check: (body) => expect(body).toEqual({ accounts: [] }) }],
  "social.link": [{ allowed: 422, input: () => ({ provider: "nope" }) }],
  "social.linkCallback": [{ allowed: 422, input: () => ({ provider: "nope", code: "code" }) }],
  "social.unlink": [{ allowed: 422, input: () => ({ provider: "nope" }) }],

  // ---- personal access tokens ----
  "tokens.list": [
    {
      input: () => undefined,
      check: (body, caller) => expect(ids(body.data).includes(w.token.id)).toBe(R.token.visibleTo(caller)),
    },
  ],
  "tokens.create": [{ input: () => ({ name: `walk ${hex()}`, abilities: ["read"] }) }],
  "tokens.delete": [
    {
      chain: [R.token],
      target: async () => {
        const token = await createPersonalToken(w.users.member, `fresh-pat-${hex()}`);
        return { ids: { token: token.id }, secrets: { token: [token.name] } };
      },
      input: (t) => ({ id: idOf(t, "token") }),
    },
  ],

  // ---- push devices ----
  "devices.register": [
    { input: () => ({ platform: "ios", provider: "apns", push_token: `walk-${hex(16)}`, device_name: "Walk phone" }) },
  ],
  "devices.delete": [
    {
      chain: [R.device],
      target: async () => {
        const name = `walk-device-${hex()}`;
        const body = ok(
          await ctx.api.post(
            "/api/v1/devices",
            { platform: "android", provider: "fcm", push_token: `walk-${hex(16)}`, device_name: name },
            { token: w.users[DEVICE_OWNER].token },
          ),
          201,
          "device register",
        );
        return { ids: { device: body.data.id as string }, secrets: { device: [name] } };
      },
      input: (t) => ({ id: idOf(t, "device") }),
    },
  ],

  // ---- workspaces ----
  "workspaces.list": [
    {
      input: () => undefined,
      check: (body, caller) => expect(ids(body.data).includes(w.workspace.id)).toBe(inWorkspace(caller)),
    },
  ],
  "workspaces.create": [{ input: () => ({ name: `Walk ${hex()}` }) }],
  "workspaces.get": [{ chain: [R.workspace], target: workspaceTarget, input: (t) => ({ id: idOf(t, "workspace") }) }],
  // The workspace is private: invite only, and invisible to non-members (members: 200, no change).
  "workspaces.join": [{ chain: [R.workspace], target: workspaceTarget, input: (t) => ({ id: idOf(t, "workspace") }) }],

  // ---- channels ----
  "channels.list": [
    {
      chain: [R.workspace],
      target: workspaceTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace") }),
      check: (body, caller) => {
        const listed = ids(body.data);
        expect(listed).toContain(w.publicChannel.id);
        expect(listed.includes(w.privateChannel.id)).toBe(R.privateChannel.visibleTo(caller));
      },
    },
  ],
  "channels.create": [
    {
      chain: [R.workspace],
      may: manages,
      target: workspaceTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), name: `Walk ${hex()}` }),
    },
  ],
  "channels.update": [
    ...CHANNEL_KINDS.map((kind) => ({
      label: kind.label,
      chain: [R.workspace, kind.link],
      may: manages,
      target: freshChannelOf(kind),
      input: (t: Target) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "channel"), name: `Renamed ${hex()}` }),
    })),
    {
      label: FOREIGN,
      chain: [R.workspace, R.foreignChannel],
      may: manages,
      target: freshForeignChannelTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "channel"), name: `Renamed ${hex()}` }),
    },
  ],
  "channels.delete": [
    ...CHANNEL_KINDS.map((kind) => ({
      label: kind.label,
      chain: [R.workspace, kind.link],
      may: manages,
      target: freshChannelOf(kind),
      input: (t: Target) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "channel") }),
    })),
    {
      label: FOREIGN,
      chain: [R.workspace, R.foreignChannel],
      may: manages,
      target: freshForeignChannelTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "channel") }),
    },
  ],
  // Joining changes membership: a fresh channel each call (the private one's members are already in).
  "channels.join": CHANNEL_KINDS.map((kind) => ({
    label: kind.label,
    chain: [R.workspace, kind.link],
    target: freshChannelOf(kind),
    input: (t: Target) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "channel") }),
  })),
  "channels.members": [
    ...CHANNEL_KINDS.map((kind) => ({
      label: kind.label,
      chain: [R.workspace, kind.link],
      target: fixtureChannel(kind),
      input: (t: Target) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "channel") }),
      check: (body: any) =>
        expect(body.data.map((entry: { user_id: number }) => entry.user_id).sort()).toEqual(
          kind.members.map((caller) => w.users[caller as SignedIn].id).sort(),
        ),
    })),
    {
      label: FOREIGN,
      chain: [R.workspace, R.foreignChannel],
      target: foreignChannelTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "channel") }),
    },
  ],
  // Owners, admins and the channel's own members add a workspace member (the bystander).
  "channels.addMember": CHANNEL_KINDS.map((kind) => ({
    label: kind.label,
    chain: [R.workspace, kind.link],
    may: (caller: Caller) => manages(caller) || kind.members.includes(caller),
    target: freshChannelOf(kind),
    input: (t: Target) => ({
      workspace_id: idOf(t, "workspace"),
      id: idOf(t, "channel"),
      user_id: w.users.bystander.id,
    }),
  })),
  // Owners and admins remove someone else (the bystander, in the fresh channel).
  "channels.removeMember": CHANNEL_KINDS.map((kind) => ({
    label: kind.label,
    chain: [R.workspace, kind.link],
    may: manages,
    target: freshChannelOf(kind, ["bystander"]),
    input: (t: Target) => ({
      workspace_id: idOf(t, "workspace"),
      id: idOf(t, "channel"),
      user_id: w.users.bystander.id,
    }),
  })),

  // ---- workspace members ----
  "members.list": [
    { chain: [R.workspace], target: workspaceTarget, input: (t) => ({ workspace_id: idOf(t, "workspace") }) },
  ],
  "members.update": [
    {
      label: "a plain member",
      chain: [R.workspace, R.member],
      may: manages,
      target: freshMemberTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "member"), role: "admin" }),
    },
    {
      // Only an owner touches an owner; the last owner cannot be demoted (422).
      label: "the owner",
      chain: [R.workspace, R.member],
      may: (caller) => ROLE[caller] === "owner",
      allowed: 422,
      target: async () => ({ ids: { workspace: w.workspace.id, member: w.ownerMemberId } }),
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "member"), role: "admin" }),
    },
    {
      label: "a member of another workspace",
      chain: [R.workspace, R.foreignMember],
      may: manages,
      target: async () => ({ ids: { workspace: w.workspace.id, member: w.foreign.memberId } }),
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "member"), role: "member" }),
    },
  ],
  "members.remove": [
    {
      label: "a plain member",
      chain: [R.workspace, R.member],
      may: manages,
      target: freshMemberTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "member") }),
    },
    {
      // Only an owner removes an owner; the last owner cannot leave (422).
      label: "the owner",
      chain: [R.workspace, R.member],
      may: (caller) => ROLE[caller] === "owner",
      allowed: 422,
      target: async () => ({ ids: { workspace: w.workspace.id, member: w.ownerMemberId } }),
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "member") }),
    },
    {
      label: "a member of another workspace",
      chain: [R.workspace, R.foreignMember],
      may: manages,
      target: async () => ({ ids: { workspace: w.workspace.id, member: w.foreign.memberId } }),
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "member") }),
    },
  ],

  // ---- invites ----
  // Another workspace's invite: holding its token is what lets one preview and accept it.
  "invites.preview": [{ public: true, input: () => ({ token: w.lobby.inviteToken }) }],
  "invites.accept": [
    {
      target: async () => ({ ids: { invite: await createLobbyInvite() } }),
      input: (t) => ({ token: idOf(t, "invite") }),
    },
  ],
  "invites.list": [
    {
      chain: [R.workspace],
      may: manages,
      target: workspaceTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace") }),
      check: (body) => expect(ids(body.data)).toContain(w.invite.id),
    },
  ],
  "invites.create": [
    {
      chain: [R.workspace],
      may: manages,
      target: workspaceTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), expires_in_days: 7 }),
    },
  ],
  // Invites are seen by owners and admins only: to a plain member an invite does not exist.
  "invites.delete": [
    {
      chain: [R.workspace, R.invite],
      target: async () => {
        const invite = await createInvite(w.workspace.id);
        return { ids: { workspace: w.workspace.id, invite: invite.id }, secrets: { invite: [invite.token] } };
      },
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "invite") }),
    },
    {
      label: "an invite of another workspace",
      chain: [R.workspace, R.foreignInvite],
      target: async () => {
        const invite = await createInvite(w.foreign.id, w.users.foreigner);
        return { ids: { workspace: w.workspace.id, invite: invite.id }, secrets: { invite: [invite.token] } };
      },
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "invite") }),
    },
  ],

  // ---- inbound webhooks (owners and admins) ----
  "webhooks.list": [
    {
      chain: [R.workspace],
      may: manages,
      target: workspaceTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace") }),
    },
  ],
  "webhooks.create": [
    {
      chain: [R.workspace],
      may: manages,
      target: workspaceTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), name: `Hook ${hex()}` }),
    },
  ],
  "webhooks.update": [
    {
      chain: [R.workspace, R.webhook],
      may: manages,
      target: freshWebhook,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "webhook"), name: `Renamed ${hex()}` }),
    },
  ],
  "webhooks.delete": [
    {
      chain: [R.workspace, R.webhook],
      may: manages,
      target: freshWebhook,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "webhook") }),
    },
  ],
  "webhooks.requests": [
    {
      chain: [R.workspace, R.webhook],
      may: manages,
      target: freshWebhook,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "webhook") }),
    },
  ],

  // ---- temporary rooms ----
  "rooms.create": [{ input: () => ({ name: `Walk room ${hex()}` }) }],
  "rooms.get": [{ chain: [R.room], target: freshRoom, input: (t) => ({ room_id: idOf(t, "room") }) }],
  "rooms.join": [{ target: freshRoom, input: (t) => ({ room_id: idOf(t, "room") }) }],
  "rooms.messages": [{ chain: [R.room], target: freshRoom, input: (t) => ({ room_id: idOf(t, "room") }) }],
  "rooms.post": [
    {
      chain: [R.room],
      target: freshRoom,
      // A room's missing or foreign id is a 404 on posting too.
      input: (t) => ({ room_id: idOf(t, "room"), content: `walk ${hex()}` }),
    },
  ],
  "rooms.onRoom": [{ chain: [R.room], target: freshRoom, input: (t) => ({ room_id: idOf(t, "room") }) }],
  "rooms.extend": [
    {
      chain: [R.ownRoom],
      target: freshRoom,
      // The owner is let in, then refused by the plan rule (free): the document's 403.
      allowed: 403,
      input: (t) => ({ room_id: idOf(t, "room") }),
    },
  ],

  // ---- messages after they are posted (rules: messageVerbs) ----
  // Walked before the outbound webhooks: those hear message.created, and each of the many
  // messages posted here would then be delivered to every one of them, slowing the walk down.
  "channelMessage.edit": CHANNEL_MESSAGE_VERBS.edit,
  "channelMessage.delete": CHANNEL_MESSAGE_VERBS.delete,
  "channelMessage.react": CHANNEL_MESSAGE_VERBS.react,
  "channelMessage.unreact": CHANNEL_MESSAGE_VERBS.unreact,
  "channelMessage.reactions": CHANNEL_MESSAGE_VERBS.reactions,
  "directMessage.edit": DIRECT_MESSAGE_VERBS.edit,
  "directMessage.delete": DIRECT_MESSAGE_VERBS.delete,
  "directMessage.react": DIRECT_MESSAGE_VERBS.react,
  "directMessage.unreact": DIRECT_MESSAGE_VERBS.unreact,
  "directMessage.reactions": DIRECT_MESSAGE_VERBS.reactions,
  "roomMessage.edit": ROOM_MESSAGE_VERBS.edit,
  "roomMessage.delete": ROOM_MESSAGE_VERBS.delete,
  "roomMessage.react": ROOM_MESSAGE_VERBS.react,
  "roomMessage.unreact": ROOM_MESSAGE_VERBS.unreact,
  "roomMessage.reactions": ROOM_MESSAGE_VERBS.reactions,

  // ---- outbound webhooks (owners and admins) ----
  "outboundWebhooks.list": [
    {
      chain: [R.workspace],
      may: manages,
      target: workspaceTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace") }),
    },
  ],
  "outboundWebhooks.create": [
    {
      chain: [R.workspace],
      may: manages,
      target: workspaceTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), url: CLOSED_URL, events: ["message.created"] }),
    },
  ],
  "outboundWebhooks.update": [
    {
      chain: [R.workspace, R.outboundWebhook],
      may: manages,
      target: freshOutboundWebhook,
      input: (t) => ({
        workspace_id: idOf(t, "workspace"),
        id: idOf(t, "outboundWebhook"),
        events: ["member.joined"],
      }),
    },
  ],
  "outboundWebhooks.delete": [
    {
      chain: [R.workspace, R.outboundWebhook],
      may: manages,
      target: freshOutboundWebhook,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "outboundWebhook") }),
    },
  ],
  "outboundWebhooks.deliveries": [
    {
      chain: [R.workspace, R.outboundWebhook],
      may: manages,
      target: freshOutboundWebhook,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), id: idOf(t, "outboundWebhook") }),
    },
  ],
  "outboundWebhooks.test": [
    {
      chain: [R.workspace, R.outboundWebhook],
      may: manages,
      target: freshOutboundWebhook,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), webhook_id: idOf(t, "outboundWebhook") }),
    },
  ],

  // ---- channel messages ----
  "messages.list": [
    ...CHANNEL_KINDS.map((kind) => ({
      label: kind.label,
      chain: [R.workspace, kind.link],
      target: fixtureChannel(kind),
      input: (t: Target) => ({ workspace_id: idOf(t, "workspace"), channel_id: idOf(t, "channel") }),
      check: (body: any) => {
        const contents = body.data.map((message: { content: string }) => message.content);
        expect(contents).toContain(kind.visibility === "public" ? w.publicContent : w.secretContents[0]);
      },
    })),
    {
      // A thread is read through its own channel only: a private message's id as the parent in
      // the public channel shows nothing of it.
      label: "public channel, a private message as the thread parent",
      chain: [R.workspace, R.publicChannel],
      target: fixtureChannel(CHANNEL_KINDS[0]),
      input: (t) => ({
        workspace_id: idOf(t, "workspace"),
        channel_id: idOf(t, "channel"),
        parent_message_id: w.privateMessageIds[0]!,
      }),
      check: (body) => expect(body.data).toEqual([]),
    },
    {
      label: FOREIGN,
      chain: [R.workspace, R.foreignChannel],
      target: foreignChannelTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), channel_id: idOf(t, "channel") }),
    },
  ],
  // Posting needs channel membership: a visible channel one is not in is 403.
  "messages.post": [
    ...CHANNEL_KINDS.map((kind) => ({
      label: kind.label,
      chain: [R.workspace, kind.link],
      may: (caller: Caller) => kind.members.includes(caller),
      target: fixtureChannel(kind),
      input: (t: Target) => ({
        workspace_id: idOf(t, "workspace"),
        channel_id: idOf(t, "channel"),
        content: `walk post ${hex()}`,
      }),
    })),
    {
      label: FOREIGN,
      chain: [R.workspace, R.foreignChannel],
      target: foreignChannelTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), channel_id: idOf(t, "channel"), content: `walk ${hex()}` }),
    },
    {
      // A reply's parent must be a top-level message of the same channel: one of the private
      // channel is refused like a message that does not exist (those who see it get the same 422).
      label: "#general, a private message as the parent",
      chain: [R.workspace, R.general, R.privateMessageInBody],
      allowed: 422,
      target: async () => ({
        ids: { workspace: w.workspace.id, channel: w.general.id, message: w.privateMessageIds[0]! },
      }),
      input: (t) => ({
        workspace_id: idOf(t, "workspace"),
        channel_id: idOf(t, "channel"),
        content: `walk reply ${hex()}`,
        parent_message_id: idOf(t, "message"),
      }),
    },
    {
      // Everyone is in #general; only the uploader may attach their staged file.
      label: "#general, attaching the member's staged upload",
      chain: [R.workspace, R.general, R.stagedFileInBody],
      target: async () => {
        const file = await uploadFile(w.users.member, "fresh-staged");
        return {
          ids: { workspace: w.workspace.id, channel: w.general.id, attachment: file.id },
          secrets: { attachment: [file.filename, file.content] },
        };
      },
      input: (t) => ({
        workspace_id: idOf(t, "workspace"),
        channel_id: idOf(t, "channel"),
        content: `walk ${hex()}`,
        attachment_ids: [idOf(t, "attachment")],
      }),
    },
  ],
  "messages.onChannel": [
    ...CHANNEL_KINDS.map((kind) => ({
      label: kind.label,
      chain: [R.workspace, kind.link],
      target: fixtureChannel(kind),
      input: (t: Target) => ({ workspace_id: idOf(t, "workspace"), channel_id: idOf(t, "channel") }),
    })),
    {
      label: FOREIGN,
      chain: [R.workspace, R.foreignChannel],
      target: foreignChannelTarget,
      input: (t) => ({ workspace_id: idOf(t, "workspace"), channel_id: idOf(t, "channel") }),
    },
  ],
  "messages.typing": [
    ...CHANNEL_KINDS.map((kind) => ({
      label: kind.label,
      chain: [R.workspace, kind.link],
      target: fixtureChannel(kind),
      input: (t: Target) => ({ workspace_id: idOf(t, "workspace"), channel_id: idOf(t, "channel") }),
    })),
    {
      label: "direct conversation",
      chain: [R.conversation],
      target: conversationTarget,
      input: (t) => ({ conversation_id: idOf(t, "conversation") }),
    },
  ],

  // ---- direct chat ----
  "direct.list": [
    {
      input: () => undefined,
      check: (body, caller) => {
        const listed = ids(body.data);
        expect(listed.includes(w.conversation.id)).toBe(R.conversation.visibleTo(caller));
        expect(listed.includes(w.otherConversation.id)).toBe(R.otherConversation.visibleTo(caller));
      },
    },
  ],
  // Create-or-get with another user: anyone may (201 new, 200 existing).
  "direct.open": [
    {
      allowed: [200, 201],
      input: (_t, x) => ({
        participant_user_id: x.caller === "member" ? w.users.owner.id : w.users.member.id,
      }),
    },
  ],
  "direct.resolve": [{ input: () => ({ email: w.users.member.email }) }],
  "direct.messages": [
    {
      chain: [R.conversation],
      target: conversationTarget,
      input: (t) => ({ conversation_id: idOf(t, "conversation") }),
      check: (body) =>
        expect(body.data.map((message: { content: string }) => message.content)).toContain(w.conversation.content),
    },
  ],
  "direct.post": [
    {
      chain: [R.conversation],
      target: conversationTarget,
      input: (t) => ({ conversation_id: idOf(t, "conversation"), content: `walk dm ${hex()}` }),
    },
    {
      label: "attaching the member's staged upload",
      chain: [R.conversation, R.stagedFileInBody],
      target: async () => {
        const file = await uploadFile(w.users.member, "fresh-staged");
        return {
          ids: { conversation: w.conversation.id, attachment: file.id },
          secrets: { attachment: [file.filename, file.content] },
        };
      },
      input: (t) => ({
        conversation_id: idOf(t, "conversation"),
        content: `walk dm ${hex()}`,
        attachment_ids: [idOf(t, "attachment")],
      }),
    },
  ],
  "direct.onConversation": [
    {
      chain: [R.conversation],
      target: conversationTarget,
      input: (t) => ({ conversation_id: idOf(t, "conversation") }),
    },
  ],

  // ---- notification preferences ----
  "notificationPreferences.getChannel": CHANNEL_PREFERENCES,
  "notificationPreferences.updateChannel": CHANNEL_PREFERENCES.map((entry) => ({
    ...entry,
    input: (t: Target) => ({ ...entry.input(t), muted: false }),
  })),
  "notificationPreferences.getConversation": CONVERSATION_PREFERENCES,
  "notificationPreferences.updateConversation": CONVERSATION_PREFERENCES.map((entry) => ({
    ...entry,
    input: (t: Target) => ({ ...entry.input(t), muted: false }),
  })),
  "notificationPreferences.getMine": [{ input: () => undefined }],
  "notificationPreferences.updateMine": [{ input: () => ({ channel_push: "mentions" as const }) }],

  // ---- read state ----
  "readState.readChannel": READ_CHANNEL,
  "readState.unreadChannel": READ_CHANNEL,
  "readState.readConversation": READ_CONVERSATION,
  "readState.unreadConversation": READ_CONVERSATION,
  "readState.summary": [{ input: () => undefined }],

  // ---- search ----
  "search.messages": [
    {
      // Everything the caller can read: the walk's leak check holds the secrets of the rest.
      label: "no filter",
      input: () => ({ q: "secret" }),
      check: (body, caller) => {
        const contents = body.data.map((message: { content: string }) => message.content);
        if (IN_PRIVATE_CHANNEL.includes(caller)) expect(contents).toEqual(expect.arrayContaining(w.secretContents));
        else expect(contents.filter((content: string) => w.secretContents.includes(content))).toEqual([]);
      },
    },
    ...CHANNEL_KINDS.map((kind) => ({
      label: kind.label,
      chain: [R.workspace, kind.link],
      target: fixtureChannel(kind),
      input: (t: Target) => ({
        q: kind.visibility === "public" ? "public hello" : "secret plan",
        workspace_id: idOf(t, "workspace"),
        channel_id: idOf(t, "channel"),
      }),
      check: (body: any) => {
        const contents = body.data.map((message: { content: string }) => message.content);
        expect(contents).toContain(kind.visibility === "public" ? w.publicContent : w.secretContents[0]);
      },
    })),
    {
      label: "the workspace",
      chain: [R.workspace],
      target: workspaceTarget,
      input: (t) => ({ q: "public hello", workspace_id: idOf(t, "workspace") }),
      check: (body) =>
        expect(body.data.map((message: { content: string }) => message.content)).toContain(w.publicContent),
    },
    {
      label: FOREIGN,
      chain: [R.workspace, R.foreignChannel],
      target: foreignChannelTarget,
      input: (t) => ({ q: "a", workspace_id: idOf(t, "workspace"), channel_id: idOf(t, "channel") }),
    },
    {
      label: "the conversation",
      chain: [R.conversation],
      target: conversationTarget,
      input: (t) => ({ q: "dm secret", conversation_id: idOf(t, "conversation") }),
      check: (body) =>
        expect(body.data.map((message: { content: string }) => message.content)).toEqual([w.conversation.content]),
    },
  ],

  // ---- live ----
  "events.onUser": [{ input: () => undefined }],
  "presence.get": [{ input: () => undefined }],
  "presence.update": [{ input: () => ({ status_text: "Walking" }) }],
  "presence.list": [
    {
      // Everyone asks for everyone: the answer holds the caller and those who share a workspace
      // or a conversation with them, never the foreigner (whom nobody shares anything with; the
      // walk's own calls may open conversations for the stranger).
      input: () => ({ user_ids: PEOPLE.map((person) => w.users[person].id).join(",") }),
      check: (body, caller) => {
        const ids = body.data.map((record: { user_id: number }) => record.user_id);
        const seen = (person: Person) => w.users[person].id;
        expect(ids).not.toContain(seen("foreigner"));
        if (caller === "stranger") expect(ids).toContain(seen("stranger"));
        else expect(ids).toEqual(expect.arrayContaining([seen(caller as SignedIn), seen("owner"), seen("bystander")]));
      },
    },
  ],
  "presence.onUsers": [{ input: () => ({ user_ids: [w.users.owner.id] }) }],
};

// The plain routes (multipart upload, binary downloads) are no procedures of the router, and
// are walked the same way (REST only).
type PlainRoute = {
  name: string;
  chain: Link[];
  allowed: number;
  target: () => Target;
  call: (t: Target, token: string | undefined) => Promise<ApiResponse>;
};

const download = (kind: "message" | "direct-message") => (t: Target, token: string | undefined) =>
  ctx.api.get(`/api/v1/${kind}-attachments/${encodeURIComponent(idOf(t, "attachment"))}/download`, { token });

const PLAIN_ROUTES: PlainRoute[] = [
  {
    name: "POST /api/v1/files",
    chain: [],
    allowed: 201,
    target: () => ({ ids: {} }),
    call: async (_t, token) => upload(token, `walk-${hex()}.txt`, "walk upload"),
  },
  {
    name: "GET /api/v1/message-attachments/{id}/download [file in the private channel]",
    chain: [R.channelFile],
    allowed: 200,
    target: () => ({ ids: { attachment: w.files.channel.id } }),
    call: download("message"),
  },
  {
    name: "GET /api/v1/direct-message-attachments/{id}/download [file in the direct conversation]",
    chain: [R.directFile],
    allowed: 200,
    target: () => ({ ids: { attachment: w.files.direct.id } }),
    call: download("direct-message"),
  },
  {
    name: "GET /api/v1/message-attachments/{id}/download [staged upload]",
    chain: [R.stagedFile],
    allowed: 200,
    target: () => ({ ids: { attachment: w.files.staged.id } }),
    call: download("message"),
  },
  {
    name: "GET /api/v1/direct-message-attachments/{id}/download [channel file at the direct path]",
    chain: [R.wrongDoor],
    allowed: 200,
    target: () => ({ ids: { attachment: w.files.channel.id } }),
    call: download("direct-message"),
  },
  {
    name: "GET /api/v1/message-attachments/{id}/download [direct file at the channel path]",
    chain: [R.wrongDoor],
    allowed: 200,
    target: () => ({ ids: { attachment: w.files.direct.id } }),
    call: download("message"),
  },
];

// ---------------------------------------------------------------------------------------------
// Expectations from the rules
// ---------------------------------------------------------------------------------------------

type Expectation =
  | { kind: "unauthenticated" }
  | { kind: "hidden"; link: Link }
  | { kind: "forbidden" }
  | { kind: "allowed"; statuses: readonly number[] | undefined };

function expectationFor(
  variant: Pick<Variant<unknown>, "public" | "chain" | "may" | "allowed">,
  caller: Caller,
): Expectation {
  const statuses =
    variant.allowed === undefined
      ? undefined
      : typeof variant.allowed === "number"
        ? [variant.allowed]
        : variant.allowed;
  if (variant.public) return { kind: "allowed", statuses };
  if (caller === "anonymous") return { kind: "unauthenticated" };
  const hidden = (variant.chain ?? []).find((link) => !link.visibleTo(caller));
  if (hidden) return { kind: "hidden", link: hidden };
  if (variant.may && !variant.may(caller)) return { kind: "forbidden" };
  return { kind: "allowed", statuses };
}

function describeExpectation(expectation: Expectation, successStatus: number): string {
  switch (expectation.kind) {
    case "unauthenticated":
      return "401";
    case "hidden":
      return `${expectation.link.missingStatus ?? 404} as if ${expectation.link.what} did not exist`;
    case "forbidden":
      return "403";
    case "allowed":
      return (expectation.statuses ?? [successStatus]).join("/");
  }
}

/** The same target with the record at `level` replaced by one that does not exist. */
function ghostOf(target: Target, level: Level): Target {
  const prefix: Record<Level, string> = {
    workspace: "ws",
    channel: "ch",
    member: "mem",
    invite: "inv",
    webhook: "whk",
    outboundWebhook: "owh",
    room: "room",
    conversation: "dm",
    token: "tok",
    device: "dev",
    attachment: "att",
    message: "msg",
  };
  const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  const random = [...randomBytes(26)].map((byte) => alphabet[byte % 32]).join("");
  return { ids: { ...target.ids, [level]: `${prefix[level]}_${random}` } };
}

/** Identifying data of every record hidden from the caller: none of it may appear in an answer. */
function hiddenSecrets(caller: Caller, chain: Link[], target: Target): string[] {
  const fromWorld = worldSecrets()
    .filter(({ link }) => !link.visibleTo(caller))
    .flatMap(({ values }) => values);
  const fromTarget = chain
    .filter((link) => !link.visibleTo(caller))
    .flatMap((link) => [
      ...(target.secrets?.[link.level] ?? []),
      ...(target.ids[link.level] ? [target.ids[link.level]!] : []),
    ]);
  return [...new Set([...fromWorld, ...fromTarget])];
}

function expectNoLeak(answer: Answer, secrets: string[], sent: unknown): void {
  // What the caller sent (an id in the path) is theirs already; anything else hidden must not show.
  const sentText = JSON.stringify(sent ?? null);
  const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body ?? null);
  const leaked = secrets.filter((secret) => !sentText.includes(secret) && text.includes(secret));
  expect(leaked, `the answer carries data of records hidden from the caller: ${text.slice(0, 500)}`).toEqual([]);
}

// ---------------------------------------------------------------------------------------------
// Calling a procedure through either door
// ---------------------------------------------------------------------------------------------

/** An answer as the assertions see it: REST status and body, or the RPC outcome in the same terms. */
type Answer = { status: number; code?: string; body: unknown };

const META = new Map(procedureMetas(appRouter).map(({ path, meta }) => [path, meta] as const));
type ProcedureType = "query" | "mutation" | "subscription";
const routerProcedures = appRouter._def.procedures as unknown as Record<string, { _def: { type: ProcedureType } }>;
const procedureType = (path: string): ProcedureType => routerProcedures[path]!._def.type;

type RpcProcedure = {
  query(input: unknown): Promise<unknown>;
  mutate(input: unknown): Promise<unknown>;
  subscribe(
    input: unknown,
    handlers: { onStarted(): void; onData(value: unknown): void; onError(error: unknown): void },
  ): { unsubscribe(): void };
};

const clients = new Map<string, ChatClient>();
function clientFor(token: string | undefined, subscriptions: "websocket" | "sse" = "websocket"): ChatClient {
  const key = `${subscriptions}:${token ?? ""}`;
  let client = clients.get(key);
  if (!client) {
    client = createChatClient({
      url: ctx.server.url,
      ...(token && { token }),
      ...(subscriptions === "sse" ? { subscriptions: { sse: { EventSource } } } : { webSocket: { WebSocket } }),
    });
    clients.set(key, client);
  }
  return client;
}

function rpcProcedure(client: ChatClient, path: string): RpcProcedure {
  const [namespace, name] = path.split(".") as [string, string];
  return (client as unknown as Record<string, Record<string, RpcProcedure>>)[namespace]![name]!;
}

function rpcFailure(error: unknown): Answer {
  if (!(error instanceof TRPCClientError)) return { status: -1, body: String(error) };
  const data = error.data as { httpStatus?: number; code?: string } | undefined;
  return { status: data?.httpStatus ?? -1, code: data?.code, body: { message: error.message, data } };
}

/**
 * Subscribes and unsubscribes at the first sign of the answer. Over WebSocket "started" comes
 * after the resolver accepted the subscription; over SSE the stream opens ("connected") first
 * and a refusal follows as an error event, so there a subscription counts as accepted once
 * `graceMs` passed after the start without an error.
 */
function subscribeOnce(procedure: RpcProcedure, input: unknown, graceMs: number): Promise<Answer> {
  return new Promise((resolve) => {
    let subscription: { unsubscribe(): void } | undefined;
    let answer: Answer | undefined;
    const settle = (value: Answer) => {
      if (answer) return;
      answer = value;
      clearTimeout(timer);
      // Unsubscribing from inside a handler: after the subscribe call has returned.
      setImmediate(() => subscription?.unsubscribe());
      resolve(value);
    };
    const timer = setTimeout(() => settle({ status: -1, body: "neither started nor refused within 10 s" }), 10_000);
    subscription = procedure.subscribe(input, {
      onStarted: () => {
        if (graceMs === 0) settle({ status: 200, body: "started" });
        else setTimeout(() => settle({ status: 200, body: "started" }), graceMs);
      },
      onData: () => {},
      onError: (error) => settle(rpcFailure(error)),
    });
  });
}

async function rpcCall(path: string, input: unknown, token: string | undefined, door: Door): Promise<Answer> {
  const procedure = rpcProcedure(clientFor(token, door === "sse" ? "sse" : "websocket"), path);
  const type = procedureType(path);
  if (type === "subscription") return subscribeOnce(procedure, input, door === "sse" ? SSE_GRACE_MS : 0);
  try {
    const result = type === "query" ? await procedure.query(input) : await procedure.mutate(input);
    return { status: 200, body: result };
  } catch (error) {
    return rpcFailure(error);
  }
}

async function restCall(path: string, input: unknown, token: string | undefined): Promise<Answer> {
  const openapi = META.get(path)?.openapi;
  if (!openapi) throw new Error(`${path} has no REST path`);
  const fields: Record<string, unknown> =
    input && typeof input === "object" ? { ...(input as Record<string, unknown>) } : {};
  const url = openapi.path.replace(/\{(\w+)\}/g, (_match, name: string) => {
    const value = fields[name];
    delete fields[name];
    return encodeURIComponent(String(value));
  });
  let response: ApiResponse;
  if (openapi.method === "GET" || openapi.method === "DELETE") {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) query.set(name, String(value));
    const search = query.toString();
    response = await ctx.api.call(openapi.method, search ? `${url}?${search}` : url, { token });
  } else {
    response = await ctx.api.call(openapi.method, url, { token, body: input === undefined ? undefined : fields });
  }
  return { status: response.status, body: response.body };
}

const callThrough = (door: Door, path: string, input: unknown, token: string | undefined) =>
  door === "rest" ? restCall(path, input, token) : rpcCall(path, input, token, door);

// ---------------------------------------------------------------------------------------------
// Asserting one case
// ---------------------------------------------------------------------------------------------

const UNAUTHENTICATED_BODY = { message: "Unauthenticated." };
const SSE_GRACE_MS = 500;

function expectAnswer(
  door: Door,
  answer: Answer,
  expectation: Exclude<Expectation, { kind: "hidden" }>,
  successStatus: number,
  isSubscription: boolean,
): void {
  const shown = JSON.stringify(answer).slice(0, 600);
  switch (expectation.kind) {
    case "unauthenticated":
      if (door === "rest")
        expect({ status: answer.status, body: answer.body }, shown).toEqual({
          status: 401,
          body: UNAUTHENTICATED_BODY,
        });
      else expect({ status: answer.status, code: answer.code }, shown).toEqual({ status: 401, code: "UNAUTHORIZED" });
      return;
    case "forbidden":
      if (door === "rest") {
        expect(answer.status, shown).toBe(403);
        expect(answer.body, shown).toEqual({ message: expect.any(String) });
      } else expect({ status: answer.status, code: answer.code }, shown).toEqual({ status: 403, code: "FORBIDDEN" });
      return;
    case "allowed": {
      const statuses = expectation.statuses ?? [successStatus];
      const succeeds = statuses.every((status) => status < 300);
      if (door === "rest") expect(statuses, shown).toContain(answer.status);
      else if (succeeds) {
        expect(answer.status, shown).toBe(200);
        if (isSubscription) expect(answer.body, shown).toBe("started");
      } else expect(statuses, shown).toContain(answer.status);
      return;
    }
  }
}

type Case = {
  path: ProcedurePath;
  variant: Variant<unknown>;
  caller: Caller;
  doors: Door[];
  expectation: Expectation;
  successStatus: number;
};

async function runCase(c: Case, door: Door): Promise<void> {
  const x: CallContext = { caller: c.caller, door };
  const target = c.variant.target ? await c.variant.target(x) : { ids: {} };
  const input = c.variant.input(target, x);
  const token =
    c.caller === "anonymous"
      ? undefined
      : c.variant.credential
        ? await c.variant.credential(x)
        : w.users[c.caller].token;
  const answer = await callThrough(door, c.path, input, token);
  expectNoLeak(answer, hiddenSecrets(c.caller, c.variant.chain ?? [], target), input);

  const isSubscription = procedureType(c.path) === "subscription";
  if (c.expectation.kind === "hidden") {
    // The 404 rule: the very answer of the same call naming a record that does not exist.
    const ghost = await callThrough(door, c.path, c.variant.input(ghostOf(target, c.expectation.link.level), x), token);
    expect(ghost.status, `the call naming a missing record: ${JSON.stringify(ghost)}`).toBe(
      c.expectation.link.missingStatus ?? 404,
    );
    expect(answer, `${c.caller} must not tell ${c.expectation.link.what} from a missing one`).toEqual(ghost);
    return;
  }
  expectAnswer(door, answer, c.expectation, c.successStatus, isSubscription);
  if (c.expectation.kind === "allowed" && c.variant.check && !isSubscription) c.variant.check(answer.body, c.caller);
}

function buildCases(): Case[] {
  const cases: Case[] = [];
  for (const [path, variants] of Object.entries(WALK) as [ProcedurePath, Variant<unknown>[]][]) {
    const meta: ProcedureMeta | undefined = META.get(path);
    // Procedures the router no longer has are reported by the coverage test, not walked.
    if (!meta) continue;
    const doors: Door[] =
      procedureType(path) === "subscription" ? ["rpc", "sse"] : meta.openapi ? ["rpc", "rest"] : ["rpc"];
    for (const variant of variants) {
      for (const caller of CALLERS) {
        cases.push({
          path,
          variant,
          caller,
          doors,
          expectation: expectationFor(variant, caller),
          successStatus: meta.successStatus ?? 200,
        });
      }
    }
  }
  return cases;
}

const CASES = buildCases();
const PLAIN_CASES = PLAIN_ROUTES.flatMap((route) =>
  CALLERS.map((caller) => ({ route, caller, expectation: expectationFor(route, caller) })),
);

// ---------------------------------------------------------------------------------------------
// The fixture world, through the public API
// ---------------------------------------------------------------------------------------------

type FileRef = { id: string; filename: string; content: string };
type World = {
  users: Record<Person, RegisteredUser>;
  workspace: { id: string; name: string; slug: string };
  joinInviteToken: string;
  invite: { id: string; token: string };
  publicChannel: { id: string };
  general: { id: string };
  privateChannel: { id: string; name: string; slug: string };
  publicContent: string;
  secretContents: string[];
  privateMessageIds: string[];
  conversation: { id: string; content: string; messageId: string };
  otherConversation: { id: string; content: string };
  /** An inbound webhook of the workspace (its secret is for owners and admins). */
  bot: { id: string; secret: string };
  token: { id: string; name: string };
  files: { channel: FileRef; direct: FileRef; staged: FileRef };
  lobby: { id: string; inviteToken: string };
  ownerMemberId: string;
  foreign: {
    id: string;
    name: string;
    slug: string;
    channel: { id: string; name: string; slug: string };
    content: string;
    memberId: string;
    messageId: string;
  };
};

/** Identifying data of the world's records, by who may see them. */
function worldSecrets(): { link: Link; values: string[] }[] {
  return [
    { link: R.workspace, values: [w.workspace.id, w.workspace.name, w.workspace.slug] },
    {
      link: R.privateChannel,
      values: [
        w.privateChannel.id,
        w.privateChannel.name,
        w.privateChannel.slug,
        ...w.secretContents,
        ...w.privateMessageIds,
        w.files.channel.id,
        w.files.channel.filename,
        w.files.channel.content,
      ],
    },
    { link: R.invite, values: [w.invite.id, w.invite.token] },
    {
      link: R.conversation,
      values: [
        w.conversation.id,
        w.conversation.content,
        w.conversation.messageId,
        w.files.direct.id,
        w.files.direct.filename,
        w.files.direct.content,
      ],
    },
    { link: R.otherConversation, values: [w.otherConversation.id, w.otherConversation.content] },
    { link: { level: "webhook", what: "an inbound webhook's secret", visibleTo: manages }, values: [w.bot.secret] },
    { link: R.token, values: [w.token.id, w.token.name] },
    { link: R.stagedFile, values: [w.files.staged.id, w.files.staged.filename, w.files.staged.content] },
    {
      link: R.foreignChannel,
      values: [
        w.foreign.id,
        w.foreign.name,
        w.foreign.slug,
        w.foreign.channel.id,
        w.foreign.channel.name,
        w.foreign.channel.slug,
        w.foreign.content,
        w.foreign.memberId,
        w.foreign.messageId,
      ],
    },
  ];
}

function ok<T = any>(response: ApiResponse<T>, status: number, what: string): T {
  if (response.status !== status) {
    throw new Error(`${what}: expected ${status}, got ${response.status} ${JSON.stringify(response.body)}`);
  }
  return response.body;
}

async function upload(token: string | undefined, filename: string, content: string): Promise<ApiResponse> {
  const form = new FormData();
  form.append("file", new Blob([content], { type: "text/plain" }), filename);
  return ctx.api.post("/api/v1/files", form, { token });
}

async function uploadFile(user: RegisteredUser, label: string): Promise<FileRef> {
  const filename = `${label}-${hex()}.txt`;
  const content = `contents of ${filename} ${hex()}`;
  const body = ok(await upload(user.token, filename, content), 201, "upload");
  return { id: body.data.id, filename, content };
}

async function createChannel(visibility: "public" | "private", extra: Person[] = []) {
  const tag = hex();
  const owner = w.users.owner;
  const body = ok(
    await ctx.api.post(
      `/api/v1/workspaces/${w.workspace.id}/channels`,
      { name: `${visibility === "private" ? "Hush" : "Open"} ${tag}`, slug: `${visibility}-${tag}`, visibility },
      { token: owner.token },
    ),
    201,
    "channel create",
  );
  const channel = body.data as { id: string; name: string; slug: string };
  const kindMembers = visibility === "private" ? IN_PRIVATE_CHANNEL : IN_PUBLIC_CHANNEL;
  const members: Person[] = [...kindMembers.filter((caller): caller is SignedIn => caller !== "anonymous"), ...extra];
  for (const person of members) {
    if (person === "owner") continue;
    ok(
      await ctx.api.post(
        `/api/v1/workspaces/${w.workspace.id}/channels/${channel.id}/members`,
        { user_id: w.users[person].id },
        { token: owner.token },
      ),
      201,
      "channel member add",
    );
  }
  return channel;
}

async function createInvite(
  workspaceId: string,
  by: RegisteredUser = w.users.owner,
): Promise<{ id: string; token: string }> {
  const body = ok(
    await ctx.api.post(`/api/v1/workspaces/${workspaceId}/invites`, {}, { token: by.token }),
    201,
    "invite create",
  );
  return body.data;
}

/** A fresh webhook of the fixture workspace; its secrets are secret from everyone but managers. */
async function freshWebhook(): Promise<Target> {
  const body = ok(
    await ctx.api.post(
      `/api/v1/workspaces/${w.workspace.id}/webhooks`,
      { name: `Hook ${hex()}` },
      { token: w.users.owner.token },
    ),
    201,
    "webhook create",
  );
  return {
    ids: { workspace: w.workspace.id, webhook: body.data.id },
    secrets: { webhook: [body.data.secret, body.data.signing_secret] },
  };
}

/** A fresh temporary room of ROOM_OWNER that `other` joined; its name is secret from everyone else. */
async function freshRoom(): Promise<Target> {
  const name = `Walk room ${hex()}`;
  const body = ok(
    await ctx.api.post("/api/v1/external/rooms", { name }, { token: w.users[ROOM_OWNER].token }),
    201,
    "room create",
  );
  ok(
    await ctx.api.post(`/api/v1/external/rooms/${body.data.room_id}/join`, {}, { token: w.users.other.token }),
    200,
    "room join",
  );
  return { ids: { room: body.data.room_id }, secrets: { room: [name] } };
}

/** A closed port: a test send to it fails at once (and is answered 200 with that result). */
const CLOSED_URL = "http://127.0.0.1:9/hook";

/** A fresh outbound webhook of the fixture workspace; its secret is secret from everyone but managers. */
async function freshOutboundWebhook(): Promise<Target> {
  const body = ok(
    await ctx.api.post(
      `/api/v1/workspaces/${w.workspace.id}/outbound-webhooks`,
      { url: CLOSED_URL, events: ["message.created"] },
      { token: w.users.owner.token },
    ),
    201,
    "outbound webhook create",
  );
  return {
    ids: { workspace: w.workspace.id, outboundWebhook: body.data.id },
    secrets: { outboundWebhook: [body.data.secret] },
  };
}

async function createLobbyInvite(): Promise<string> {
  return (await createInvite(w.lobby.id)).token;
}

async function createPersonalToken(user: RegisteredUser, name: string) {
  const body = ok(
    await ctx.api.post("/api/v1/tokens", { name, abilities: ["read"] }, { token: user.token }),
    201,
    "token create",
  );
  return { id: body.data.id as string, name, plaintext: body.access_token as string };
}

async function throwawayToken(x: CallContext): Promise<string | undefined> {
  if (x.caller === "anonymous") return undefined;
  return (await createPersonalToken(w.users[x.caller], `throwaway-${hex()}`)).plaintext;
}

async function acceptInvite(user: RegisteredUser, token: string): Promise<void> {
  ok(await ctx.api.post(`/api/v1/invites/${token}/accept`, undefined, { token: user.token }), 200, "invite accept");
}

async function memberIdOf(userId: number, workspaceId = w.workspace.id, by = w.users.owner): Promise<string> {
  const body = ok(
    await ctx.api.get(`/api/v1/workspaces/${workspaceId}/members`, { token: by.token }),
    200,
    "member list",
  );
  const member = (body.data as { id: string; user_id: number }[]).find((entry) => entry.user_id === userId);
  if (!member) throw new Error(`user ${userId} is not a member`);
  return member.id;
}

/** A new plain member of the workspace, for a call that changes or removes them. */
async function freshMemberTarget(): Promise<Target> {
  const user = await registerUser(ctx.api, { name: "Walk Fresh Member" });
  await acceptInvite(user, w.joinInviteToken);
  return { ids: { workspace: w.workspace.id, member: await memberIdOf(user.id) } };
}

async function postMessage(user: RegisteredUser, path: string, body: Record<string, unknown>): Promise<string> {
  return ok(await ctx.api.post(path, body, { token: user.token }), 201, `post ${path}`).data.id;
}

/** A message by `author` at a place's messages path (a bot's through the fixture webhook, into the target's channel). */
async function writeMessage(author: Author, target: Target, path: string): Promise<{ id: string; content: string }> {
  const content = `walk message ${hex()}`;
  if (author !== "bot") return { id: await postMessage(w.users[author], path, { content }), content };
  const body = ok(
    await ctx.api.post(
      `/webhooks/${w.bot.id}/messages`,
      { content, channel_id: idOf(target, "channel") },
      { headers: { "X-Service-Webhook-Secret": w.bot.secret } },
    ),
    201,
    "bot post",
  );
  return { id: body.data.id as string, content };
}

async function addReaction(user: Person, messagePath: string): Promise<void> {
  ok(
    await ctx.api.put(`${messagePath}/reactions/${encodeURIComponent(REACTION)}`, undefined, {
      token: w.users[user].token,
    }),
    200,
    "react",
  );
}

async function buildWorld(): Promise<World> {
  const api = ctx.api;
  const tag = hex();
  const entries = await Promise.all(
    PEOPLE.map(async (person) => [person, await registerUser(api, { name: `Walk ${person}` })] as const),
  );
  const users = Object.fromEntries(entries) as Record<Person, RegisteredUser>;
  const { owner, member, other } = users;

  const workspaceName = `Hidden Workspace ${tag}`;
  const workspace = ok(
    await api.post("/api/v1/workspaces", { name: workspaceName, slug: `hidden-ws-${tag}` }, { token: owner.token }),
    201,
    "workspace create",
  ).data;
  const lobbyWorkspace = ok(
    await api.post("/api/v1/workspaces", { name: `Lobby ${tag}` }, { token: owner.token }),
    201,
    "lobby create",
  ).data;
  w = {
    users,
    workspace: { id: workspace.id, name: workspace.name, slug: workspace.slug },
    lobby: { id: lobbyWorkspace.id, inviteToken: "" },
  } as World;
  w.lobby.inviteToken = await createLobbyInvite();
  w.joinInviteToken = (await createInvite(workspace.id)).token;
  await Promise.all(
    (["admin", "member", "outsider", "other", "bystander"] as const).map((person) =>
      acceptInvite(users[person], w.joinInviteToken),
    ),
  );
  ok(
    await api.put(
      `/api/v1/workspaces/${workspace.id}/members/${await memberIdOf(users.admin.id)}`,
      { role: "admin" },
      { token: owner.token },
    ),
    200,
    "promote admin",
  );
  w.invite = await createInvite(workspace.id);
  w.ownerMemberId = await memberIdOf(owner.id);

  // Another workspace, with a channel and a message, that none of the callers is in.
  const foreigner = users.foreigner;
  const foreign = ok(
    await api.post(
      "/api/v1/workspaces",
      { name: `Abroad Corp ${tag}`, slug: `abroad-${tag}` },
      { token: foreigner.token },
    ),
    201,
    "foreign workspace create",
  ).data;
  const foreignChannel = ok(
    await api.post(
      `/api/v1/workspaces/${foreign.id}/channels`,
      { name: `Abroad Plans ${tag}`, slug: `abroad-plans-${tag}` },
      { token: foreigner.token },
    ),
    201,
    "foreign channel create",
  ).data;
  w.foreign = {
    id: foreign.id,
    name: foreign.name,
    slug: foreign.slug,
    channel: { id: foreignChannel.id, name: foreignChannel.name, slug: foreignChannel.slug },
    content: `abroad secret ${hex()}`,
    memberId: await memberIdOf(foreigner.id, foreign.id, foreigner),
    messageId: "",
  };
  w.foreign.messageId = await postMessage(
    foreigner,
    `/api/v1/workspaces/${foreign.id}/channels/${foreignChannel.id}/messages`,
    { content: w.foreign.content },
  );

  w.publicChannel = await createChannel("public");
  const channelList = ok(
    await api.get(`/api/v1/workspaces/${workspace.id}/channels`, { token: owner.token }),
    200,
    "channel list",
  ).data as { id: string; slug: string }[];
  w.general = { id: channelList.find((channel) => channel.slug === "general")!.id };
  const privateChannel = ok(
    await api.post(
      `/api/v1/workspaces/${workspace.id}/channels`,
      { name: `Secret Plans ${tag}`, slug: `secret-plans-${tag}`, visibility: "private" },
      { token: owner.token },
    ),
    201,
    "private channel create",
  ).data;
  w.privateChannel = { id: privateChannel.id, name: privateChannel.name, slug: privateChannel.slug };
  ok(
    await api.post(
      `/api/v1/workspaces/${workspace.id}/channels/${privateChannel.id}/members`,
      { user_id: member.id },
      { token: owner.token },
    ),
    201,
    "private channel member add",
  );

  const channelMessages = (id: string) => `/api/v1/workspaces/${workspace.id}/channels/${id}/messages`;
  w.publicContent = `public hello ${tag}`;
  await postMessage(owner, channelMessages(w.publicChannel.id), { content: w.publicContent });
  w.secretContents = [`secret plan ${hex()}`, `another secret ${hex()}`];
  w.files = {
    channel: await uploadFile(member, "plans"),
    direct: await uploadFile(member, "letter"),
    staged: await uploadFile(member, "draft"),
  };
  w.privateMessageIds = [
    await postMessage(member, channelMessages(privateChannel.id), {
      content: w.secretContents[0],
      attachment_ids: [w.files.channel.id],
    }),
    await postMessage(owner, channelMessages(privateChannel.id), { content: w.secretContents[1] }),
  ];

  const conversation = ok(
    await api.post("/api/v1/direct-conversations", { participant_user_id: owner.id }, { token: member.token }),
    201,
    "conversation open",
  ).data;
  w.conversation = { id: conversation.id, content: `dm secret ${hex()}`, messageId: "" };
  w.conversation.messageId = await postMessage(member, `/api/v1/direct-conversations/${conversation.id}/messages`, {
    content: w.conversation.content,
    attachment_ids: [w.files.direct.id],
  });
  const otherConversation = ok(
    await api.post("/api/v1/direct-conversations", { participant_user_id: member.id }, { token: other.token }),
    201,
    "other conversation open",
  ).data;
  w.otherConversation = { id: otherConversation.id, content: `other dm ${hex()}` };
  await postMessage(other, `/api/v1/direct-conversations/${otherConversation.id}/messages`, {
    content: w.otherConversation.content,
  });

  // The bot of the fresh bot messages in #general.
  const bot = ok(
    await api.post(`/api/v1/workspaces/${workspace.id}/webhooks`, { name: `Walk bot ${tag}` }, { token: owner.token }),
    201,
    "webhook create",
  ).data;
  w.bot = { id: bot.id, secret: bot.secret };

  const token = await createPersonalToken(member, `pat-${tag}`);
  w.token = { id: token.id, name: token.name };
  // The search index follows the event log: the world's messages are searchable once it has.
  await ctx.server.app.deps.relay.flush();
  return w;
}

beforeAll(async () => {
  await buildWorld();
});

afterAll(() => {
  for (const client of clients.values()) client.close();
  clients.clear();
});

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

describe("the walk covers the router", () => {
  it("has an entry for every procedure of the router, and none for a procedure it lacks", () => {
    const routerPaths = Object.keys(appRouter._def.procedures).sort();
    const walked = Object.keys(WALK).sort();
    expect(routerPaths.length).toBeGreaterThan(0);
    expect(
      routerPaths.filter((path) => !walked.includes(path)),
      "procedures of the router without an entry in WALK",
    ).toEqual([]);
    expect(
      walked.filter((path) => !routerPaths.includes(path)),
      "entries of WALK for procedures the router lacks",
    ).toEqual([]);
    for (const path of walked) expect(WALK[path as ProcedurePath].length, path).toBeGreaterThan(0);
  });

  it("calls public exactly the procedures whose REST path is unprotected", () => {
    for (const [path, variants] of Object.entries(WALK) as [ProcedurePath, Variant<unknown>[]][]) {
      const openapi = META.get(path)?.openapi;
      if (!openapi) continue;
      const isPublic = variants.every((variant) => variant.public === true);
      expect({ path, public: openapi.protect === false }).toEqual({ path, public: isPublic });
    }
  });
});

describe(`authorization walk: ${CASES.length} procedure × caller cases, ${PLAIN_CASES.length} on the file routes`, () => {
  for (const c of CASES) {
    const name = `${c.path}${c.variant.label ? ` [${c.variant.label}]` : ""}: ${c.caller} → ${describeExpectation(
      c.expectation,
      c.successStatus,
    )}`;
    // Subscriptions change nothing: their (slower) SSE cases run side by side.
    for (const door of c.doors) (door === "sse" ? it.concurrent : it)(`${name} (${door})`, () => runCase(c, door));
  }

  for (const { route, caller, expectation } of PLAIN_CASES) {
    it(`${route.name}: ${caller} → ${describeExpectation(expectation, route.allowed)} (rest)`, async () => {
      const target = route.target();
      const token = caller === "anonymous" ? undefined : w.users[caller].token;
      const response = await route.call(target, token);
      const answer: Answer = { status: response.status, body: response.body };
      expectNoLeak(answer, hiddenSecrets(caller, route.chain, target), target.ids);
      if (expectation.kind === "hidden") {
        const ghost = await route.call(ghostOf(target, expectation.link.level), token);
        expect(ghost.status).toBe(expectation.link.missingStatus ?? 404);
        expect(answer, `${caller} must not tell ${expectation.link.what} from a missing one`).toEqual({
          status: ghost.status,
          body: ghost.body,
        });
        return;
      }
      expectAnswer("rest", answer, expectation, route.allowed, false);
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Live streams: beyond the refusal at subscribe time, what an accepted subscription delivers
// must not carry records hidden from its subscriber either.
// ---------------------------------------------------------------------------------------------

type LiveFeed = { caller: SignedIn; what: string; received: unknown[]; errors: unknown[] };
/** The newest stored position a feed has seen (ephemeral events, typing, carry no id). */
const newestPosition = (feed: LiveFeed) =>
  Math.max(0, ...feed.received.map((value) => Number((value as { id?: string }).id) || 0));

describe("live streams carry nothing the subscriber may not see", () => {
  const SIGNED_IN = CALLERS.filter((caller): caller is SignedIn => caller !== "anonymous");
  const feeds: LiveFeed[] = [];
  const subscriptions: { unsubscribe(): void }[] = [];
  /** What the script below makes, with who may see it. */
  const live: { link: Link; values: string[] }[] = [];
  const contents = { privateChannel: "", conversation: "", otherConversation: "" };

  function follow(caller: SignedIn, what: string, path: ProcedurePath, input: unknown): LiveFeed {
    const feed: LiveFeed = { caller, what, received: [], errors: [] };
    subscriptions.push(
      rpcProcedure(clientFor(w.users[caller].token), path).subscribe(input, {
        onStarted: () => {},
        onData: (value) => feed.received.push(value),
        onError: (error) => feed.errors.push(error),
      }),
    );
    feeds.push(feed);
    return feed;
  }

  const typeOf = (value: unknown) => (value as { data?: { type?: string } }).data?.type;
  const count = (feed: LiveFeed, type: string) => feed.received.filter((value) => typeOf(value) === type).length;

  /** Pokes until every feed shows one more event of `type` than it had: all of them are attached. */
  async function pokeUntilSeen(list: LiveFeed[], type: string, poke: () => Promise<unknown>, what: string) {
    const before = new Map(list.map((feed) => [feed, count(feed, type)]));
    let attempts = 0;
    await until(
      async () => {
        const failed = list.find((feed) => feed.errors.length > 0);
        if (failed) throw new Error(`${failed.caller}'s ${failed.what} failed: ${String(failed.errors[0])}`);
        if (list.every((feed) => count(feed, type) > before.get(feed)!)) return true;
        if (attempts++ % 8 === 0) await poke();
        return undefined;
      },
      what,
      20_000,
    );
  }

  let renames = 0;
  const rename = (caller: SignedIn) =>
    ctx.api.patch("/api/v1/me", { name: `Walk ${caller} ${++renames}` }, { token: w.users[caller].token });
  const typeInPublicChannel = () =>
    rpcProcedure(clientFor(w.users.owner.token), "messages.typing").mutate({
      workspace_id: w.workspace.id,
      channel_id: w.publicChannel.id,
    });

  async function attachAll(userFeeds: LiveFeed[], channelFeeds: LiveFeed[], what: string) {
    await Promise.all([
      ...userFeeds.map((feed) =>
        pokeUntilSeen([feed], "user.updated", () => rename(feed.caller), `${feed.caller}'s user stream: ${what}`),
      ),
      pokeUntilSeen(channelFeeds, "typing", typeInPublicChannel, `the public channel's streams: ${what}`),
    ]);
  }

  beforeAll(async () => {
    const userFeeds = SIGNED_IN.map((caller) => follow(caller, "events.onUser", "events.onUser", undefined));
    const channelFeeds = SIGNED_IN.filter(inWorkspace).map((caller) =>
      follow(caller, "messages.onChannel (public channel)", "messages.onChannel", {
        workspace_id: w.workspace.id,
        channel_id: w.publicChannel.id,
      }),
    );
    await attachAll(userFeeds, channelFeeds, "attached");
    // Where each stream stood before the script: resumed from there afterwards, it replays the script.
    // (Positions are global: the newest any stream has shown.)
    const resumeFrom = String(Math.max(...[...userFeeds, ...channelFeeds].map(newestPosition)));

    // The script: private things happen around the subscribers.
    const { owner, member, other, bystander, foreigner } = w.users;
    const tag = hex();
    const workspacePath = `/api/v1/workspaces/${w.workspace.id}`;
    const hush = ok(
      await ctx.api.post(
        `${workspacePath}/channels`,
        { name: `Hush live ${tag}`, slug: `hush-live-${tag}`, visibility: "private" },
        { token: owner.token },
      ),
      201,
      "private channel create",
    ).data as { id: string; name: string; slug: string };
    const hushPath = `${workspacePath}/channels/${hush.id}`;
    for (const user of [member, bystander]) {
      ok(await ctx.api.post(`${hushPath}/members`, { user_id: user.id }, { token: owner.token }), 201, "add");
    }
    ok(await ctx.api.delete(`${hushPath}/members/${bystander.id}`, { token: owner.token }), 204, "remove");
    const renamed = { name: `Hush renamed ${tag}`, slug: `hush-renamed-${tag}` };
    ok(await ctx.api.put(hushPath, renamed, { token: owner.token }), 200, "private channel update");
    const hushContent = `live hush secret ${hex()}`;
    await postMessage(member, `${hushPath}/messages`, { content: hushContent });
    contents.privateChannel = `live private secret ${hex()}`;
    await postMessage(member, `${workspacePath}/channels/${w.privateChannel.id}/messages`, {
      content: contents.privateChannel,
    });
    contents.conversation = `live dm secret ${hex()}`;
    await postMessage(member, `/api/v1/direct-conversations/${w.conversation.id}/messages`, {
      content: contents.conversation,
    });
    contents.otherConversation = `live other dm ${hex()}`;
    await postMessage(other, `/api/v1/direct-conversations/${w.otherConversation.id}/messages`, {
      content: contents.otherConversation,
    });
    // Typing is ephemeral, and for those who may see the channel or conversation only.
    const typing = rpcProcedure(clientFor(member.token), "messages.typing");
    await typing.mutate({ workspace_id: w.workspace.id, channel_id: w.privateChannel.id });
    await typing.mutate({ workspace_id: w.workspace.id, channel_id: hush.id });
    await typing.mutate({ conversation_id: w.conversation.id });
    const foreignContent = `live abroad secret ${hex()}`;
    await postMessage(foreigner, `/api/v1/workspaces/${w.foreign.id}/channels/${w.foreign.channel.id}/messages`, {
      content: foreignContent,
    });
    ok(await ctx.api.delete(hushPath, { token: owner.token }), 204, "private channel delete");

    live.push(
      { link: R.privateChannel, values: [hush.id, hush.name, hush.slug, renamed.name, renamed.slug, hushContent] },
      { link: R.privateChannel, values: [contents.privateChannel] },
      { link: R.conversation, values: [contents.conversation] },
      { link: R.otherConversation, values: [contents.otherConversation] },
      { link: R.foreignChannel, values: [foreignContent] },
    );

    // A last event on every stream: what came before it has been delivered.
    await attachAll(userFeeds, channelFeeds, "the script delivered");

    // Resumed subscriptions replay what was stored since: the replay is filtered the same way.
    const resumedUserFeeds = userFeeds.map((feed) =>
      follow(feed.caller, "events.onUser (resumed)", "events.onUser", { lastEventId: resumeFrom }),
    );
    const resumedChannelFeeds = channelFeeds.map((feed) =>
      follow(feed.caller, "messages.onChannel (public channel, resumed)", "messages.onChannel", {
        workspace_id: w.workspace.id,
        channel_id: w.publicChannel.id,
        lastEventId: resumeFrom,
      }),
    );
    await attachAll(resumedUserFeeds, resumedChannelFeeds, "the replay delivered");
  }, 90_000);

  afterAll(() => {
    for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
  });

  for (const caller of SIGNED_IN) {
    it(`${caller}: no event on their streams carries a record hidden from them`, () => {
      const mine = feeds.filter((feed) => feed.caller === caller);
      expect(mine.length).toBeGreaterThan(0);
      const secrets = [...worldSecrets(), ...live]
        .filter(({ link }) => !link.visibleTo(caller))
        .flatMap(({ values }) => values);
      for (const feed of mine) {
        const text = JSON.stringify(feed.received);
        const leaked = secrets.filter((secret) => text.includes(secret));
        const events = feed.received.filter((value) => leaked.some((secret) => JSON.stringify(value).includes(secret)));
        expect(leaked, `${feed.what} delivered: ${JSON.stringify(events).slice(0, 1500)}`).toEqual([]);
      }
    });
  }

  // The stream is not silent: what the subscriber may see does arrive.
  for (const caller of SIGNED_IN) {
    const expected = [
      ["a message of the private channel", R.privateChannel, () => contents.privateChannel],
      ["a message of the direct conversation", R.conversation, () => contents.conversation],
      ["a message of the other conversation", R.otherConversation, () => contents.otherConversation],
    ] as const;
    const visible = expected.filter(([, link]) => link.visibleTo(caller));
    if (visible.length === 0) continue;
    it(`${caller}: their user stream, live and resumed, delivers ${visible.map(([what]) => what).join(", ")}`, () => {
      for (const kind of ["events.onUser", "events.onUser (resumed)"]) {
        const feed = feeds.find((entry) => entry.caller === caller && entry.what === kind)!;
        const text = JSON.stringify(feed.received);
        for (const [what, , content] of visible) expect(text.includes(content()), `${kind}: ${what}`).toBe(true);
      }
    });
  }
});
