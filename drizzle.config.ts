import { defineConfig } from "drizzle-kit";

// Migrations are generated from db/schema with `npm run db:generate` and committed;
// the server applies them on start (db/client.ts).
export default defineConfig({
  dialect: "postgresql",
  schema: "./db/schema/index.ts",
  out: "./db/migrations",
  casing: "snake_case",
});
