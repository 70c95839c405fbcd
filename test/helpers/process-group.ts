// Child processes the tests start in a process group of their own (detached), to stop together.

/** True while any process of the group is alive (signal 0 only checks). */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}
