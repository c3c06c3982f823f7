import { simulateEvolvingPool, summarise, type EvolveCallRecord } from "./src/sim/evolve/pd-simulation.js";
import { shiftingWorkload } from "./src/sim/evolve/workload.js";
const P = 45_000;
const programs = shiftingWorkload([
  { kind: "math", durationMs: P, programsPerSec: 2 },
  { kind: "computer-use", durationMs: P, programsPerSec: 3 },
  { kind: "coding-long", durationMs: P, programsPerSec: 2 },
], 7);
const variants = process.argv.slice(2);
for (const v of variants) {
  const host = v === "tier" ? { hostTier: true, hostWritePolicy: "write-through" as const } : {};
  const policy = v === "fixed" ? { kind: "fixed" as const, prefillEngines: 4 } : { kind: "ratio" as const, prefillEngines: 2 };
  const r = simulateEvolvingPool({ engines: 8, profile: "llama-3.1-8b-h100", programs, policy, ...host, retention: false });
  const sum = summarise(r);
  const byKind = new Map<string, EvolveCallRecord[]>();
  for (const c of r.calls) byKind.set(c.kind, [...(byKind.get(c.kind) ?? []), c]);
  console.log(`\n== ${v}: mean e2e ${(sum.meanE2eMs / 1000).toFixed(2)} s, p95 ttft ${(sum.p95TtftMs / 1000).toFixed(2)}`);
  for (const [kind, calls] of byKind) {
    const byProg = new Map<string, EvolveCallRecord[]>();
    for (const c of calls) byProg.set(c.programId + c.threadId, [...(byProg.get(c.programId + c.threadId) ?? []), c]);
    let moved = 0, stayed = 0, computedMoved = 0, computedStayed = 0, later = 0;
    for (const list of byProg.values()) {
      list.sort((a, b) => a.arrivalMs - b.arrivalMs);
      for (let i = 1; i < list.length; i++) {
        later++;
        if (list[i]!.prefillEngineId !== list[i - 1]!.prefillEngineId) { moved++; computedMoved += list[i]!.computedPromptTokens; }
        else { stayed++; computedStayed += list[i]!.computedPromptTokens; }
      }
    }
    const mean = (f: (c: EvolveCallRecord) => number) => (calls.reduce((a, c) => a + f(c), 0) / calls.length / 1000).toFixed(2);
    const prompt = calls.reduce((a, c) => a + c.promptTokens, 0), computed = calls.reduce((a, c) => a + c.computedPromptTokens, 0);
    console.log(`${kind}: calls ${calls.length}, e2e ${mean((c) => c.finishMs - c.arrivalMs)} s, queue ${mean((c) => c.dispatchMs - c.arrivalMs)} s, prefill(dispatch→ft) ${mean((c) => c.firstTokenMs - c.dispatchMs)} s, decode ${mean((c) => c.finishMs - c.firstTokenMs)} s; later calls ${later}: moved ${moved} (computed ${(computedMoved / 1e6).toFixed(2)} M), stayed ${stayed} (computed ${(computedStayed / 1e6).toFixed(2)} M); prompt ${(prompt / 1e6).toFixed(2)} M computed ${(computed / 1e6).toFixed(2)} M`);
  }
  const sw = r.switches.map((s) => `${(s.atMs / 1000).toFixed(0)}s ${s.engineId} ${s.from}->${s.to}`).join(", ");
  console.log(`switches: ${sw}`);
}
