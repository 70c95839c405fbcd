// docs/live-events.md is true: its Node WebSocket script, its curl commands and its browser
// EventSource snippet are taken from the page as written and run against a real server. Each
// receives a message posted over REST, resumes from a position with the events after it only,
// and the events it prints match the AsyncAPI document's schemas.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { Ajv } from "ajv";
import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorkspaceWithGeneral, registerUser, type RegisteredUser } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";
import { until } from "./helpers/wait.ts";

const ctx = useTestServer();
const root = path.join(import.meta.dirname, "..");

/** The fenced code block that follows `<!-- marker -->` in docs/live-events.md. */
async function docBlock(marker: string): Promise<string> {
  const page = await readFile(path.join(root, "docs/live-events.md"), "utf8");
  const found = new RegExp(`<!-- ${marker} -->\\n\`\`\`\\w*\\n([\\s\\S]*?)\\n\`\`\``).exec(page);
  if (!found) throw new Error(`docs/live-events.md has no block marked ${marker}`);
  return found[1]!;
}

type Event = { id: string; type: string; data: any };
type Run = { child: ChildProcess; stdout: () => string; stderr: () => string; exited: () => number | null };
const runs: Run[] = [];

/** Runs a command in its own process group (so that `sh -c curl …` is stopped whole). */
function run(command: string, args: string[], env: Record<string, string>, cwd = root): Run {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, detached: true });
  let out = "";
  let err = "";
  let code: number | null = null;
  child.stdout!.on("data", (chunk) => (out += chunk));
  child.stderr!.on("data", (chunk) => (err += chunk));
  child.on("exit", (exitCode) => (code = exitCode ?? -1));
  const handle = { child, stdout: () => out, stderr: () => err, exited: () => code };
  runs.push(handle);
  return handle;
}

afterAll(() => {
  for (const { child } of runs) if (child.exitCode === null) process.kill(-child.pid!, "SIGTERM");
});

/** The script's output: one event per line. */
const printedEvents = (output: string): Event[] =>
  output
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Event);

/** The SSE messages curl printed: blocks of `field: value` lines. */
function sseMessages(output: string): { event?: string; data?: string; id?: string }[] {
  return output
    .split(/\n\n+/)
    .filter((block) => block.trim())
    .map((block) => {
      const fields: Record<string, string> = {};
      for (const line of block.split("\n")) {
        const colon = line.indexOf(": ");
        if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 2);
      }
      return fields;
    });
}
const sseEvents = (output: string) =>
  sseMessages(output)
    .filter((message) => message.event === undefined && message.data !== undefined)
    .map((message) => ({ id: message.id, event: JSON.parse(message.data!) as Event }));

const contents = (events: Event[]) =>
  events.filter((event) => event.type === "message.created").map((event) => event.data.message.content as string);

let owner: RegisteredUser;
let workspaceId: string;
let channelId: string;
let scriptDir: string;
let checkEvent: (event: Event) => void;

beforeAll(async () => {
  owner = await registerUser(ctx.api);
  ({ workspaceId, channelId } = await createWorkspaceWithGeneral(ctx.api, owner));
  // Inside node_modules/.cache, so that the script's `import "ws"` finds the project's ws.
  await mkdir(path.join(root, "node_modules/.cache"), { recursive: true });
  scriptDir = await mkdtemp(path.join(root, "node_modules/.cache/live-events-"));
  await writeFile(path.join(scriptDir, "live-events.mjs"), await docBlock("live-events.mjs"));

  const document = (await (await fetch(`${ctx.server.url}/api/v1/asyncapi.json`)).json()) as object;
  const ajv = new Ajv({ strict: false, validateFormats: false });
  ajv.addSchema(document, "asyncapi.json");
  checkEvent = (event) => {
    const name = `${event.type.replace(/(^|[._])(\w)/g, (_all, _sep, letter: string) => letter.toUpperCase())}Event`;
    const validate = ajv.getSchema(`asyncapi.json#/components/schemas/${name}`);
    expect(validate, name).toBeDefined();
    expect(validate!(event), JSON.stringify(validate!.errors)).toBe(true);
  };
});

afterAll(() => scriptDir && rm(scriptDir, { recursive: true, force: true }));

const post = async (content: string, channel = channelId) => {
  const response = await ctx.api.post(
    `/api/v1/workspaces/${workspaceId}/channels/${channel}/messages`,
    { content },
    { token: owner.token },
  );
  expect(response.status).toBe(201);
};

/** Posts `label-1`, `label-2`, … until one of them shows in `seen` (SSE has no "started" signal). */
async function postUntilSeen(label: string, seen: () => string[], channel = channelId): Promise<string> {
  let count = 0;
  return until(
    async () => {
      const arrived = seen().find((content) => content.startsWith(label));
      if (arrived) return arrived;
      await post(`${label}-${++count}`, channel);
      await new Promise((resolve) => setTimeout(resolve, 200));
      return undefined;
    },
    `a message ${label} to arrive`,
    20_000,
  );
}

const script = (args: string[] = [], token = owner.token) =>
  run("node", ["live-events.mjs", ...args], { CHAT_URL: ctx.server.url, TOKEN: token }, scriptDir);
const shell = async (marker: string, env: Record<string, string> = {}) =>
  run("sh", ["-c", await docBlock(marker)], { CHAT_URL: ctx.server.url, TOKEN: owner.token, ...env });

describe("the WebSocket client of docs/live-events.md", () => {
  let firstPosition: string;

  it("prints a message posted over REST, as the AsyncAPI document describes it", async () => {
    const client = script();
    await until(() => (client.stderr().includes("listening") ? true : undefined), "the script to listen");
    await post("over the socket");
    const event = await until(
      () => printedEvents(client.stdout()).find((printed) => printed.type === "message.created"),
      "message.created on the script's output",
    );
    expect(event.data.message.content).toBe("over the socket");
    expect(event).toMatchObject({
      workspace_id: workspaceId,
      channel_id: channelId,
      id: expect.stringMatching(/^\d+$/),
    });
    checkEvent(event);
    firstPosition = event.id;
  });

  it("resumes after the position it is given: the events after it, not the one at it", async () => {
    await post("while away");
    const client = script([firstPosition]);
    const replayed = await until(
      () =>
        contents(printedEvents(client.stdout())).length > 0 ? contents(printedEvents(client.stdout())) : undefined,
      "the replayed message",
    );
    expect(replayed[0]).toBe("while away");
    expect(replayed).not.toContain("over the socket");
  });

  it("stops with the error's code when the resume cannot be exact, or the token is wrong", async () => {
    const resync = script(["999999999"]);
    await until(() => resync.exited() ?? undefined, "the script to exit");
    expect(resync.stderr()).toContain("PRECONDITION_FAILED: That position is not known here.");

    const stranger = script([], "not-a-token");
    await until(() => stranger.exited() ?? undefined, "the script to exit");
    expect(stranger.stderr()).toContain("UNAUTHORIZED");
  });
});

describe("the curl commands of docs/live-events.md", () => {
  let position: { id: string; content: string };

  it("stream a message posted over REST, its position as the SSE id", async () => {
    const curl = await shell("curl-on-user");
    await until(() => (curl.stdout().includes("event: connected") ? true : undefined), "the stream to open");
    const content = await postUntilSeen("sse", () => contents(sseEvents(curl.stdout()).map(({ event }) => event)));
    const { id, event } = sseEvents(curl.stdout()).find((message) => message.event.data?.message?.content === content)!;
    expect(id).toBe(event.id);
    checkEvent(event);
    position = { id: event.id, content };
  });

  it("resume with Last-Event-ID: the events after it, not the one at it", async () => {
    await post("missed by curl");
    const curl = await shell("curl-resume", { LAST_EVENT_ID: position.id });
    const replayed = await until(() => {
      const seen = contents(sseEvents(curl.stdout()).map(({ event }) => event));
      return seen.includes("missed by curl") ? seen : undefined;
    }, "the replayed message");
    expect(replayed).not.toContain(position.content);
  });

  it("follow one channel with an input and the token as a header, until it is deleted", async () => {
    const created = await ctx.api.post(
      `/api/v1/workspaces/${workspaceId}/channels`,
      { name: "short-lived" },
      { token: owner.token },
    );
    expect(created.status).toBe(201);
    const curl = await shell("curl-on-channel", { WORKSPACE_ID: workspaceId, CHANNEL_ID: created.body.data.id });
    const channel = created.body.data.id as string;
    await postUntilSeen("channel", () => contents(sseEvents(curl.stdout()).map(({ event }) => event)), channel);
    const deleted = await ctx.api.delete(`/api/v1/workspaces/${workspaceId}/channels/${created.body.data.id}`, {
      token: owner.token,
    });
    expect(deleted.status).toBe(204);
    // The event that takes access away is the last one; then `event: return` and the stream ends.
    expect(await until(() => curl.exited() ?? undefined, "curl to exit")).toBe(0);
    const messages = sseMessages(curl.stdout());
    expect(messages.at(-1)).toEqual({ event: "return", data: "" });
    expect(JSON.parse(messages.at(-2)!.data!)).toMatchObject({ type: "channel.deleted" });
  });
});

describe("the browser EventSource snippet of docs/live-events.md", () => {
  it("shows a message posted over REST", async () => {
    const base = ctx.server.url;
    // What a page on the server's origin does with a relative URL.
    class PageEventSource extends EventSource {
      constructor(url: string) {
        super(new URL(url, base));
      }
    }
    const shown: Event[] = [];
    const snippet = new Function(
      "EventSource",
      "token",
      "showEvent",
      `${await docBlock("browser-event-source")}\nreturn source;`,
    );
    const source = snippet(PageEventSource, owner.token, (event: Event) => shown.push(event)) as EventSource;
    try {
      await postUntilSeen("page", () => contents(shown));
      checkEvent(shown.find((event) => event.type === "message.created")!);
    } finally {
      source.close();
    }
  });
});
