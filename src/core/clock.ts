/** Time source injected into core code: the pool passes a real clock, the simulator a virtual one. */
export interface Clock {
  /** Milliseconds; only differences matter. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
