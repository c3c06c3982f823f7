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

/*
 * Cost. Arguments come from clients, so every step here is linear in the text and
 * the text is bounded: at most MAX_SCANNED_CHARS characters are scanned in all (a
 * wait written after them is not seen), at most MAX_VISITED_VALUES values of a
 * parsed object are visited, and every quantifier of the patterns below is bounded,
 * so one match attempt costs a constant and a scan is O(characters). The
 * setTimeout scan is a single pass with a bracket stack (it used to rescan the rest
 * of the text from every `setTimeout(`, quadratic on nested calls).
 */

/** Text scanned at most (characters), nesting followed at most, and values of a parsed object visited at most. */
export const MAX_SCANNED_CHARS = 64 * 1024;
const MAX_DEPTH = 8;
const MAX_VISITED_VALUES = 4_096;

const UNIT_MS: Record<string, number> = { "": 1_000, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration: at most 12 digits before and after the point (a longer run is no wait anyone wrote). */
const NUMBER = String.raw`(\d{1,12}(?:\.\d{0,12})?|\.\d{1,12})`;
/** Blanks between words: bounded like everything else. */
const GAP = String.raw`\s{1,32}`;
/** `sleep 5`, `sleep 0.5s`, `sleep 2m` as a shell word (not `xsleep`, not `sleep(`). */
const SHELL_SLEEP = new RegExp(String.raw`(?<![\w.\-])sleep${GAP}${NUMBER}([smhd]?)(?![\w.])`, "g");
/**
 * `timeout 30 cmd`, `timeout -k 5 30 cmd`, `timeout --preserve-status 10s cmd`: at most
 * four options, each of bounded length.
 */
const SHELL_TIMEOUT = new RegExp(
  String.raw`(?<![\w.\-])timeout${GAP}(?:-{1,2}[a-zA-Z][\w-]{0,31}(?:[= ][^\s-]\S{0,63})?${GAP}){0,4}${NUMBER}([smhd]?)(?![\w.])`,
  "g",
);
/** `time.sleep(2)`, `asyncio.sleep(0.5)`, `sleep(3)`: seconds; Java's `Thread.sleep(500)`: milliseconds. */
const CALL_SLEEP = new RegExp(String.raw`(?<![\w$])([\w$]{1,64}\.)?sleep\(\s{0,32}${NUMBER}\s{0,32}\)`, "g");
/** PowerShell: `Start-Sleep 5`, `Start-Sleep -Seconds 5`, `Start-Sleep -Milliseconds 500`. */
const START_SLEEP = new RegExp(String.raw`\bStart-Sleep${GAP}(?:-(s|seconds|m|milliseconds)${GAP})?${NUMBER}`, "gi");
const SET_TIMEOUT = "setTimeout";
/** The delay after setTimeout's first top-level comma: read from at most this many characters. */
const DELAY_WINDOW_CHARS = 40;
const SET_TIMEOUT_DELAY = /^\s{0,16}(\d{1,12}(?:\.\d{0,12})?)\s{0,16}[,)]/;

interface ScanBudget {
  chars: number;
  values: number;
}

function collectStrings(value: unknown, out: string[], budget: ScanBudget, depth: number): void {
  if (budget.chars <= 0 || budget.values <= 0 || depth > MAX_DEPTH) return;
  budget.values -= 1;
  if (typeof value === "string") {
    const text = value.length > budget.chars ? value.slice(0, budget.chars) : value;
    budget.chars -= text.length;
    out.push(text);
    return;
  }
  if (Array.isArray(value)) {
    for (const item of value) {
      if (budget.chars <= 0 || budget.values <= 0) return;
      collectStrings(item, out, budget, depth + 1);
    }
    return;
  }
  if (typeof value === "object" && value !== null) {
    for (const key in value) {
      if (budget.chars <= 0 || budget.values <= 0) return;
      if (Object.hasOwn(value, key)) collectStrings((value as Record<string, unknown>)[key], out, budget, depth + 1);
    }
  }
}

/** The first character that is not blank, looking at most MAX_SCANNED_CHARS in. */
function firstNonBlank(text: string): string | undefined {
  const end = Math.min(text.length, MAX_SCANNED_CHARS);
  for (let i = 0; i < end; i++) {
    const ch = text[i] as string;
    if (ch !== " " && ch !== "\t" && ch !== "\n" && ch !== "\r") return ch;
  }
  return undefined;
}

/**
 * The argument texts to scan: the strings inside JSON arguments, or the text itself.
 * JSON longer than MAX_SCANNED_CHARS is not parsed: its first MAX_SCANNED_CHARS
 * characters are scanned as plain text.
 */
export function argumentTexts(args: unknown): string[] {
  let value = args;
  if (typeof args === "string" && args.length <= MAX_SCANNED_CHARS) {
    const first = firstNonBlank(args);
    if (first === "{" || first === "[" || first === '"') {
      try {
        value = JSON.parse(args);
      } catch {
        value = args;
      }
    }
  }
  const out: string[] = [];
  collectStrings(value, out, { chars: MAX_SCANNED_CHARS, values: MAX_VISITED_VALUES }, 0);
  return out;
}

/** Work done by a setTimeout scan, for tests: characters the pass stepped over. */
export interface ScanWork {
  steps: number;
}

/** An open bracket of the setTimeout scan: a plain one, or a setTimeout call before or after its first comma. */
type Frame = "plain" | "call" | "call-after-comma";

/**
 * The delay argument of each `setTimeout(callback, N)`, in one pass over the text: a
 * stack of open brackets, each remembering whether it opened a setTimeout call; the
 * first comma at a call's own depth is followed by its delay (read from a window of
 * DELAY_WINDOW_CHARS). Every character is stepped over once; the look back for the
 * word `setTimeout` before a `(` is bounded. Quotes are followed only inside a
 * setTimeout call (shell text elsewhere has unpaired apostrophes).
 */
export function setTimeoutDelaysMs(text: string, work?: ScanWork): number[] {
  const delays: number[] = [];
  const frames: Frame[] = [];
  /** setTimeout calls open on the stack: inside one, quotes matter. */
  let calls = 0;
  let quote: string | undefined;
  let steps = 0;
  for (let i = 0; i < text.length; i++) {
    steps += 1;
    const ch = text[i] as string;
    if (quote !== undefined) {
      if (ch === "\\") i++;
      else if (ch === quote) quote = undefined;
    } else if (calls > 0 && (ch === '"' || ch === "'" || ch === "`")) {
      quote = ch;
    } else if (ch === "(" || ch === "[" || ch === "{") {
      const call = ch === "(" && setTimeoutBefore(text, i);
      frames.push(call ? "call" : "plain");
      if (call) calls += 1;
    } else if (ch === ")" || ch === "]" || ch === "}") {
      const frame = frames.pop();
      if (frame !== undefined && frame !== "plain") calls -= 1;
    } else if (ch === "," && frames[frames.length - 1] === "call") {
      frames[frames.length - 1] = "call-after-comma";
      const delay = SET_TIMEOUT_DELAY.exec(text.slice(i + 1, i + 1 + DELAY_WINDOW_CHARS));
      if (delay?.[1] !== undefined) delays.push(Number(delay[1]));
    }
  }
  if (work !== undefined) work.steps += steps;
  return delays;
}

/** Blanks allowed between `setTimeout` and its `(`: bounded, so the look back costs a constant. */
const MAX_BLANKS_BEFORE_PAREN = 16;

/** True when the `(` at `paren` follows the whole word `setTimeout` (blanks allowed between). */
function setTimeoutBefore(text: string, paren: number): boolean {
  let end = paren;
  for (let k = 0; k < MAX_BLANKS_BEFORE_PAREN && end > 0 && /\s/.test(text[end - 1] as string); k++) end--;
  const start = end - SET_TIMEOUT.length;
  if (start < 0 || !text.startsWith(SET_TIMEOUT, start)) return false;
  return start === 0 || !/[\w$]/.test(text[start - 1] as string);
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
