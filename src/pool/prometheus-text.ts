/*
 * Just enough of the Prometheus text exposition format to read an engine's gauges:
 * `name{label="v",…} value [timestamp]`, `#` lines ignored. Labels are skipped (an
 * engine may expose one series per model or data-parallel rank; callers combine them).
 */

export interface Sample {
  name: string;
  value: number;
  /** The raw text between the braces, when the sample has labels (read with labelValue). */
  labels?: string;
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/;

function parseValue(text: string): number | undefined {
  if (text === "NaN") return Number.NaN;
  if (text === "+Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  const value = Number(text);
  return text.length > 0 && !Number.isNaN(value) ? value : undefined;
}

export function parsePrometheusText(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const rawLine of text.split("\n")) {
    const line = rawLine.trim();
    if (line.length === 0 || line.startsWith("#")) continue;
    const match = SAMPLE_LINE.exec(line);
    if (!match?.[1] || !match[3]) continue;
    const value = parseValue(match[3]);
    if (value === undefined) continue;
    const labels = match[2]?.slice(1, -1);
    samples.push(labels ? { name: match[1], value, labels } : { name: match[1], value });
  }
  return samples;
}

const LABEL_PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** A label's value (escapes undone), or undefined when the sample has no such label. */
export function labelValue(sample: Sample, name: string): string | undefined {
  if (sample.labels === undefined) return undefined;
  for (const match of sample.labels.matchAll(LABEL_PAIR)) {
    if (match[1] === name) return (match[2] ?? "").replace(/\\(.)/g, (_, ch: string) => (ch === "n" ? "\n" : ch));
  }
  return undefined;
}

/** Finite values of the first of `names` present in the samples (engines renamed metrics across versions). */
export function valuesOf(samples: readonly Sample[], names: readonly string[]): number[] {
  for (const name of names) {
    const values = samples.filter((s) => s.name === name && Number.isFinite(s.value)).map((s) => s.value);
    if (values.length > 0) return values;
  }
  return [];
}
