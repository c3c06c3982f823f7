import type { Env } from "../env.js";
import type { TenantLimits } from "../limits/plan-limits.js";
import { limiterShard } from "./access.js";
import { shardCount, shardWalk } from "./shards.js";
import type { TenantLimiter } from "./tenant-limiter.js";
import type { AdmitCallInput, AdmitResult, CancelLeaseInput, CancelLeaseResult, LimiterSnapshot, RefusalReason } from "./types.js";

/**
 * Refusals for lack of one shard's share: another shard may have room. The others are
 * the call's own (too large, a key, a profile) or shard 0's alone (active programs).
 */
const WALKABLE: ReadonlySet<RefusalReason> = new Set([
  "concurrency_limit",
  "requests_per_minute",
  "tokens_per_minute",
  "budget_held",
  "budget_exhausted",
  "max_tokens_exceeds_budget",
]);

type Refused = Extract<AdmitResult, { ok: false; snapshot: LimiterSnapshot }>;
const walkable = (result: AdmitResult): result is Refused =>
  !result.ok && typeof result.refusal === "object" && WALKABLE.has(result.refusal.reason);

/**
 * One call's view of its tenant's limiter (shards.ts): a tenant with one shard is its one
 * object, as before; a sharded one is admitted by the first shard of the call's walk with
 * room. After admission every operation of the call goes to `granting`.
 */
export class CallLimiter {
  readonly shards: number;
  #granting: DurableObjectStub<TenantLimiter>;
  #grantingIndex = 0;

  constructor(
    private readonly env: Pick<Env, "TENANT_LIMITER">,
    private readonly tenantId: string,
    private readonly limits: TenantLimits,
  ) {
    this.shards = shardCount(limits);
    this.#granting = limiterShard(env, tenantId, 0);
  }

  /** The shard that admitted the call (shard 0 before admission): its renew, settle and cancel go there. */
  get granting(): DurableObjectStub<TenantLimiter> {
    return this.#granting;
  }

  get grantingIndex(): number {
    return this.#grantingIndex;
  }

  async admitCall(input: AdmitCallInput): Promise<AdmitResult> {
    if (this.shards <= 1) return await this.#granting.admitCall(input);
    const count = this.shards;
    const startsProgram = input.newProgramId !== undefined;
    const walk = shardWalk(input.callId, count, startsProgram);
    let refused: Refused | undefined;
    /** The program's slot, taken on shard 0 on its own when shard 0 had no room for the call. */
    let programHeld = false;
    for (const index of walk) {
      const stub = limiterShard(this.env, this.tenantId, index);
      const { newProgramId, ...rest } = input;
      const shardInput: AdmitCallInput = {
        ...rest,
        ...(index === 0 && newProgramId !== undefined ? { newProgramId } : {}),
        shard: { tenantId: this.tenantId, index, count },
      };
      const result = await stub.admitCall(shardInput);
      if (result.ok) {
        this.#granting = stub;
        this.#grantingIndex = index;
        return { ...result, snapshot: this.#tenantWide(result.snapshot) };
      }
      if (!walkable(result)) {
        if (programHeld) await this.#releaseProgram(input.newProgramId);
        return result;
      }
      if (refused === undefined || result.refusal.retryAfterMs < refused.refusal.retryAfterMs) refused = result;
      if (index === 0 && startsProgram && newProgramId !== undefined) {
        // Shard 0 counts programs but had no room for the call: it takes the program alone; another shard takes the call.
        const program = await stub.admitProgram({ programId: newProgramId, now: input.now, limits: this.limits });
        if (!program.ok) {
          if (typeof program.refusal === "object") return { ok: false, refusal: program.refusal, snapshot: this.#tenantWide(result.snapshot) };
          return { ok: false, refusal: "invalid_input", detail: program.detail };
        }
        programHeld = true;
      }
    }
    if (programHeld) await this.#releaseProgram(input.newProgramId);
    if (refused === undefined) throw new Error("CallLimiter: a walk without a shard");
    return { ...refused, snapshot: this.#tenantWide(refused.snapshot) };
  }

  /** Gives the call's lease back on its granting shard; the program it started, on shard 0 (which counts programs). */
  async cancelLease(input: CancelLeaseInput): Promise<CancelLeaseResult> {
    const { releaseProgramId, ...lease } = input;
    if (this.#grantingIndex === 0 || releaseProgramId === undefined) return await this.#granting.cancelLease(input);
    const [cancelled] = await Promise.all([this.#granting.cancelLease(lease), this.#releaseProgram(releaseProgramId)]);
    return { ...cancelled, snapshot: cancelled.snapshot ? this.#tenantWide(cancelled.snapshot) : null };
  }

  async #releaseProgram(programId: string | undefined): Promise<void> {
    if (programId !== undefined) await limiterShard(this.env, this.tenantId, 0).releaseProgram({ programId });
  }

  /**
   * A shard's snapshot as the tenant's x-ratelimit-* headers show it: the tenant's limits,
   * and the shard's remaining scaled by the shard count (an estimate: only this shard was read).
   */
  #tenantWide(snapshot: LimiterSnapshot): LimiterSnapshot {
    if (this.shards <= 1) return snapshot;
    const scale = (remaining: number, limit: number) => Math.min(limit, remaining * this.shards);
    return {
      ...snapshot,
      requests: { ...snapshot.requests, limit: this.limits.rpm, remaining: scale(snapshot.requests.remaining, this.limits.rpm) },
      tokens: { ...snapshot.tokens, limit: this.limits.tpm, remaining: scale(snapshot.tokens.remaining, this.limits.tpm) },
      budget: { ...snapshot.budget, limit: this.limits.monthlyTokenBudget },
    };
  }
}
