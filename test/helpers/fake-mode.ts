// What a fake provider (push, translation) does with its next request: answer normally, fail
// with a status (a number of times, or until recover()), or hang.
export class FakeMode<Options extends { times?: number }> {
  private failure: { status: number; options: Options; remaining: number } | undefined;
  private hanging = false;

  fail(status: number, options: Options = {} as Options) {
    this.failure = { status, options, remaining: options.times ?? Number.POSITIVE_INFINITY };
  }
  hang() {
    this.hanging = true;
  }
  recover() {
    this.failure = undefined;
    this.hanging = false;
  }
  /** "hang", a failure to answer with, or undefined to answer normally. */
  next(): "hang" | { status: number; options: Options } | undefined {
    if (this.hanging) return "hang";
    const failure = this.failure;
    if (!failure) return undefined;
    failure.remaining -= 1;
    if (failure.remaining <= 0) this.failure = undefined;
    return { status: failure.status, options: failure.options };
  }
}
