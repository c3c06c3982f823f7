/*
 * Random TAO planner snapshots for `bench:planner`: a pool under load, where the
 * placement matters. Seeded, so every run (and every method in one run) sees the
 * same snapshots.
 *
 * Programs: contexts lognormal around 8k tokens (coding agents: ~5k first prompt,
 * growing to ~70k; reference/workloads-and-engines.md), clamped to [256, 70k]; 70 %
 * have a queued call, the rest are between calls, half of them ready soon. 80 % have
 * credit on a home engine (their context decayed by 0-30 s of a 10 s half-life), a
 * quarter of those also a smaller credit on a second engine.
 * Engines: nearly full, as under load: free quanta 0 (30 %), 1 (25 %), 2 (20 %),
 * 3 (10 %) or 4-12 (15 %), plus a partial quantum.
 */

import type { TaoEngine, TaoProgram, TaoSnapshot } from "../../core/tao/snapshot.js";

/** mulberry32: small, fast, seedable. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function normal(random: () => number): number {
  const u = Math.max(random(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

export interface SnapshotShape {
  programs: number;
  engines: number;
  quantumTokens: number;
}

function freeQuanta(random: () => number): number {
  const r = random();
  if (r < 0.3) return 0;
  if (r < 0.55) return 1;
  if (r < 0.75) return 2;
  if (r < 0.85) return 3;
  return 4 + Math.floor(random() * 9);
}

export function randomSnapshot(random: () => number, shape: SnapshotShape, at = 0): TaoSnapshot {
  const engines: TaoEngine[] = [];
  for (let e = 0; e < shape.engines; e++) {
    const partial = Math.floor(random() * shape.quantumTokens);
    engines.push({ engineId: `eng_${e}`, freeTokens: freeQuanta(random) * shape.quantumTokens + partial });
  }
  const programs: TaoProgram[] = [];
  for (let p = 0; p < shape.programs; p++) {
    const tokens = Math.round(Math.min(70_000, Math.max(256, 8_000 * Math.exp(0.9 * normal(random)))));
    const queued = random() < 0.7;
    const ready = queued || random() < 0.5;
    const credit: Record<string, number> = {};
    if (random() < 0.8) {
      const home = Math.floor(random() * shape.engines);
      credit[`eng_${home}`] = tokens * 2 ** (-(random() * 30_000) / 10_000);
      if (random() < 0.25) {
        const other = Math.floor(random() * shape.engines);
        if (other !== home) credit[`eng_${other}`] = 0.5 * tokens * 2 ** (-(random() * 30_000) / 10_000);
      }
    }
    programs.push({ programId: `prog_${p}`, tokens, queued, ready, credit });
  }
  return { at, programs, engines };
}
