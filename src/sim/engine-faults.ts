/*
 * Injected failures, so the pool's retry and failover paths can be tested against a
 * real simulated engine: the next N completion requests fail in the chosen way.
 */

export type FaultMode =
  /** The connection is closed before the first response byte. */
  | "disconnect"
  /** An OpenAI-shaped 500. */
  | "http-500";

export class FaultInjector {
  private readonly queue: FaultMode[] = [];

  /** Makes the next `count` completion requests fail with `mode` (appended to any pending). */
  failNext(count: number, mode: FaultMode = "disconnect"): void {
    if (!Number.isInteger(count) || count < 0) throw new RangeError("count must be a non-negative integer");
    for (let i = 0; i < count; i++) this.queue.push(mode);
  }

  /** The fault for the request arriving now, if any. */
  take(): FaultMode | undefined {
    return this.queue.shift();
  }

  get pending(): number {
    return this.queue.length;
  }
}
