// db/races.ts: a statement that lost a race to another transaction runs again; nothing else does.
import { describe, expect, it } from "vitest";
import { hasSqlState, LOST_TO_CONCURRENCY, retryingRaces } from "../db/races.ts";

const sqlError = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });

/** A statement that fails with `failures` in turn, then writes; it counts its runs. */
function statement(failures: Error[]) {
  const state = {
    runs: 0,
    run: async () => {
      state.runs += 1;
      const failure = failures.shift();
      if (failure) throw failure;
      return "written";
    },
  };
  return state;
}

describe("retryingRaces", () => {
  it("runs a statement again after a deadlock or a serialization failure, up to its attempts", async () => {
    const racing = statement([sqlError("40P01"), sqlError("40001")]);
    expect(await retryingRaces(racing.run, { attempts: 3 })).toBe("written");
    expect(racing.runs).toBe(3);
  });

  it("gives up after its last attempt, with the last failure", async () => {
    const losing = statement([sqlError("40P01"), sqlError("40P01"), sqlError("40P01")]);
    await expect(retryingRaces(losing.run, { attempts: 2 })).rejects.toMatchObject({ code: "40P01" });
    expect(losing.runs).toBe(2);
  });

  it("never runs again after any other failure", async () => {
    const duplicate = statement([sqlError("23505")]);
    await expect(retryingRaces(duplicate.run, { attempts: 5 })).rejects.toMatchObject({ code: "23505" });
    expect(duplicate.runs).toBe(1);
    // Unless the caller counts it as a race.
    expect(hasSqlState(sqlError("23505"), new Set(["23505", ...LOST_TO_CONCURRENCY]))).toBe(true);
    // A cause chain is looked through (a driver error wrapped by the ORM).
    expect(hasSqlState(new Error("wrapped", { cause: sqlError("40P01") }), LOST_TO_CONCURRENCY)).toBe(true);
    expect(hasSqlState("40P01", LOST_TO_CONCURRENCY)).toBe(false);
  });
});
