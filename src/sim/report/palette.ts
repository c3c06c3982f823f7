/*
 * One colour per policy, the same in every chart. Known policies get fixed colours
 * (baselines muted, Agentix strong); others take the fallback cycle.
 */

const FIXED: Record<string, string> = {
  "fcfs-rr": "#7f7f7f",
  "fcfs-least-loaded": "#8c564b",
  "request-mlq": "#ff7f0e",
  plas: "#2ca02c",
  atlas: "#1f77b4",
  agentix: "#d62728",
  oracle: "#9467bd",
};

const FALLBACK = ["#17becf", "#bcbd22", "#e377c2", "#393b79", "#637939", "#8c6d31"];

export function policyColors(policies: readonly string[]): Map<string, string> {
  const colors = new Map<string, string>();
  let next = 0;
  for (const policy of policies) {
    colors.set(policy, FIXED[policy] ?? (FALLBACK[next++ % FALLBACK.length] as string));
  }
  return colors;
}

/** The policy the report is about: drawn thicker. */
export const EMPHASISED_POLICY = "agentix";
