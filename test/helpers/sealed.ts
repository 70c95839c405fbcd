// Every sealed value the database keeps, read from the service's own list of sealed columns
// (server/services/keys/sealed-values.ts), so a new column is checked without a test edit.
import type { Database } from "../../db/client.ts";
import { SEALED } from "../../server/services/keys/sealed-values.ts";

export async function storedSealedValues(db: Database): Promise<string[]> {
  const values: string[] = [];
  for (const which of Object.values(SEALED)) {
    const rows = await db.select({ value: which.column }).from(which.table);
    values.push(...rows.map((row) => row.value as string));
  }
  return values;
}
