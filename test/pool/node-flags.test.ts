import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { poolNodeFlagsOf } from "../../src/cli/bench/proxy-server-process.js";
import { projectRoot } from "../../src/cli/bench/proxy-run.js";
import { POOL_NODE_FLAGS } from "../../src/pool/node-flags.js";

/*
 * The pool core's node flags (src/pool/node-flags.ts): what `npm run pool` runs with,
 * what the benchmarks' pool processes run with, and that this Node takes them.
 */

describe("POOL_NODE_FLAGS", () => {
  it("are the flags of `npm run pool`", () => {
    const scripts = (JSON.parse(readFileSync(path.join(projectRoot, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    expect(scripts.pool).toBe(`node ${POOL_NODE_FLAGS.join(" ")} --import tsx src/pool/main.ts`);
  });

  it("are what a benchmark's pool process runs with: this tree's, or none from a tree before them", async () => {
    expect(await poolNodeFlagsOf(undefined)).toEqual(POOL_NODE_FLAGS);
    expect(await poolNodeFlagsOf(projectRoot)).toEqual(POOL_NODE_FLAGS);
    expect(await poolNodeFlagsOf(mkdtempSync(path.join(tmpdir(), "agentix-no-flags-")))).toEqual([]);
  });

  it("give a young generation past Node's default 2 × 16 MiB when its objects survive", { timeout: 30_000 }, () => {
    // Objects kept alive across scavenges make V8 grow the young generation to its bound.
    const script = `
      const v8 = require("node:v8");
      let most = 0, kept = [];
      for (let i = 0; i < 4e6; i++) {
        kept.push({ i });
        if (kept.length > 300000) kept = [];
        if (i % 10000 === 0) most = Math.max(most, v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_size);
      }
      console.log(most / 2 ** 20);`;
    const youngMiB = (flags: readonly string[]) => Number(execFileSync(process.execPath, [...flags, "-e", script], { encoding: "utf8" }).trim());
    expect(youngMiB([])).toBeLessThanOrEqual(32);
    // Past the default's bound is the flag at work; how far V8 grows it depends on the machine's timing (64 or 128 MiB here).
    expect(youngMiB(POOL_NODE_FLAGS)).toBeGreaterThan(32);
  });
});
