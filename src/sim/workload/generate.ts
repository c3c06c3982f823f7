import { deriveSeed, Rng } from "./prng.js";
import { CallListBuilder, type ProgramSpec } from "./program-spec.js";
import type { Workload } from "./schema.js";
import { type ProgramShape, shapeFor } from "./shapes.js";

/*
 * Workload → programs, pure and deterministic: the same workload and seed always
 * give the same programs. Arrivals, kinds and tenants come from one stream;
 * each program's calls from its own stream derived from (seed, index), so a
 * longer run starts with exactly the programs of a shorter one.
 */

export const DEFAULT_SEED = 1;

export interface GenerateOptions {
  /** Overrides the workload's seed. */
  seed?: number;
  /** Overrides the workload's program count (and ends a duration-bounded run early). */
  count?: number;
}

const ARRIVAL_STREAM = 0xa1;
const PROGRAM_STREAM = 0xb2;
const CONTENT_STREAM = 0xc3;

function weightedPicker(weights: readonly number[]): (rng: Rng) => number {
  const total = weights.reduce((sum, w) => sum + w, 0);
  return (rng) => {
    let u = rng.next() * total;
    for (let i = 0; i < weights.length; i++) {
      const w = weights[i] as number;
      if (u < w) return i;
      u -= w;
    }
    // Rounding left u at the very end: the last entry with weight.
    for (let i = weights.length - 1; i >= 0; i--) if ((weights[i] as number) > 0) return i;
    return 0;
  };
}

export function programIdFor(index: number): string {
  return `prog_sim${String(index).padStart(6, "0")}`;
}

/** Generates the workload's programs in arrival order. */
export function generatePrograms(workload: Workload, options: GenerateOptions = {}): ProgramSpec[] {
  const seed = options.seed ?? workload.seed ?? DEFAULT_SEED;
  if (!Number.isInteger(seed) || seed < 0 || seed > 2 ** 32 - 1) throw new RangeError("seed must be an integer in [0, 2^32)");
  if (options.count !== undefined && (!Number.isInteger(options.count) || options.count < 0)) {
    throw new RangeError("count must be a non-negative integer");
  }
  const limit = options.count ?? workload.programs.count ?? Infinity;
  const durationMs = options.count === undefined && workload.programs.durationSec !== undefined ? workload.programs.durationSec * 1_000 : Infinity;

  const shapes: ProgramShape[] = workload.mix.map(shapeFor);
  const pickEntry = weightedPicker(workload.mix.map((entry) => entry.weight));
  const tenants = workload.tenants;
  const pickTenant = tenants === undefined ? undefined : weightedPicker(tenants.map((t) => t.weight));
  const arrivals = new Rng(deriveSeed(seed, ARRIVAL_STREAM));
  const meanGapMs = workload.arrival.process === "poisson" ? 1_000 / workload.arrival.ratePerSec : 0;

  const programs: ProgramSpec[] = [];
  /** Per source tenant, the tenants that send a twin of each of its programs. */
  const mirrorsOf = new Map<string, string[]>();
  for (const t of tenants ?? []) if (t.mirrors !== undefined) mirrorsOf.set(t.mirrors, [...(mirrorsOf.get(t.mirrors) ?? []), t.id]);
  let clockMs = 0;
  for (let index = 0; index < limit; index++) {
    if (meanGapMs > 0) clockMs += -meanGapMs * Math.log(arrivals.nextOpen());
    if (clockMs >= durationMs) break;
    const mixIndex = pickEntry(arrivals);
    const entry = workload.mix[mixIndex];
    if (entry === undefined) throw new Error("unreachable: mix index out of range");
    const drawnTenant = pickTenant === undefined || tenants === undefined ? undefined : tenants[pickTenant(arrivals)]?.id;
    const tenantId = entry.tenantId ?? drawnTenant;

    const builder = new CallListBuilder(entry.systemPromptId ?? `${entry.kind}.${mixIndex}`, entry.params.systemPromptTokens);
    (shapes[mixIndex] as ProgramShape)(new Rng(deriveSeed(seed, PROGRAM_STREAM, index)), builder);
    const program = {
      kind: entry.kind,
      mixIndex,
      arrivalMs: clockMs,
      calls: builder.calls,
    };
    programs.push({
      programId: programIdFor(programs.length),
      index: programs.length,
      ...(tenantId === undefined ? {} : { tenantId }),
      ...program,
      contentSeed: deriveSeed(seed, CONTENT_STREAM, index),
    });
    // Twins: the same calls at the same instant, their own text (no prefix shared with the original).
    (tenantId === undefined ? [] : (mirrorsOf.get(tenantId) ?? [])).forEach((twinTenant, twin) => {
      programs.push({ programId: programIdFor(programs.length), index: programs.length, tenantId: twinTenant, ...program, contentSeed: deriveSeed(seed, CONTENT_STREAM, index, twin + 1) });
    });
  }
  return programs;
}
