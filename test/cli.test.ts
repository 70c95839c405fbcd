// The admin CLI (`npm run cli -- <command>`) against a running server: with DATABASE_URL it
// runs the command against PostgreSQL itself; with the embedded database it hands the command
// to the running server over loopback (PGlite admits one process). Both paths run here.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { users } from "../db/schema/index.ts";
import { signAdminRequest } from "../server/http/admin-route.ts";
import { registerUser, uniqueEmail } from "./helpers/factories.ts";
import { useTestServer } from "./helpers/server.ts";

const ctx = useTestServer();

const ROOT = fileURLToPath(new URL("..", import.meta.url));

type CliResult = { code: number | null; stdout: string; stderr: string };

/** `npm run cli -- ...args` (tsx server/cli.ts) with the running test server's environment. */
function cli(...args: string[]): Promise<CliResult> {
  // Only what a shell needs, then the server's own variables: nothing of this process's
  // DATABASE_URL or REDIS_URL may point the CLI elsewhere.
  const essentials = Object.fromEntries(
    ["PATH", "HOME", "TMPDIR", "LANG", "SYSTEMROOT"].flatMap((name) =>
      process.env[name] ? [[name, process.env[name]!]] : [],
    ),
  );
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "server/cli.ts", ...args], {
      cwd: ROOT,
      env: { ...essentials, ...ctx.server.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

const login = (email: string, password: string) => ctx.api.post("/api/v1/auth/app/login", { email, password });

async function planOf(email: string) {
  const [row] = await ctx.server.app.deps.db.select({ plan: users.plan }).from(users).where(eq(users.email, email));
  return row?.plan;
}

describe("npm run cli", () => {
  it("prints the usage for help", async () => {
    const result = await cli("help");
    expect(result.code).toBe(0);
    for (const command of ["user:plan", "user:deactivate", "user:activate"]) expect(result.stdout).toContain(command);
  });

  it("user:deactivate blocks sign-in and revokes every token; user:activate allows sign-in again", async () => {
    const user = await registerUser(ctx.api);
    const personal = await ctx.api.post(
      "/api/v1/tokens",
      { name: "script", abilities: ["read"] },
      { token: user.token },
    );
    expect(personal.status).toBe(201);

    const deactivated = await cli("user:deactivate", user.email);
    expect(deactivated.stderr).toBe("");
    expect(deactivated.code).toBe(0);
    expect(deactivated.stdout).toContain(user.email);

    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(401);
    expect((await ctx.api.get("/api/v1/me", { token: personal.body.access_token })).status).toBe(401);
    const refused = await login(user.email, user.password);
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ message: "Account is inactive." });

    const activated = await cli("user:activate", user.email);
    expect(activated.code).toBe(0);
    expect(activated.stdout).toContain(user.email);
    const signedIn = await login(user.email, user.password);
    expect(signedIn.status).toBe(200);
    const me = await ctx.api.get("/api/v1/me", { token: signedIn.body.access_token });
    expect(me.status).toBe(200);
    expect(me.body.is_active).toBe(true);
    // Revoked tokens stay revoked after reactivation.
    expect((await ctx.api.get("/api/v1/me", { token: user.token })).status).toBe(401);
  });

  it("user:plan sets the plan, for an e-mail in any case", async () => {
    const user = await registerUser(ctx.api);
    expect(await planOf(user.email)).toBe("free");

    const result = await cli("user:plan", user.email.toUpperCase(), "personal_pro");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("personal_pro");
    expect(await planOf(user.email)).toBe("personal_pro");

    expect((await cli("user:plan", user.email, "free")).code).toBe(0);
    expect(await planOf(user.email)).toBe("free");
  });

  it("refuses an unknown plan with a message and changes nothing", async () => {
    const user = await registerUser(ctx.api);
    const result = await cli("user:plan", user.email, "enterprise");
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("free");
    expect(result.stderr).toContain("personal_pro");
    expect(await planOf(user.email)).toBe("free");
  });

  it("names an unknown e-mail", async () => {
    const email = uniqueEmail("nobody");
    for (const args of [
      ["user:deactivate", email],
      ["user:activate", email],
      ["user:plan", email, "personal_pro"],
    ]) {
      const result = await cli(...args);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain(email);
    }
  });

  it("refuses a missing e-mail with the usage", async () => {
    const result = await cli("user:deactivate");
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("user:activate");
  });

  it("refuses an unknown command with the usage", async () => {
    const result = await cli("user:delete", "someone@example.test");
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("user:delete");
    for (const command of ["user:plan", "user:deactivate", "user:activate"]) expect(result.stderr).toContain(command);
  });
});

describe("POST /internal/admin-command", () => {
  const body = (email: string) => JSON.stringify({ args: ["user:deactivate", email] });

  async function post(raw: string, headers: Record<string, string>) {
    const response = await fetch(`${ctx.server.url}/internal/admin-command`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: raw,
    });
    return { status: response.status, body: (await response.json()) as unknown };
  }

  it("refuses a request without a valid signature and runs nothing", async () => {
    const user = await registerUser(ctx.api);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const attempts: Record<string, string>[] = [
      {},
      { "X-Admin-Timestamp": timestamp },
      { "X-Admin-Timestamp": timestamp, "X-Admin-Signature": "0".repeat(64) },
      { "X-Admin-Timestamp": timestamp, "X-Admin-Signature": "not-even-hex" },
    ];
    for (const headers of attempts) {
      const response = await post(body(user.email), headers);
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ message: expect.any(String) });
    }
    expect((await login(user.email, user.password)).status).toBe(200);
  });

  it("refuses a signature made with another key or for another body", async () => {
    const { createHmac } = await import("node:crypto");
    const user = await registerUser(ctx.api);
    const timestamp = Math.floor(Date.now() / 1000);
    const wrongKey = createHmac("sha256", "another-key-another-key-another-key")
      .update(`${timestamp}.${body(user.email)}`)
      .digest("hex");
    expect(
      (await post(body(user.email), { "X-Admin-Timestamp": String(timestamp), "X-Admin-Signature": wrongKey })).status,
    ).toBe(401);
    const otherBody = signAdminRequest(ctx.server.app.deps.keys, timestamp, body("someone@example.test"));
    expect(
      (await post(body(user.email), { "X-Admin-Timestamp": String(timestamp), "X-Admin-Signature": otherBody })).status,
    ).toBe(401);
    const stale = timestamp - 10 * 60;
    const staleSignature = signAdminRequest(ctx.server.app.deps.keys, stale, body(user.email));
    expect(
      (await post(body(user.email), { "X-Admin-Timestamp": String(stale), "X-Admin-Signature": staleSignature }))
        .status,
    ).toBe(401);
    expect((await login(user.email, user.password)).status).toBe(200);
  });
});
