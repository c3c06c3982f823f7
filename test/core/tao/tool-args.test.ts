import { describe, expect, it } from "vitest";
import { waitInArgumentsMs } from "../../../src/core/tao/tool-args.js";

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
});
