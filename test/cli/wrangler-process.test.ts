import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { forwardLines } from "../../src/cli/wrangler-process.js";

/*
 * wrangler's output pipes must be read even when nobody wants the lines: a child
 * writing to a full pipe blocks (Node writes to pipes synchronously), and a blocked
 * wrangler wedges the workerd processes it reads from, so the edge stops answering.
 */

const WRITER = `
const chunk = "x".repeat(64 * 1024) + "\\n";
for (let i = 0; i < 32; i++) { process.stdout.write(chunk); process.stderr.write(chunk); }
`;

function exitOf(child: ReturnType<typeof spawn>): Promise<number | null> {
  return new Promise((resolve) => child.on("exit", (code) => resolve(code)));
}

describe("wrangler child output", () => {
  it("is drained without a listener, so a child writing megabytes still finishes", async () => {
    const child = spawn(process.execPath, ["-e", WRITER], { stdio: ["ignore", "pipe", "pipe"] });
    forwardLines(child);
    const exited = exitOf(child);
    const outcome = await Promise.race([exited, new Promise<"blocked">((resolve) => setTimeout(() => resolve("blocked"), 5_000))]);
    if (outcome === "blocked") child.kill("SIGKILL");
    expect(outcome).toBe(0);
  });

  it("is passed on line by line to a listener", async () => {
    const child = spawn(process.execPath, ["-e", `process.stdout.write("one\\ntw"); setTimeout(() => process.stdout.write("o\\n\\nthree\\n"), 20); process.stderr.write("err\\n");`], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const lines: string[] = [];
    forwardLines(child, (line) => lines.push(line));
    // "close": the process has exited and its output streams have ended.
    await new Promise((resolve) => child.on("close", resolve));
    expect([...lines].sort()).toEqual(["err", "one", "three", "two"]);
  });
});
