import { type CpuProfile, IDLE, shortUrl } from "./profile-summary.js";

/*
 * Where a proxy's time goes inside the windows the hop trace measured on the wire
 * (hop-trace.ts): its V8 CPU profile's samples, whose timestamps are µs of the same
 * monotonic clock as the trace's (process.hrtime, CLOCK_MONOTONIC), are cut to each
 * call's windows (request in → engine request's first byte; engine's last byte →
 * client's last byte) and summed over calls. A sample stands for the time since the
 * previous one, so the time attributed to a window is its length, whatever it was
 * spent on: code, garbage collection, or "(idle)", the process waiting for the
 * kernel, a timer or the next event-loop turn.
 */

export interface HopWindow {
  phase: "in" | "out";
  /** µs, process.hrtime's clock. */
  startUs: number;
  endUs: number;
}

export interface PhaseBreakdown {
  phase: HopWindow["phase"];
  calls: number;
  /** Mean µs per call of the whole window. */
  meanUs: number;
  /** [innermost repository function on the stack (else the leaf's module), mean µs per call], largest first. */
  byOwner: [string, number][];
  /** [leaf function, mean µs per call], largest first. */
  bySelf: [string, number][];
}

type Node = CpuProfile["nodes"][number];

function frameName(node: Node): string {
  const { functionName, url, lineNumber } = node.callFrame;
  if (url === "") return functionName || "(native)";
  return `${functionName || "(anonymous)"} ${shortUrl(url)}:${lineNumber + 1}`;
}

/** The module a frame belongs to when no repository frame is on the stack: node's own, or an npm package. */
function moduleOf(url: string): string {
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/").slice(0, 2).join("/")}`;
  const npm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  return npm ? `npm:${npm[1]}` : shortUrl(url) || "(native)";
}

/** Owner of a sample: the innermost frame of this repository's src/, else the leaf's module (or pseudo-frame). */
function ownerOf(leaf: Node, byId: Map<number, Node>, parentOf: Map<number, number>): string {
  if (IDLE.has(leaf.callFrame.functionName) || leaf.callFrame.functionName === "(garbage collector)") return leaf.callFrame.functionName;
  for (let at: number | undefined = leaf.id; at !== undefined; at = parentOf.get(at)) {
    const node = byId.get(at);
    if (node && /\/src\//.test(node.callFrame.url) && !node.callFrame.url.includes("node_modules")) return frameName(node);
  }
  const url = leaf.callFrame.url;
  return url === "" ? `${leaf.callFrame.functionName || "(native)"} (native, no repository frame)` : `${moduleOf(url)} (no repository frame)`;
}

/** Sums the profile's time inside `windows` (sorted by start, not overlapping), per phase. */
export function breakDownWindows(profile: CpuProfile, windows: readonly HopWindow[], top: number): PhaseBreakdown[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

  const totals = { in: { owner: new Map<string, number>(), self: new Map<string, number>(), us: 0, calls: 0 }, out: { owner: new Map<string, number>(), self: new Map<string, number>(), us: 0, calls: 0 } };
  for (const window of windows) totals[window.phase].calls += 1;
  const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us);

  let at = profile.startTime;
  let w = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const from = at;
    at += profile.timeDeltas[i] ?? 0;
    const leaf = byId.get(profile.samples[i] ?? -1);
    if (leaf === undefined) continue;
    // The sample stands for (from, at]; add its overlap with every window it crosses.
    while (w < windows.length && (windows[w]?.endUs ?? 0) <= from) w++;
    for (let k = w; k < windows.length; k++) {
      const window = windows[k];
      if (window === undefined || window.startUs >= at) break;
      const us = Math.min(at, window.endUs) - Math.max(from, window.startUs);
      if (us <= 0) continue;
      const phase = totals[window.phase];
      phase.us += us;
      add(phase.owner, ownerOf(leaf, byId, parentOf), us);
      add(phase.self, frameName(leaf), us);
    }
  }
  const ranked = (map: Map<string, number>, calls: number): [string, number][] =>
    [...map].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, us]) => [name, us / Math.max(1, calls)]);
  return (["in", "out"] as const).map((phase) => ({
    phase,
    calls: totals[phase].calls,
    meanUs: totals[phase].us / Math.max(1, totals[phase].calls),
    byOwner: ranked(totals[phase].owner, totals[phase].calls),
    bySelf: ranked(totals[phase].self, totals[phase].calls),
  }));
}

export function formatPhaseBreakdown(breakdown: PhaseBreakdown): string {
  const title =
    breakdown.phase === "in"
      ? "request's arrival → engine request's first byte"
      : "engine's last byte → client's last byte";
  const rows = (entries: [string, number][]) => entries.map(([name, us]) => `${us.toFixed(1).padStart(8)} µs  ${name}`);
  return [
    `${title}: ${breakdown.meanUs.toFixed(1)} µs per call in the profile (${breakdown.calls} calls)`,
    "  by owner (innermost repository function on the stack; else the leaf's module):",
    ...rows(breakdown.byOwner).map((row) => `  ${row}`),
    "  by leaf function:",
    ...rows(breakdown.bySelf).map((row) => `  ${row}`),
  ].join("\n");
}
