// The secrets the database keeps sealed, and what happens to them across an APP_KEY rotation
// (docs/operations.md, "Rotating APP_KEY"). A value opened under an earlier key is sealed again
// under the current one as it is read; `sweepSealedValues` does the same for every row at once
// (`npm run cli -- keys:rotate`) or, at start, only counts. A value that no key opens is kept:
// it works again once APP_KEY_PREVIOUS holds the key that sealed it.
import { and, asc, eq, gt, not, sql } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";
import { setImmediate } from "node:timers/promises";
import { inboundWebhooks, outboundWebhooks, pushDevices } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import type { SealPurpose } from "../../keyring.ts";
import { pushTokenHashes } from "../push/devices.ts";

type SealedColumn = {
  /** Plural words for the log and the CLI: "push device tokens". */
  kind: string;
  purpose: SealPurpose;
  table: PgTable;
  id: PgColumn;
  column: PgColumn;
  /** The row's new values for a value sealed again: the column, and what follows the plaintext. */
  write: (keys: Deps["keys"], sealed: string, plaintext: string) => Record<string, string>;
};

export const SEALED = {
  pushToken: {
    kind: "push device tokens",
    purpose: "push-token",
    table: pushDevices,
    id: pushDevices.id,
    column: pushDevices.tokenSealed,
    // The look-up hash moves to the current key with the token.
    write: (keys, sealed, token) => ({ tokenSealed: sealed, tokenHash: pushTokenHashes(keys, token)[0]! }),
  },
  webhookSecret: {
    kind: "inbound webhook secrets",
    purpose: "webhook-secret",
    table: inboundWebhooks,
    id: inboundWebhooks.id,
    column: inboundWebhooks.secretSealed,
    write: (_keys, sealed) => ({ secretSealed: sealed }),
  },
  webhookSigningSecret: {
    kind: "inbound webhook signing secrets",
    purpose: "webhook-secret",
    table: inboundWebhooks,
    id: inboundWebhooks.id,
    column: inboundWebhooks.signingSecretSealed,
    write: (_keys, sealed) => ({ signingSecretSealed: sealed }),
  },
  outboundWebhookSecret: {
    kind: "outbound webhook secrets",
    purpose: "outbound-webhook-secret",
    table: outboundWebhooks,
    id: outboundWebhooks.id,
    column: outboundWebhooks.secretSealed,
    write: (_keys, sealed) => ({ secretSealed: sealed }),
  },
} satisfies Record<string, SealedColumn>;

type SealedDeps = Pick<Deps, "db" | "keys" | "logger">;

/** Seals `plaintext` under the current key again, unless the row changed meanwhile; false when it did. */
async function reseal(deps: SealedDeps, which: SealedColumn, id: string, old: string, plaintext: string) {
  const updated = await deps.db
    .update(which.table)
    .set(which.write(deps.keys, deps.keys.seal(which.purpose, plaintext), plaintext))
    .where(and(eq(which.id, id), eq(which.column, old)))
    .returning({ id: which.id });
  return updated.length > 0;
}

/**
 * Values opened under the current key, by purpose and sealed form, per keyring: a push device's
 * token is read for every message to its channels, a webhook's secret for every delivery or post,
 * and opening is an AES-GCM decryption each time. A sealed form is never reused for another value
 * (each sealing draws its own IV), so an entry cannot go stale; a secret that changes is stored
 * sealed anew. Bounded; the process holds APP_KEY anyway.
 */
const openedValues = new WeakMap<Deps["keys"], Map<string, string>>();
const OPENED_VALUES_KEPT = 100_000;

/**
 * A stored secret in plain text, or null when no key this process holds opens it. One sealed
 * under an earlier key is sealed again under the current one, without holding up the caller
 * (and is not kept: its row's new sealed form is what the next read finds).
 */
export function openStored(deps: SealedDeps, which: SealedColumn, id: string, sealed: string): string | null {
  let kept = openedValues.get(deps.keys);
  if (!kept) openedValues.set(deps.keys, (kept = new Map()));
  const key = `${which.purpose}\u0000${sealed}`;
  const known = kept.get(key);
  if (known !== undefined) return known;
  const opened = deps.keys.open(which.purpose, sealed);
  if (!opened) return null;
  if (opened.stale) {
    reseal(deps, which, id, sealed, opened.value).catch((error: unknown) =>
      deps.logger.warn({ err: error, kind: which.kind, id }, "keys: could not seal a value under the current APP_KEY"),
    );
  } else {
    if (kept.size >= OPENED_VALUES_KEPT) kept.clear();
    kept.set(key, opened.value);
  }
  return opened.value;
}

export type SweepCount = {
  kind: string;
  /** Sealed under an earlier key (or the first release's format), and opened. */
  stale: number;
  /** Of those, sealed again under the current key (keys:rotate). */
  resealed: number;
  /** No key held opens them: they stay as they are. */
  unopenable: number;
};

const SWEEP_BATCH = 500;

/**
 * Every sealed value not under the current key, read in batches by id: counted, and with
 * `reseal` sealed again. With nothing to do it is one statement per column.
 */
export async function sweepSealedValues(deps: SealedDeps, options: { reseal: boolean }): Promise<SweepCount[]> {
  const counts: SweepCount[] = [];
  for (const which of Object.values(SEALED) as SealedColumn[]) {
    const count: SweepCount = { kind: which.kind, stale: 0, resealed: 0, unopenable: 0 };
    let after = "";
    for (;;) {
      const rows = (await deps.db
        .select({ id: which.id, sealed: which.column })
        .from(which.table)
        .where(and(gt(which.id, after), not(sql`starts_with(${which.column}, ${deps.keys.sealedPrefix})`)))
        .orderBy(asc(which.id))
        .limit(SWEEP_BATCH)) as { id: string; sealed: string }[];
      for (const row of rows) {
        const opened = deps.keys.open(which.purpose, row.sealed);
        if (!opened) {
          count.unopenable += 1;
          continue;
        }
        count.stale += 1;
        if (options.reseal && (await reseal(deps, which, row.id, row.sealed, opened.value).catch(() => false))) {
          count.resealed += 1;
        }
      }
      if (rows.length < SWEEP_BATCH) break;
      after = rows.at(-1)!.id;
      await setImmediate();
    }
    counts.push(count);
  }
  return counts;
}

/**
 * Said once at start: what no key opens and what to set, and what still waits under an
 * earlier key. Silent when every value is sealed under APP_KEY.
 */
export async function reportSealedValues(deps: SealedDeps): Promise<SweepCount[]> {
  const counts = await sweepSealedValues(deps, { reseal: false });
  const unopenable = counts.filter((count) => count.unopenable > 0);
  if (unopenable.length > 0) {
    deps.logger.error(
      Object.fromEntries(unopenable.map((count) => [count.kind, count.unopenable])),
      `keys: ${listOf(unopenable.map((count) => `${count.unopenable} ${count.kind}`))} cannot be opened with APP_KEY or APP_KEY_PREVIOUS. ` +
        "They are kept, unused (webhooks show secret null, pushes to those devices are skipped): " +
        "set APP_KEY_PREVIOUS to the APP_KEY they were sealed with and restart (docs/operations.md, Rotating APP_KEY).",
    );
  }
  const stale = counts.filter((count) => count.stale > 0);
  if (stale.length > 0) {
    deps.logger.info(
      Object.fromEntries(stale.map((count) => [count.kind, count.stale])),
      `keys: ${listOf(stale.map((count) => `${count.stale} ${count.kind}`))} are sealed under an earlier key; ` +
        "each is sealed again as it is used, or all at once with `npm run cli -- keys:rotate`.",
    );
  }
  return counts;
}

function listOf(items: string[]): string {
  return items.length < 2 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;
}
