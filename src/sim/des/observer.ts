/*
 * What the simulator measures about the engines and the pool beyond each program's
 * record, for the steady-state benchmark: it watches, it decides nothing.
 *
 * - StepMeter: per engine, every step's duration, batch size (sequences running in
 *   the step) and KV use (fraction of blocks referenced when the step starts),
 *   accumulated over the whole run and over a measurement window (the part of each
 *   step inside the window counts), plus preemptions by the instant they happened.
 * - RunSample: the pool's state at one instant (programs in the system, calls held in
 *   the pool queue, calls running and waiting in the engines, mean KV use), taken on
 *   a fixed grid so a trend across the window can be tested.
 */

export interface MeasurementWindow {
  startMs: number;
  endMs: number;
}

export interface StepFigures {
  /** Time the engine spent in steps. */
  busyMs: number;
  /** Σ batch size × step time: ÷ busyMs is the time-weighted mean batch. */
  batchMs: number;
  /** Σ KV use (0..1) × step time: ÷ the span is the time-weighted mean KV use (idle counts as 0). */
  kvMs: number;
  /** Highest KV use any step started with. */
  kvMax: number;
  /** Largest batch of any step. */
  batchMax: number;
  steps: number;
  preemptions: number;
}

export interface RunSample {
  atMs: number;
  /** Programs that arrived and have not finished. */
  programsInSystem: number;
  /** Calls held in the pool's queue. */
  poolQueued: number;
  /** Calls running in the engines (all engines). */
  engineRunning: number;
  /** Calls waiting in the engines' own queues (all engines). */
  engineWaiting: number;
  /** Mean KV use over the engines (0..1). */
  kvUsage: number;
}

export function emptyStepFigures(): StepFigures {
  return { busyMs: 0, batchMs: 0, kvMs: 0, kvMax: 0, batchMax: 0, steps: 0, preemptions: 0 };
}

function addStep(figures: StepFigures, spanMs: number, batch: number, kvUsage: number): void {
  figures.busyMs += spanMs;
  figures.batchMs += batch * spanMs;
  figures.kvMs += kvUsage * spanMs;
  figures.kvMax = Math.max(figures.kvMax, kvUsage);
  figures.batchMax = Math.max(figures.batchMax, batch);
  figures.steps += 1;
}

export function validateWindow(window: MeasurementWindow): void {
  if (!(Number.isFinite(window.startMs) && Number.isFinite(window.endMs) && window.startMs >= 0 && window.endMs > window.startMs)) {
    throw new RangeError(`measurement window must satisfy 0 <= startMs < endMs (finite), got ${window.startMs}..${window.endMs}`);
  }
}

/** One engine's step figures over the whole run and inside the window. */
export class StepMeter {
  readonly whole: StepFigures = emptyStepFigures();
  readonly inWindow: StepFigures | undefined;

  constructor(private readonly window: MeasurementWindow | undefined) {
    this.inWindow = window === undefined ? undefined : emptyStepFigures();
  }

  /** A step over [startMs, endMs) with `batch` sequences, started at KV use `kvUsage`. */
  step(startMs: number, endMs: number, batch: number, kvUsage: number): void {
    addStep(this.whole, endMs - startMs, batch, kvUsage);
    if (this.window === undefined || this.inWindow === undefined) return;
    const overlap = Math.min(endMs, this.window.endMs) - Math.max(startMs, this.window.startMs);
    if (overlap > 0) addStep(this.inWindow, overlap, batch, kvUsage);
  }

  /** Takes back the part of the last step after `endMs` (a run cut mid-step). */
  cut(stepStartMs: number, stepEndMs: number, endMs: number, batch: number, kvUsage: number): void {
    const cutFrom = Math.max(stepStartMs, endMs);
    const lost = stepEndMs - cutFrom;
    if (!(lost > 0)) return;
    const remove = (figures: StepFigures, span: number): void => {
      figures.busyMs -= span;
      figures.batchMs -= batch * span;
      figures.kvMs -= kvUsage * span;
    };
    remove(this.whole, lost);
    if (this.window !== undefined && this.inWindow !== undefined) {
      const overlap = Math.min(stepEndMs, this.window.endMs) - Math.max(cutFrom, this.window.startMs);
      if (overlap > 0) remove(this.inWindow, overlap);
    }
  }

  preempted(atMs: number): void {
    this.whole.preemptions += 1;
    if (this.window !== undefined && this.inWindow !== undefined && atMs >= this.window.startMs && atMs < this.window.endMs) this.inWindow.preemptions += 1;
  }
}

/**
 * Sample instants: every `everyMs` on a grid through `anchorMs` (so a window's start
 * and, when its length is a multiple of `everyMs`, its end are sampled exactly),
 * from the first grid point ≥ 0.
 */
export function firstSampleAt(anchorMs: number, everyMs: number): number {
  if (!(Number.isFinite(everyMs) && everyMs > 0)) throw new RangeError(`sampleEveryMs must be a finite number > 0, got ${everyMs}`);
  return anchorMs - Math.floor(anchorMs / everyMs) * everyMs;
}
