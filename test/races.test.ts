// db/races.ts: a statement that lost a race to another transaction runs again; nothing else does.
import { describe, expect, it } from "vitest";
import { hasSqlState, LOST_TO_CONCURRENCY, retryingRaces } from "../db/races.ts";

const sqlError = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });

describe("retryingRaces", () => {
  it("runs a statement again after a deadlock or a serialization failure, up to its attempts", async () => {
    const failures = [sqlError("40P01"), sqlError("40001")];
    let runs = 0;
    const result = await retryingRaces(
      async () => {
        runs += 1;
        const failure = failures.shift();
        if (failure) throw failure;
        return "written";
      },
      { attempts: 3 },
    );
    expect(result).toBe("written");
    expect(runs).toBe(3);
  });

  it("gives up after its last attempt, with the last failure", async () => {
    let runs = 0;
    const run = retryingRaces(
      async () => {
        runs += 1;
        throw sqlError("40P01");
      },
      { attempts: 2 },
    );
    await expect(run).rejects.toMatchObject({ code: "40P01" });
    expect(runs).toBe(2);
  });

  it("never runs again after any other failure", async () => {
    let runs = 0;
    const run = retryingRaces(
      async () => {
        runs += 1;
        throw sqlError("23505");
      },
      { attempts: 5 },
    );
    await expect(run).rejects.toMatchObject({ code: "23505" });
    expect(runs).toBe(1);
    // Unless the caller counts it as a race.
    expect(hasSqlState(sqlError("23505"), new Set(["23505", ...LOST_TO_CONCURRENCY]))).toBe(true);
    // A cause chain is looked through (a driver error wrapped by the ORM).
    expect(hasSqlState(new Error("wrapped", { cause: sqlError("40P01") }), LOST_TO_CONCURRENCY)).toBe(true);
    expect(hasSqlState("40P01", LOST_TO_CONCURRENCY)).toBe(false);
  });
});
