import { type EvolveConfig, simulateEvolvingPool, summarise, type EvolveSummary } from "../../sim/evolve/pd-simulation.js";
import { AGENT_SHAPES, type AgentShape, shiftingWorkload } from "../../sim/evolve/workload.js";
import type { EvolveBenchOptions } from "./evolve.js";

/*
 * `npm run bench:evolve -- --only branches`: the abandoned-branch signal (issue 13).
 * Tree-search programs (AGENT_SHAPES["tree-search"]) on one mixed engine, at a few
 * arrival rates from idle KV to KV (and compute) past its capacity; each rate under plain
 * LRU, the planner's tags and drops without keeps, and full retention, the latter two
 * with and without threadEnded for the abandoned branches. Same programs per rate.
 */

export const BRANCH_ENGINES = 1;
export const DEFAULT_BRANCH_RATES = [0.04, 0.06, 0.08, 0.1] as const;

interface BranchVariant {
  variant: string;
  settings: Pick<EvolveConfig, "retention" | "retentionHints" | "threadEndedSignal">;
}

const BRANCH_VARIANTS: readonly BranchVariant[] = [
  { variant: "LRU", settings: { retention: false } },
  { variant: "drops only, no branch signal", settings: { retention: true, retentionHints: "drops", threadEndedSignal: false } },
  { variant: "drops only + branch signal", settings: { retention: true, retentionHints: "drops", threadEndedSignal: true } },
  { variant: "retention, no branch signal", settings: { retention: true, threadEndedSignal: false } },
  { variant: "retention + branch signal", settings: { retention: true, threadEndedSignal: true } },
];

export interface BranchBenchRow {
  programsPerSec: number;
  variant: string;
  all: EvolveSummary;
  programs: number;
  programsFinished: number;
  wallMs: number;
}

/** The tree-search shape with the bench's decision wait. */
const branchShapeOf = (options: EvolveBenchOptions) => {
  const shape = AGENT_SHAPES["tree-search"];
  return { ...shape, tree: { ...shape.tree, decisionMs: options.branchDecisionSeconds * 1_000 } } satisfies AgentShape;
};

export function runBranchBench(options: EvolveBenchOptions): BranchBenchRow[] {
  const rows: BranchBenchRow[] = [];
  const shape = branchShapeOf(options);
  for (const programsPerSec of options.branchRates) {
    const programs = shiftingWorkload([{ kind: "tree-search", durationMs: options.phaseSeconds * 1_000, programsPerSec }], options.seed).map((program) => ({ ...program, shape }));
    for (const { variant, settings } of BRANCH_VARIANTS) {
      const started = performance.now();
      const result = simulateEvolvingPool({ engines: BRANCH_ENGINES, profile: "llama-3.1-8b-h100", programs, policy: { kind: "mixed" }, ...settings });
      rows.push({ programsPerSec, variant, all: summarise(result), programs: programs.length, programsFinished: result.programsFinished, wallMs: performance.now() - started });
    }
  }
  return rows;
}

const s = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1_000).toFixed(2)} s` : "—");
const millions = (tokens: number) => `${(tokens / 1e6).toFixed(2)} M`;
const thousands = (blocks: number) => `${(blocks / 1e3).toFixed(1)} k`;

export function formatBranchReport(rows: readonly BranchBenchRow[], options: EvolveBenchOptions): string {
  const shape = branchShapeOf(options);
  const { tree } = shape;
  const lines = [
    `Abandoned branches — ${BRANCH_ENGINES} mixed llama-3.1-8b-h100 engine, tree-search programs for ${options.phaseSeconds} s (Poisson), seed ${options.seed}: a ${shape.firstPromptTokens}-token task, ${tree.rounds} rounds of ${tree.forks} branches × ${tree.branchCalls} calls (${shape.stepTokens} new tokens, ${shape.outputTokens} output a call, tools ${shape.toolMs / 1_000} s ± ${shape.toolSpread * 100} %), ${tree.decisionMs / 1_000} s decision, keep 1 and abandon ${tree.forks - 1}`,
    "",
    "| programs/s | variant | calls | mean e2e | P95 e2e | P95 TTFT | recomputed tokens | GPU prefix hits (tokens) | drops applied (of them branches') | blocks evicted: dropped / LRU / kept | wall |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const row of rows) {
    const a = row.all;
    const kv = a.kv;
    const unfinished = row.programsFinished < row.programs ? ` (${row.programs - row.programsFinished} programs unfinished)` : "";
    lines.push(
      `| ${row.programsPerSec} | ${row.variant} | ${a.calls}${unfinished} | ${s(a.meanE2eMs)} | ${s(a.p95E2eMs)} | ${s(a.p95TtftMs)} | ${millions(kv.recomputedTokens)} | ${millions(kv.gpuHitTokens)} | ${kv.dropsApplied} (${kv.branchDropsApplied}) | ${thousands(kv.evictedDroppedBlocks)} / ${thousands(kv.evictedOrdinaryBlocks)} / ${thousands(kv.evictedKeptBlocks)} | ${(row.wallMs / 1_000).toFixed(1)} s |`,
    );
  }
  lines.push("");
  // The signal's effect: each variant with it against the same variant without, at each rate.
  for (const rate of new Set(rows.map((r) => r.programsPerSec))) {
    for (const [without, withSignal] of [
      ["drops only, no branch signal", "drops only + branch signal"],
      ["retention, no branch signal", "retention + branch signal"],
    ] as const) {
      const a = rows.find((r) => r.programsPerSec === rate && r.variant === without)?.all;
      const b = rows.find((r) => r.programsPerSec === rate && r.variant === withSignal)?.all;
      if (a === undefined || b === undefined) continue;
      lines.push(
        `${rate}/s, ${withSignal.replace(" + branch signal", "")}: signal off → on: recomputed ${millions(a.kv.recomputedTokens)} → ${millions(b.kv.recomputedTokens)}, mean e2e ${s(a.meanE2eMs)} → ${s(b.meanE2eMs)}, P95 TTFT ${s(a.p95TtftMs)} → ${s(b.p95TtftMs)}, LRU evictions ${thousands(a.kv.evictedOrdinaryBlocks)} → ${thousands(b.kv.evictedOrdinaryBlocks)}`,
      );
    }
  }
  return `${lines.join("\n")}\n`;
}
