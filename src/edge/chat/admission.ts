import type { AdmitCallInput, AdmitResult } from "../limiter/types.js";
import type { ProgramSession } from "../program/session.js";
import type { BeginCallInput, BeginCallResult } from "../program/types.js";

/*
 * A call's admission (its tenant's limiter: key, limits, reservation) and its begin (its
 * program: in-flight record, priority values) are independent objects, so they are asked
 * at once: the call waits one round trip instead of two. The order still holds where it
 * matters: a begun call whose admission is refused is taken back (abandonCall, which also
 * drops a program that call would have started), and an admitted call whose begin is
 * refused gives its lease back (the caller's cancel). So a refusal on either side
 * leaves no trace on the other, as in the sequential order.
 *
 * The price: every refused admission costs its program two calls (begin, abandon) that the
 * sequential order never made. An isolate therefore goes back to the sequential order for
 * a tenant for REFUSAL_COOLDOWN_MS after one of its calls was refused, so a tenant hammering
 * at a limit does not double the work its refusals cost.
 */

export const REFUSAL_COOLDOWN_MS = 1_000;
const MAX_TRACKED_TENANTS = 10_000;

/** Tenant ID → when this isolate last saw one of its admissions refused. */
const lastRefusalAt = new Map<string, number>();

function noteRefusal(tenantId: string, now: number): void {
  lastRefusalAt.delete(tenantId);
  lastRefusalAt.set(tenantId, now);
  if (lastRefusalAt.size > MAX_TRACKED_TENANTS) {
    const oldest = lastRefusalAt.keys().next();
    if (!oldest.done) lastRefusalAt.delete(oldest.value);
  }
}

type Admitted = Extract<AdmitResult, { ok: true }>;
type Begun = Extract<BeginCallResult, { ok: true }>;

export type AdmitAndBeginOutcome =
  | { kind: "begun"; admitted: Admitted; begun: Begun }
  /** The limiter refused: nothing is held (a parallel begin was taken back). */
  | { kind: "admission_refused"; admitted: Exclude<AdmitResult, { ok: true }> }
  /** The program refused the call: the caller gives the lease back. */
  | { kind: "begin_refused"; admitted: Admitted; begun: Exclude<BeginCallResult, { ok: true }> }
  /** The begin failed (threw): the caller gives the lease back and fails the call. */
  | { kind: "begin_failed"; admitted: Admitted; error: unknown };

export interface AdmitAndBeginInput {
  tenantId: string;
  /** The tenant's limiter object, or a sharded tenant's CallLimiter (limiter/sharded-limiter.ts). */
  limiter: { admitCall(input: AdmitCallInput): Promise<AdmitResult> };
  session: DurableObjectStub<ProgramSession>;
  admit: AdmitCallInput;
  begin: BeginCallInput;
  /** The old order, admission then begin (a baseline for bench:edge). */
  sequential?: boolean;
}

/** Admits and begins a call; an admission that throws is rethrown once a parallel begin is taken back. */
export async function admitAndBegin(input: AdmitAndBeginInput): Promise<AdmitAndBeginOutcome> {
  const { tenantId, limiter, session, admit, begin } = input;
  const refusedLately = (lastRefusalAt.get(tenantId) ?? Number.NEGATIVE_INFINITY) > admit.now - REFUSAL_COOLDOWN_MS;
  if (input.sequential || refusedLately) {
    const admitted = await limiter.admitCall(admit);
    if (!admitted.ok) {
      if (admitted.refusal !== "profile_changed") noteRefusal(tenantId, admit.now);
      return { kind: "admission_refused", admitted };
    }
    return afterBegin(admitted, await settledOf<BeginCallResult>(session.beginCall(begin)));
  }

  const [admission, beginning] = await Promise.all([
    settledOf<AdmitResult>(limiter.admitCall(admit)),
    settledOf<BeginCallResult>(session.beginCall(begin)),
  ]);
  const takeBackBegin = async () => {
    if (beginning.status !== "fulfilled" || !beginning.value.ok) return;
    await session
      .abandonCall({ callId: begin.callId, createdByCall: begin.newProgram !== undefined })
      .catch((error: unknown) => console.error(`taking back the begin of ${begin.callId} failed; the program reaps it`, error));
  };
  if (admission.status === "rejected") {
    await takeBackBegin();
    throw admission.reason;
  }
  const admitted = admission.value;
  if (admitted.ok) return afterBegin(admitted, beginning);
  // A profile that changed is not the tenant hammering at a limit: its retry stays parallel.
  if (admitted.refusal !== "profile_changed") noteRefusal(tenantId, admit.now);
  await takeBackBegin();
  return { kind: "admission_refused", admitted };
}

function settledOf<T>(promise: Promise<T>): Promise<PromiseSettledResult<T>> {
  return promise.then(
    (value) => ({ status: "fulfilled", value }),
    (reason: unknown) => ({ status: "rejected", reason }),
  );
}

function afterBegin(admitted: Admitted, beginning: PromiseSettledResult<BeginCallResult>): AdmitAndBeginOutcome {
  if (beginning.status === "rejected") return { kind: "begin_failed", admitted, error: beginning.reason };
  if (!beginning.value.ok) return { kind: "begin_refused", admitted, begun: beginning.value };
  return { kind: "begun", admitted, begun: beginning.value };
}
