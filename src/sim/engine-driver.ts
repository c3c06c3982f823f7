import type { EngineEvent, EngineModel, EngineRequest, FinishedEvent, KvPull, SubmittedRequest } from "./engine-model.js";

/*
 * Runs an EngineModel on the wall clock: each step lasts its modelled duration
 * divided by `timeScale`. While busy, model time is the step timeline itself (a
 * step starts exactly when the previous one ended), and each real wait is measured
 * against `elapsed real time × timeScale`, so late timers are caught up by shorter
 * waits instead of stretching model latencies. While idle, model time follows the
 * scaled wall clock. With an infinite time scale steps take no real time at all
 * (model time advances by the steps' durations, and by real time while idle),
 * which isolates proxy overhead in benchmarks.
 *
 * A remote-KV request's pull (EngineRequest.remoteKv) is handed to its observer when
 * the model starts it; while nothing else runs, the driver sleeps until the model's
 * next wake (the pull's end), at once with an infinite time scale.
 */

export interface GenerationObserver {
  /** One generated token; `index` is 0-based. */
  onToken(index: number): void;
  onFinished(event: FinishedEvent): void;
  /** The engine shut down before the request finished. */
  onClosed(): void;
  /** The engine started pulling the request's KV (a reported remote-KV request: end it with kvPullDone). */
  onKvPull?(pull: KvPull): void;
}

export interface EngineDriverOptions {
  /** Model ms per real ms; Infinity runs steps back to back. Default 1. */
  timeScale?: number;
  /** Every model event (metrics hook). */
  onEvent?: (event: EngineEvent) => void;
}

export class RealTimeEngineDriver {
  readonly timeScale: number;
  private readonly instant: boolean;
  private readonly origin = performance.now();
  private readonly observers = new Map<string, GenerationObserver>();
  private readonly onEvent: ((event: EngineEvent) => void) | undefined;
  private lastStepEndMs = 0;
  private stepStartMs = 0;
  private pendingStepEndMs = 0;
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  /** Idle until a KV pull ends: the timer, and the model time it wakes for. */
  private wakeTimer: NodeJS.Timeout | undefined;
  private wakeAtMs = Number.NEGATIVE_INFINITY;
  private stepping = false;
  private closed = false;

  constructor(
    readonly model: EngineModel,
    options: EngineDriverOptions = {},
  ) {
    const scale = options.timeScale ?? 1;
    if (!(scale > 0)) throw new RangeError("timeScale must be > 0 (Infinity for instant)");
    this.timeScale = scale;
    this.instant = !Number.isFinite(scale);
    this.onEvent = options.onEvent;
  }

  /** Current model time in ms: within the running step's span while busy. */
  nowMs(): number {
    const scaled = this.scaledRealMs();
    if (this.model.isStepActive) return Math.min(Math.max(scaled, this.stepStartMs), this.pendingStepEndMs);
    return Math.max(scaled, this.lastStepEndMs);
  }

  private scaledRealMs(): number {
    const real = performance.now() - this.origin;
    return this.instant ? real : real * this.timeScale;
  }

  /** Queues a request (throws EngineRequestError when the model refuses it). */
  submit(request: EngineRequest, observer: GenerationObserver): SubmittedRequest {
    if (this.closed) throw new Error("engine is closed");
    const submitted = this.model.submit(request, this.nowMs());
    this.observers.set(request.id, observer);
    if (!this.stepping) this.schedule(0);
    return submitted;
  }

  /** Client went away: the model frees the request's KV blocks. */
  abort(id: string): void {
    if (this.observers.delete(id)) this.model.abort(id);
  }

  /** A reported KV pull ended with the prompt's first `tokens` tokens of KV valid (0: failed). */
  kvPullDone(id: string, tokens: number): void {
    if (this.closed) return;
    if (this.model.kvPullDone(id, tokens, this.nowMs()) && !this.stepping) this.schedule(0);
  }

  /** Real ms until model time `modelMs` (0 with an infinite time scale). */
  realMsUntil(modelMs: number): number {
    return this.instant ? 0 : Math.max(0, (modelMs - this.nowMs()) / this.timeScale);
  }

  get inFlight(): number {
    return this.observers.size;
  }

  /** Stops the step loop and tells every in-flight request. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.cancelTimer();
    const observers = [...this.observers.entries()];
    this.observers.clear();
    for (const [id, observer] of observers) {
      this.model.abort(id);
      observer.onClosed();
    }
  }

  private schedule(delayMs: number): void {
    if (this.closed || this.timer !== undefined || this.immediate !== undefined) return;
    this.cancelWake();
    this.stepping = true;
    // setImmediate between back-to-back steps lets sockets flush without the ~1 ms floor of setTimeout(0).
    if (delayMs <= 0) this.immediate = setImmediate(this.tick);
    else this.timer = setTimeout(this.tick, delayMs);
  }

  private cancelTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
    this.cancelWake();
  }

  /** Nothing to run: sleep until the model's next wake (a KV pull's end), if it has one. */
  private armWake(): void {
    const wake = this.model.nextWakeMs();
    if (wake === undefined || this.closed) return;
    this.wakeAtMs = wake;
    this.wakeTimer = setTimeout(this.wakeUp, this.realMsUntil(wake));
  }

  private cancelWake(): void {
    if (this.wakeTimer !== undefined) clearTimeout(this.wakeTimer);
    this.wakeTimer = undefined;
    this.wakeAtMs = Number.NEGATIVE_INFINITY;
  }

  private readonly wakeUp = (): void => {
    this.wakeTimer = undefined;
    if (this.closed || this.stepping) return;
    this.stepping = true;
    this.tick();
  };

  private readonly tick = (): void => {
    this.timer = undefined;
    this.immediate = undefined;
    if (this.closed) return;
    // Back to back while busy; from the (scaled) wall clock after an idle spell.
    let start: number;
    if (this.model.isStepActive) {
      this.completeStep();
      start = this.lastStepEndMs;
    } else {
      // Woken for a pull's end: not before it (a timer may fire early; an instant driver does not wait).
      start = Math.max(this.nowMs(), this.wakeAtMs);
    }
    this.wakeAtMs = Number.NEGATIVE_INFINITY;
    const duration = this.model.startStep(start);
    for (const pull of this.model.takeKvPulls()) this.observers.get(pull.requestId)?.onKvPull?.(pull);
    if (duration === undefined) {
      this.stepping = false;
      this.armWake();
      return;
    }
    this.stepStartMs = start;
    this.pendingStepEndMs = start + duration;
    if (this.instant) {
      this.schedule(0);
      return;
    }
    this.schedule((this.pendingStepEndMs - this.scaledRealMs()) / this.timeScale);
  };

  private completeStep(): void {
    const events = this.model.finishStep(this.deliverToken);
    this.lastStepEndMs = this.pendingStepEndMs;
    for (const event of events) {
      this.onEvent?.(event);
      if (event.type !== "finished") continue;
      const observer = this.observers.get(event.requestId);
      this.observers.delete(event.requestId);
      observer?.onFinished(event);
    }
  }

  private readonly deliverToken = (requestId: string, index: number): void => {
    this.observers.get(requestId)?.onToken(index);
  };
}
