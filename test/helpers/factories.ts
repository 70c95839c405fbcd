// Test data through the public API, with unique e-mails so files and tests never collide.
import { randomBytes } from "node:crypto";
import type { RestClient } from "./api.ts";

export const uniqueEmail = (label = "user") => `${label}-${randomBytes(5).toString("hex")}@example.test`;

export const DEFAULT_PASSWORD = "correct-horse-battery";

export type RegisteredUser = { id: number; name: string; email: string; password: string; token: string };

export async function registerUser(
  api: RestClient,
  overrides: Partial<{
    name: string;
    email: string;
    password: string;
    preferred_language: string;
    device_name: string;
  }> = {},
): Promise<RegisteredUser> {
  const email = overrides.email ?? uniqueEmail();
  const password = overrides.password ?? DEFAULT_PASSWORD;
  const name = overrides.name ?? "Test User";
  const response = await api.post("/api/v1/auth/app/register", {
    name,
    email,
    password,
    password_confirmation: password,
    ...(overrides.preferred_language && { preferred_language: overrides.preferred_language }),
    ...(overrides.device_name && { device_name: overrides.device_name }),
  });
  if (response.status !== 200) throw new Error(`register failed: ${response.status} ${JSON.stringify(response.body)}`);
  return {
    id: response.body.user.id,
    name,
    email: response.body.user.email,
    password,
    token: response.body.access_token,
  };
}

/** A workspace made by `owner` (a unique name), and its #general channel. */
export async function createWorkspaceWithGeneral(
  api: RestClient,
  owner: RegisteredUser,
): Promise<{ workspaceId: string; channelId: string }> {
  const created = await api.post(
    "/api/v1/workspaces",
    { name: `Team ${randomBytes(3).toString("hex")}` },
    { token: owner.token },
  );
  if (created.status !== 201) throw new Error(`workspace: ${created.status} ${JSON.stringify(created.body)}`);
  const workspaceId: string = created.body.data.id;
  const channels = await api.get(`/api/v1/workspaces/${workspaceId}/channels`, { token: owner.token });
  const general = (channels.body.data as { id: string; slug: string }[]).find((channel) => channel.slug === "general");
  if (!general) throw new Error("the new workspace has no #general");
  return { workspaceId, channelId: general.id };
}

/** Uploads a small text file as `user` (`POST /api/v1/files`): the staged attachment's record. */
export async function stageTextFile<Record = { id: string; download_url: string }>(
  serverUrl: string,
  user: RegisteredUser,
  text = "the notes",
  filename = "notes.txt",
): Promise<Record> {
  const form = new FormData();
  form.append("file", new Blob([text], { type: "text/plain" }), filename);
  const uploaded = await fetch(`${serverUrl}/api/v1/files`, {
    method: "POST",
    headers: { Authorization: `Bearer ${user.token}` },
    body: form,
  });
  if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${await uploaded.text()}`);
  return ((await uploaded.json()) as { data: Record }).data;
}
