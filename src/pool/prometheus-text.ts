/*
 * Just enough of the Prometheus text exposition format to read an engine's gauges:
 * `name{label="v",…} value [timestamp]`, `#` lines ignored. Labels are skipped (an
 * engine may expose one series per model or data-parallel rank; callers combine them).
 */

export interface Sample {
  name: string;
  value: number;
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
    if (value !== undefined) samples.push({ name: match[1], value });
  }
  return samples;
}

/** Finite values of the first of `names` present in the samples (engines renamed metrics across versions). */
export function valuesOf(samples: readonly Sample[], names: readonly string[]): number[] {
  for (const name of names) {
    const values = samples.filter((s) => s.name === name && Number.isFinite(s.value)).map((s) => s.value);
    if (values.length > 0) return values;
  }
  return [];
}
