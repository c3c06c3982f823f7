import { z } from "zod";

/*
 * Summarises a V8 CPU profile (`node --cpu-prof`, as `npm run bench:proxy -- --cpu-profile DIR`
 * writes for the pool core): where the process's busy time went, by function (self time) and
 * by source file of this repository (inclusive: time in the file or in what it called), as
 * shares of busy time, so two runs on differently loaded machines compare.
 *
 *   npm run bench:profile -- DIR/CPU.….cpuprofile [top N]
 */

const CpuProfile = z.object({
  nodes: z.array(
    z.object({
      id: z.int(),
      callFrame: z.object({ functionName: z.string(), url: z.string(), lineNumber: z.int() }),
      children: z.array(z.int()).optional(),
    }),
  ),
  /** µs of V8's monotonic clock (CLOCK_MONOTONIC on Linux, process.hrtime's) at the first sample. */
  startTime: z.number(),
  samples: z.array(z.int()),
  timeDeltas: z.array(z.number()),
});
type CpuProfile = z.infer<typeof CpuProfile>;

/** V8's pseudo-frames that are not work of the process's own code. */
export const IDLE = new Set(["(idle)", "(program)"]);

export interface ProfileSummary {
  busyMs: number;
  idleMs: number;
  /** [function at file:line, share of busy time], largest first. */
  selfByFunction: [string, number][];
  /** [repository source file, share of busy time spent in it or below it], largest first. */
  inclusiveBySourceFile: [string, number][];
}

export const shortUrl = (url: string) => url.replace(/^.*node_modules\//, "npm:").replace(/^.*?\/(src\/)/, "$1");

export function summariseProfile(profile: CpuProfile, top: number): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

  let busyUs = 0;
  let idleUs = 0;
  const byFunction = new Map<string, number>();
  const bySourceFile = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)?.callFrame;
    if (!frame) continue;
    if (IDLE.has(frame.functionName)) {
      idleUs += us;
      continue;
    }
    busyUs += us;
    const name = `${frame.functionName || "(anonymous)"} ${shortUrl(frame.url) || "(native)"}:${frame.lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    // Each source file on the sample's stack once, however often it recurs.
    const files = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      const url = byId.get(at)?.callFrame.url ?? "";
      if (/\/src\//.test(url) && !url.includes("node_modules")) files.add(shortUrl(url));
    }
    for (const file of files) bySourceFile.set(file, (bySourceFile.get(file) ?? 0) + us);
  }
  const ranked = (m: Map<string, number>): [string, number][] =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, us]) => [name, busyUs === 0 ? 0 : us / busyUs]);
  return { busyMs: busyUs / 1_000, idleMs: idleUs / 1_000, selfByFunction: ranked(byFunction), inclusiveBySourceFile: ranked(bySourceFile) };
}

export function formatProfileSummary(summary: ProfileSummary): string {
  const rows = (entries: [string, number][]) => entries.map(([name, share]) => `${(100 * share).toFixed(1).padStart(6)} %  ${name}`);
  return [
    `busy ${(summary.busyMs / 1_000).toFixed(2)} s, idle ${(summary.idleMs / 1_000).toFixed(2)} s`,
    "self time by function (share of busy time):",
    ...rows(summary.selfByFunction),
    "inclusive time by source file (share of busy time):",
    ...rows(summary.inclusiveBySourceFile),
  ].join("\n");
}

export { CpuProfile };
