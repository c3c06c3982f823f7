/**
 * Calls an idempotent operation (a settle keyed by call ID) again after each delay
 * while it rejects, so a transient Durable Object failure (a reset, an overloaded
 * object) does not turn a settled call into one the reaper later writes as lost.
 * Resolves with the first success; rejects with the last error once the delays are spent.
 */
export async function retryIdempotent<T>(operation: () => Promise<T>, delaysMs: readonly number[], onRetry?: (error: unknown, attempt: number) => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      const delay = delaysMs[attempt];
      if (delay === undefined) throw error;
      onRetry?.(error, attempt + 1);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** Waits between settle attempts: about 3 s in all, well inside a Worker's waitUntil budget. */
export const SETTLE_RETRY_DELAYS_MS: readonly number[] = Object.freeze([100, 500, 2_500]);
