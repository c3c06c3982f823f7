/*
 * Waits written into a tool call's arguments: `sleep N` / `timeout N` in shell text,
 * `time.sleep(N)` / `asyncio.sleep(N)` in Python, `setTimeout(fn, N)` in JavaScript,
 * `Start-Sleep` in PowerShell. An agent that writes "sleep 30 && make" tells us how
 * long the tool will take better than any history can.
 *
 * Arguments arrive as OpenAI's JSON string ("{\"command\":\"sleep 5\"}"), as an
 * already parsed object, or as plain command text; every string value inside is
 * scanned (bounded, since arguments come from clients).
 *
 * Sleeps are summed (a script runs them one after another); a `timeout N` bounds the
 * whole: with sleeps the estimate is min(sum, largest timeout), without, the timeout.
 */

/** Text scanned at most (characters), and nesting followed at most. */
const MAX_SCANNED_CHARS = 64 * 1024;
const MAX_DEPTH = 8;

const UNIT_MS: Record<string, number> = { "": 1_000, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

const NUMBER = String.raw`(\d+(?:\.\d*)?|\.\d+)`;
/** `sleep 5`, `sleep 0.5s`, `sleep 2m` as a shell word (not `xsleep`, not `sleep(`). */
const SHELL_SLEEP = new RegExp(String.raw`(?<![\w.\-])sleep\s+${NUMBER}([smhd]?)(?![\w.])`, "g");
/** `timeout 30 cmd`, `timeout -k 5 30 cmd`, `timeout --preserve-status 10s cmd`. */
const SHELL_TIMEOUT = new RegExp(String.raw`(?<![\w.\-])timeout\s+(?:-{1,2}[a-zA-Z][\w-]*(?:[= ][^\s-]\S*)?\s+)*${NUMBER}([smhd]?)(?![\w.])`, "g");
/** `time.sleep(2)`, `asyncio.sleep(0.5)`, `sleep(3)`: seconds; Java's `Thread.sleep(500)`: milliseconds. */
const CALL_SLEEP = new RegExp(String.raw`(?<![\w$])([\w$]+\.)?sleep\(\s*${NUMBER}\s*\)`, "g");
/** PowerShell: `Start-Sleep 5`, `Start-Sleep -Seconds 5`, `Start-Sleep -Milliseconds 500`. */
const START_SLEEP = new RegExp(String.raw`\bStart-Sleep\s+(?:-(s|seconds|m|milliseconds)\s+)?${NUMBER}`, "gi");
const SET_TIMEOUT = /\bsetTimeout\s*\(/g;

function collectStrings(value: unknown, out: string[], budget: { chars: number }, depth: number): void {
  if (budget.chars <= 0 || depth > MAX_DEPTH) return;
  if (typeof value === "string") {
    const text = value.length > budget.chars ? value.slice(0, budget.chars) : value;
    budget.chars -= text.length;
    out.push(text);
    return;
  }
  if (Array.isArray(value)) {
    for (const item of value) collectStrings(item, out, budget, depth + 1);
    return;
  }
  if (typeof value === "object" && value !== null) {
    for (const item of Object.values(value)) collectStrings(item, out, budget, depth + 1);
  }
}

/** The argument texts to scan: the strings inside JSON arguments, or the text itself. */
export function argumentTexts(args: unknown): string[] {
  let value = args;
  if (typeof args === "string") {
    const trimmed = args.trimStart();
    if (trimmed.startsWith("{") || trimmed.startsWith("[") || trimmed.startsWith('"')) {
      try {
        value = JSON.parse(args.length > MAX_SCANNED_CHARS ? "" : args);
      } catch {
        value = args;
      }
    }
  }
  const out: string[] = [];
  collectStrings(value, out, { chars: MAX_SCANNED_CHARS }, 0);
  return out;
}

/** The delay argument of each `setTimeout(callback, N)`: found by skipping the callback with bracket depth. */
function setTimeoutDelaysMs(text: string): number[] {
  const delays: number[] = [];
  for (const match of text.matchAll(SET_TIMEOUT)) {
    let i = match.index + match[0].length;
    let depth = 0;
    let quote: string | undefined;
    let comma = -1;
    for (; i < text.length; i++) {
      const ch = text[i] as string;
      if (quote !== undefined) {
        if (ch === "\\") i++;
        else if (ch === quote) quote = undefined;
        continue;
      }
      if (ch === '"' || ch === "'" || ch === "`") quote = ch;
      else if (ch === "(" || ch === "[" || ch === "{") depth++;
      else if (ch === ")" || ch === "]" || ch === "}") {
        if (depth === 0) break;
        depth--;
      } else if (ch === "," && depth === 0) {
        comma = i;
        break;
      }
    }
    if (comma < 0) continue;
    const delay = /^\s*(\d+(?:\.\d*)?)\s*[,)]/.exec(text.slice(comma + 1, comma + 40));
    if (delay?.[1] !== undefined) delays.push(Number(delay[1]));
  }
  return delays;
}

/** Milliseconds of waiting written in the arguments, or undefined when none is found. */
export function waitInArgumentsMs(args: unknown): number | undefined {
  let sleepsMs = 0;
  let sawSleep = false;
  let timeoutMs: number | undefined;
  for (const text of argumentTexts(args)) {
    for (const m of text.matchAll(SHELL_SLEEP)) {
      sleepsMs += Number(m[1]) * (UNIT_MS[m[2] ?? ""] ?? 1_000);
      sawSleep = true;
    }
    for (const m of text.matchAll(CALL_SLEEP)) {
      sleepsMs += Number(m[2]) * (m[1] === "Thread." ? 1 : 1_000);
      sawSleep = true;
    }
    for (const m of text.matchAll(START_SLEEP)) {
      const unit = (m[1] ?? "s").toLowerCase();
      sleepsMs += Number(m[2]) * (unit === "m" || unit === "milliseconds" ? 1 : 1_000);
      sawSleep = true;
    }
    for (const delay of setTimeoutDelaysMs(text)) {
      sleepsMs += delay;
      sawSleep = true;
    }
    for (const m of text.matchAll(SHELL_TIMEOUT)) {
      const ms = Number(m[1]) * (UNIT_MS[m[2] ?? ""] ?? 1_000);
      timeoutMs = timeoutMs === undefined ? ms : Math.max(timeoutMs, ms);
    }
  }
  if (!sawSleep) return timeoutMs;
  if (!Number.isFinite(sleepsMs)) return undefined;
  return timeoutMs === undefined ? sleepsMs : Math.min(sleepsMs, timeoutMs);
}
