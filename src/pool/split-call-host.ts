import type { Dispatcher as HttpDispatcher } from "undici";
import type { Clock } from "../core/clock.js";
import type { ContextRef } from "../core/kv/retention-planner.js";
import type { PoolCore } from "../core/pool-core.js";
import type { RoleDemandMeter } from "../core/roles/role-demand-meter.js";
import type { EngineRequestForm } from "./engine-request.js";
import type { CallOutcome, PoolMetrics } from "./metrics.js";
import type { EngineSlot, PendingCall } from "./pending-call.js";
import type { RelayEnd, RelayStart } from "./relay.js";

/** What the split-call flow (split-call.ts) uses of the dispatcher that holds the calls. */
export interface SplitCallHost {
  readonly core: PoolCore;
  readonly clock: Clock;
  readonly http: HttpDispatcher;
  readonly metrics: PoolMetrics;
  readonly roleMeter: RoleDemandMeter | undefined;
  /** The pool is shutting down. */
  closed(): boolean;
  slot(engineId: string): EngineSlot | undefined;
  /** The call is still the pool's (it has not left). */
  holds(callId: string): boolean;
  /** The body `slot`'s engine gets for the call in `form` (its adapter's fields, its retention tag). */
  bodyFor(pending: PendingCall, slot: EngineSlot, form: EngineRequestForm): Record<string, unknown>;
  /** The call's context is held on `engineId` (retention). */
  heldOn(context: ContextRef, engineId: string): void;
  /** The call's prefill KV left `prefillId` for `decodeId` (its decode recorded there): the prefill copy is kept through the expected decode (retention). */
  prefillHandedOff(pending: PendingCall, prefillId: string, decodeId: string): void;
  /** The attempt left its engine: its slot back, counted by outcome. */
  release(pending: PendingCall, engineId: string, outcome: CallOutcome, end: { serviceMs: number; outputTokens?: number }): void;
  /** The call is answered with `response` and leaves the pool. */
  finish(pending: PendingCall, response: Response): void;
  /** The call leaves the pool; `end` is its last attempt's. */
  forget(pending: PendingCall, end?: RelayEnd): void;
  /** An attempt's start as any call's: the answer delivered, or a failure retried or answered. */
  attemptStarted(pending: PendingCall, engineId: string, start: RelayStart, form: EngineRequestForm): void;
  /** Starts an attempt on `engineId` (a recompute's whole call). */
  start(pending: PendingCall, engineId: string, slot: EngineSlot, now: number): void;
  /** Back in the queue at its original place. */
  requeue(pending: PendingCall): void;
  retryAfter(): Record<string, string>;
  /** A relay could not connect to the engine (the pool's onEngineDown). */
  engineDown(engineId: string): void;
  noteRoleSwitches(): void;
  pump(): void;
}
