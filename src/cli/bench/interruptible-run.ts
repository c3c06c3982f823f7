/*
 * A benchmark run that Ctrl-C (SIGINT) or SIGTERM stops cleanly: the first signal aborts
 * the run (which stops every server it started) and the run rejects with
 * BenchInterrupted, whichever step it was in; a second signal exits at once.
 */

export class BenchInterrupted extends Error {
  constructor(
    readonly bench: string,
    readonly signal: NodeJS.Signals,
  ) {
    super(`${bench} benchmark interrupted by ${signal}; every server it started has been stopped`);
    this.name = "BenchInterrupted";
  }
}

export async function runInterruptibly<T>(bench: string, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      // A second Ctrl-C: stop waiting; exit hooks still kill the child processes.
      console.error(`\n${signal} again: exiting now`);
      process.exit(130);
    }
    console.error(`\n${signal}: stopping the run and every server… (again to force)`);
    controller.abort(new BenchInterrupted(bench, signal));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    return await run(controller.signal);
  } catch (error) {
    // An interrupted run surfaces as the abort reason, whichever step it stopped.
    if (controller.signal.aborted) throw controller.signal.reason;
    throw error;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
