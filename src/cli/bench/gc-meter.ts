import { constants, PerformanceObserver } from "node:perf_hooks";
// A type only, erased at run time: the shape is the wire schema's (proxy-server-spec.ts).
import type { GcTotals } from "./proxy-server-spec.js";

/*
 * The garbage collector's pauses in a benchmark's server process, summed from Node's
 * `gc` performance entries and sent to the parent over IPC when it asks
 * (proxy-server-process.ts ServerProcess.gcTotals). Loaded into every server process the
 * benches start (gc-meter-preload.ts, `node --import`), whichever source tree the server
 * runs, so a baseline pool is metered as this one is. Node built-ins only at run time:
 * it runs in another tree's process.
 */

/** Parent → child: send your GC totals. */
export const GC_TOTALS_REQUEST = "gc-totals";

export type { GcTotals };

export function startGcMeter(): void {
  const totals: GcTotals = { minorMs: 0, minorCount: 0, majorMs: 0, majorCount: 0, incrementalMs: 0, weakMs: 0 };
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      // Node's gc entries carry their kind in `detail` (the types here predate it).
      const kind = (entry as unknown as { detail?: { kind?: number } }).detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        totals.minorMs += entry.duration;
        totals.minorCount += 1;
      } else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        totals.majorMs += entry.duration;
        totals.majorCount += 1;
      } else if (kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL) {
        totals.incrementalMs += entry.duration;
      } else if (kind === constants.NODE_PERFORMANCE_GC_WEAKCB) {
        totals.weakMs += entry.duration;
      }
    }
  }).observe({ entryTypes: ["gc"] });
  process.on("message", (message) => {
    if (message === GC_TOTALS_REQUEST) process.send?.({ type: GC_TOTALS_REQUEST, totals: { ...totals } });
  });
}

/** What the collector did between two readings of the same process. */
export function gcTotalsBetween(before: GcTotals, after: GcTotals): GcTotals {
  return {
    minorMs: after.minorMs - before.minorMs,
    minorCount: after.minorCount - before.minorCount,
    majorMs: after.majorMs - before.majorMs,
    majorCount: after.majorCount - before.majorCount,
    incrementalMs: after.incrementalMs - before.incrementalMs,
    weakMs: after.weakMs - before.weakMs,
  };
}

/** All the main thread's GC pause time in `totals`, ms. */
export const gcPauseMs = (totals: GcTotals): number => totals.minorMs + totals.majorMs + totals.incrementalMs + totals.weakMs;
