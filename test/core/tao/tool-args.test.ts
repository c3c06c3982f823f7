import { describe, expect, it } from "vitest";
import { argumentTexts, MAX_SCANNED_CHARS, type ScanWork, setTimeoutDelaysMs, waitInArgumentsMs } from "../../../src/core/tao/tool-args.js";

describe("waits written in tool arguments", () => {
  it.each([
    ['{"command":"sleep 5"}', 5_000],
    ['{"command":"sleep 0.5 && echo hi"}', 500],
    ['{"command":"sleep .25"}', 250],
    ['{"command":"sleep 2m"}', 120_000],
    ['{"cmd":["bash","-lc","sleep 3; make test"]}', 3_000],
    ["sleep 1 && sleep 2", 3_000],
    ["/bin/sleep 4", 4_000],
    ['{"code":"import time\\ntime.sleep(2)\\nprint(1)"}', 2_000],
    ['{"code":"await asyncio.sleep(0.75)"}', 750],
    ['{"code":"Thread.sleep(1500);"}', 1_500],
    ['{"code":"await new Promise((r) => setTimeout(r, 1200));"}', 1_200],
    ['{"code":"setTimeout(() => done(1, 2), 300)"}', 300],
    ['{"script":"Start-Sleep -Seconds 2"}', 2_000],
    ['{"script":"Start-Sleep -Milliseconds 400"}', 400],
    ['{"command":"timeout 30 pytest -x"}', 30_000],
    ['{"command":"timeout -k 5 20s make"}', 20_000],
    ['{"command":"timeout 10 sleep 60"}', 10_000],
    ['{"command":"timeout 60 sleep 10"}', 10_000],
    [{ command: "sleep 7" }, 7_000],
    [{ nested: { deeper: ["x", "sleep 6"] } }, 6_000],
  ])("%j -> %d ms", (args, expected) => {
    expect(waitInArgumentsMs(args)).toBe(expected);
  });

  it.each([
    '{"command":"ls -la"}',
    '{"command":"sleepy 5"}',
    '{"command":"git log --sleep 5"}',
    '{"command":"curl --timeout 5 x"}',
    '{"command":"sleep infinity"}',
    '{"query":"how long to sleep"}',
    "not json {",
    "",
  ])("%j has no wait", (args) => {
    expect(waitInArgumentsMs(args)).toBeUndefined();
  });

  it("ignores non-string values and survives junk", () => {
    expect(waitInArgumentsMs(42)).toBeUndefined();
    expect(waitInArgumentsMs(null)).toBeUndefined();
    expect(waitInArgumentsMs({ n: 5, ok: true })).toBeUndefined();
    expect(waitInArgumentsMs("x".repeat(200_000) + " sleep 3")).toBeUndefined();
  });

  it("reads the delay of nested setTimeout calls, and skips quoted text inside a call", () => {
    expect(setTimeoutDelaysMs("setTimeout(() => setTimeout(r, 100), 200)")).toEqual([100, 200]);
    expect(setTimeoutDelaysMs("setTimeout(() => log(\"a, b\"), 300)")).toEqual([300]);
    expect(setTimeoutDelaysMs("don't setTimeout (f, 50); mysetTimeout(f, 70)")).toEqual([50]);
  });
});

describe("the scan's cost is bounded and linear", () => {
  const MiB = 1024 * 1024;

  it("steps over each character of nested setTimeout calls once (it used to rescan the rest from every call)", () => {
    // 95,000 unclosed calls: the old scan walked to the end from each one, ~5e11 steps.
    const text = "setTimeout(".repeat(95_000);
    const work: ScanWork = { steps: 0 };
    expect(setTimeoutDelaysMs(text, work)).toEqual([]);
    expect(work.steps).toBe(text.length);
  });

  it("scans at most MAX_SCANNED_CHARS of a 1 MiB adversarial argument, and still finds a wait inside them", () => {
    const adversarial = [
      "setTimeout(".repeat(MiB / 11),
      "timeout -a ".repeat(MiB / 11),
      "timeout -k timeout ".repeat(MiB / 19),
      "a.".repeat(MiB / 2),
      `sleep ${"1".repeat(MiB)}x`,
      JSON.stringify({ command: "setTimeout(".repeat(MiB / 11) }),
    ];
    for (const text of adversarial) {
      expect(text.length).toBeGreaterThanOrEqual(MiB - 20);
      expect(argumentTexts(text).reduce((n, t) => n + t.length, 0)).toBeLessThanOrEqual(MAX_SCANNED_CHARS);
      expect(waitInArgumentsMs(text)).toBeUndefined();
      expect(waitInArgumentsMs(`sleep 2 ${text}`)).toBe(2_000);
    }
  });

  it("sees a wait just inside the first MAX_SCANNED_CHARS characters, not one just past them", () => {
    const inside = `${" ".repeat(MAX_SCANNED_CHARS - 20)}sleep 4`;
    const past = `${" ".repeat(MAX_SCANNED_CHARS + 1)}sleep 4`;
    expect(waitInArgumentsMs(inside)).toBe(4_000);
    expect(waitInArgumentsMs(past)).toBeUndefined();
    // Across the strings of an object: the budget is shared.
    expect(waitInArgumentsMs({ pad: "x".repeat(MAX_SCANNED_CHARS - 20), command: "sleep 4" })).toBe(4_000);
    expect(waitInArgumentsMs({ pad: "x".repeat(MAX_SCANNED_CHARS), command: "sleep 4" })).toBeUndefined();
  });

  it("scans JSON longer than the cap as plain text, so a wait early in it is still seen", () => {
    const long = JSON.stringify({ command: "sleep 6 && make", log: "y".repeat(2 * MAX_SCANNED_CHARS) });
    expect(waitInArgumentsMs(long)).toBe(6_000);
  });

  it("visits a bounded number of values of a parsed object", () => {
    const numbers: unknown[] = Array.from({ length: 100_000 }, (_, i) => i);
    expect(waitInArgumentsMs({ values: [...numbers, "sleep 3"] })).toBeUndefined();
    expect(waitInArgumentsMs({ values: [1, 2, 3, "sleep 3"] })).toBe(3_000);
  });
});
