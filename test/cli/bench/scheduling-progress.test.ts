import { describe, expect, it } from "vitest";
import { BenchProgress } from "../../../src/cli/bench/scheduling-progress.js";

function sink(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, write: (text: string) => writes.push(text), isTTY, columns: 200 };
}

describe("BenchProgress", () => {
  it("on a terminal: one bar redrawn in place, throttled, cleared at the end", () => {
    let now = 0;
    const out = sink(true);
    const progress = new BenchProgress(out, 4, () => now);
    progress.startRun("plas @ 1 prog/s", 100);
    expect(out.writes).toHaveLength(1);
    progress.update({ simMs: 1000, finishedPrograms: 50, totalPrograms: 100 });
    expect(out.writes).toHaveLength(1); // throttled: same instant
    now = 150;
    progress.update({ simMs: 2000, finishedPrograms: 50, totalPrograms: 100 });
    expect(out.writes).toHaveLength(2);
    const bar = out.writes[1] as string;
    expect(bar.startsWith("\r\x1b[2K")).toBe(true);
    expect(bar).not.toContain("\n");
    // Half of the first of four runs: 12 %.
    expect(bar).toMatch(/ 12%  run 1\/4  plas @ 1 prog\/s  50\/100 programs/);
    progress.endRun("done");
    now = 400;
    progress.addRuns(1);
    progress.startRun("atlas @ 1 prog/s", 100);
    expect(out.writes.at(-1)).toMatch(/ 20%  run 2\/5  atlas/);
    progress.finish();
    expect(out.writes.at(-1)).toBe("\r\x1b[2K");
  });

  it("elsewhere: a plain line per finished run and a heartbeat during long runs", () => {
    let now = 0;
    const out = sink(false);
    const progress = new BenchProgress(out, 2, () => now);
    progress.startRun("fcfs-rr batch", 10);
    now = 5_000;
    progress.update({ simMs: 60_000, finishedPrograms: 3, totalPrograms: 10 });
    expect(out.writes).toEqual([]);
    now = 16_000;
    progress.update({ simMs: 120_000, finishedPrograms: 6, totalPrograms: 10 });
    expect(out.writes).toEqual(["  … fcfs-rr batch: 6/10 programs, 2m00s simulated\n"]);
    now = 20_000;
    progress.endRun("10/10 finished");
    expect(out.writes.at(-1)).toBe("[1/2] fcfs-rr batch: 10/10 finished (20s elapsed)\n");
    progress.finish();
    expect(out.writes.join("")).not.toMatch(/\r|\x1b/);
  });
});
