import { execFileSync } from "node:child_process";
import { existsSync, readlinkSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { breakDownWindows } from "../../../src/cli/bench/hop-profile.js";
import { HttpResponseReader } from "../../../src/cli/bench/hop-response-reader.js";
import { runInterleaved } from "../../../src/cli/bench/hop-round.js";
import { parseHopTraceArgs, runHopTrace } from "../../../src/cli/bench/hop-trace.js";
import type { CpuProfile } from "../../../src/cli/bench/profile-summary.js";
import { projectRoot } from "../../../src/cli/bench/proxy-run.js";
import { sourceTreeOf } from "../../../src/cli/bench/source-tree.js";

/*
 * The hop trace (`npm run bench:hop`): where a response ends on a raw socket, how a CPU
 * profile's samples are cut to the traced windows, a short real run, and a baseline
 * tree taken from a git revision.
 */

const feed = (reader: HttpResponseReader, text: string, cuts: number[]) => {
  const bytes = Buffer.from(text, "utf8");
  const bounds = [0, ...cuts, bytes.length];
  const progress = [];
  for (let i = 0; i < bounds.length - 1; i++) progress.push(reader.push(bytes.subarray(bounds[i], bounds[i + 1])));
  return progress;
};

describe("HttpResponseReader", () => {
  it("ends a Content-Length response at its last byte, whatever the chunks", () => {
    const response = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 11\r\n\r\n{\"a\":\"é!\"}";
    const progress = feed(new HttpResponseReader(), response, [10, 60, response.length - 2]);
    expect(progress.map((p) => p.done)).toEqual([false, false, false, true]);
    expect(progress.at(-1)).toEqual({ done: true, status: 200, body: '{"a":"é!"}' });
  });

  it("ends a chunked response at its last chunk, not at a chunk that looks like one", () => {
    const body = ["data: 0\r\n\r\n", "data: [DONE]\n\n"];
    const chunked = body.map((part) => `${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`).join("");
    const response = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}0\r\n\r\n`;
    const reader = new HttpResponseReader();
    const progress = feed(reader, response, [5, 45, 52, response.length - 2]);
    expect(progress.slice(0, -1).every((p) => !p.done)).toBe(true);
    expect(progress.at(-1)).toEqual({ done: true, status: 200, body: body.join("") });
    // Ready for the next response on the same connection.
    expect(feed(reader, "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n", []).at(-1)).toEqual({ done: true, status: 404, body: "" });
  });
});

describe("breakDownWindows", () => {
  // root → handler (src/pool/x.ts) → writev (native); and (idle).
  const profile: CpuProfile = {
    startTime: 1_000,
    nodes: [
      { id: 1, callFrame: { functionName: "(root)", url: "", lineNumber: -1 }, children: [2, 4] },
      { id: 2, callFrame: { functionName: "handle", url: "file:///repo/src/pool/x.ts", lineNumber: 9 }, children: [3] },
      { id: 3, callFrame: { functionName: "writev", url: "", lineNumber: -1 } },
      { id: 4, callFrame: { functionName: "(idle)", url: "", lineNumber: -1 } },
    ],
    // Samples at 1010 (idle), 1020 (handle), 1030 (writev), 1040 (idle), 1050 (handle).
    samples: [4, 2, 3, 4, 2],
    timeDeltas: [10, 10, 10, 10, 10],
  };

  it("gives each window the overlap of the samples that cross it, by owner and by leaf", () => {
    const [inWindow, outWindow] = breakDownWindows(
      profile,
      [
        { phase: "in", startUs: 1_005, endUs: 1_030 },
        { phase: "out", startUs: 1_045, endUs: 1_050 },
      ],
      10,
    );
    // (1005, 1010] idle 5, (1010, 1020] handle 10, (1020, 1030] writev under handle 10.
    expect(inWindow?.meanUs).toBe(25);
    expect(inWindow?.byOwner).toEqual([
      ["handle src/pool/x.ts:10", 20],
      ["(idle)", 5],
    ]);
    expect(inWindow?.bySelf).toEqual([
      ["handle src/pool/x.ts:10", 10],
      ["writev", 10],
      ["(idle)", 5],
    ]);
    expect(outWindow).toMatchObject({ meanUs: 5, byOwner: [["handle src/pool/x.ts:10", 5]] });
  });
});

describe("bench:hop", () => {
  it("traces the engine direct, the node proxy and the pool on real sockets", { timeout: 60_000 }, async () => {
    const options = parseHopTraceArgs(["--calls", "40", "--rounds", "2", "--warmup", "5"], projectRoot);
    if (options === undefined) throw new Error("no options");
    const report = await runHopTrace(options, () => undefined);
    for (const target of ["(a) engine", "(n) node proxy", "(b) pool"]) {
      const label = target.replace(/[()]/g, "\\$&");
      for (const mode of ["non-streaming", "streaming"]) expect(report).toMatch(new RegExp(`^${mode}\\s+${label}`, "m"));
    }
    // The pool's hop adds to the engine's, in and out.
    const pool = /non-streaming\s+\(b\) pool\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+\+(-?\d+)\s+\+(-?\d+)/.exec(report);
    expect(pool).not.toBeNull();
    expect(Number(pool?.[4])).toBeGreaterThan(0);
    expect(Number(pool?.[5])).toBeGreaterThan(0);
  });
});

describe("sourceTreeOf", () => {
  it("takes a directory as it is and a git revision as an extracted tree with node_modules", () => {
    expect(sourceTreeOf(projectRoot, projectRoot)).toBe(projectRoot);
    const head = execFileSync("git", ["-C", projectRoot, "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
    const tree = sourceTreeOf(head.slice(0, 10), projectRoot);
    expect(existsSync(path.join(tree, "src/cli/bench/proxy-server-child.ts"))).toBe(true);
    expect(readlinkSync(path.join(tree, "node_modules"))).toBe(path.join(projectRoot, "node_modules"));
    expect(() => sourceTreeOf("no-such-revision-or-dir", projectRoot)).toThrow(/neither a directory nor a git revision/);
  });

  it("re-points a kept tree's node_modules that another checkout of the repository linked to its own", () => {
    const head = execFileSync("git", ["-C", projectRoot, "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
    const tree = sourceTreeOf(head, projectRoot);
    const link = path.join(tree, "node_modules");
    rmSync(link);
    symlinkSync("/nonexistent-clone/node_modules", link);
    expect(sourceTreeOf(head, projectRoot)).toBe(tree);
    expect(readlinkSync(link)).toBe(path.join(projectRoot, "node_modules"));
  });
});

describe("runInterleaved", () => {
  /** A target's round that notes each slice it runs, and may fail at one. */
  const fakeRun = (name: string, calls: number, log: string[], failAt?: number) => {
    let remaining = calls;
    const run = {
      closed: false,
      get remaining() {
        return remaining;
      },
      async runSlice(count: number) {
        const ran = Math.min(count, remaining);
        if (failAt !== undefined && calls - remaining + ran > failAt) throw new Error(`${name} failed`);
        remaining -= ran;
        log.push(`${name}${ran}`);
      },
      close() {
        run.closed = true;
      },
    };
    return run;
  };

  it("gives each target a slice in turn, the first moving on each slice and each round, to its last call", async () => {
    const log: string[] = [];
    await runInterleaved([fakeRun("a", 5, log), fakeRun("b", 5, log), fakeRun("c", 3, log)], 2, 1, () => undefined);
    expect(log).toEqual(["b2", "c2", "a2", "c1", "a2", "b2", "a1", "b1"]);
  });

  it("closes every target's connection when a call fails", async () => {
    const runs = [fakeRun("a", 4, []), fakeRun("b", 4, [], 2)];
    await expect(runInterleaved(runs, 2, 0, () => undefined)).rejects.toThrow("b failed");
    expect(runs.map((run) => run.closed)).toEqual([true, true]);
  });
});
