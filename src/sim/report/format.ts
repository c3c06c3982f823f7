import type { Ratio, SustainedRate } from "./headline.js";
import { formatRelation } from "./headline.js";

/* Number formatting shared by the text table and the HTML report. */

export const NONE = "-";

/** Up to 3 significant digits, thousands kept whole (1234 → "1234", 0.01234 → "0.0123"). */
export function sig3(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return NONE;
  const abs = Math.abs(value);
  if (abs >= 1_000) return Math.round(value).toString();
  if (abs === 0) return "0";
  const text = value.toPrecision(3);
  return text.includes("e") ? value.toExponential(2) : text.includes(".") ? text.replace(/\.?0+$/, "") : text;
}

export function seconds(ms: number | null | undefined): string {
  return ms === null || ms === undefined || !Number.isFinite(ms) ? NONE : `${sig3(ms / 1_000)} s`;
}

export function percent(fraction: number | null | undefined): string {
  return fraction === null || fraction === undefined || !Number.isFinite(fraction) ? NONE : `${(fraction * 100).toFixed(1)} %`;
}

export function rate(sustained: SustainedRate): string {
  return formatRelation(sustained.relation, sig3(sustained.ratePerSec));
}

export function ratio(r: Ratio | null): string {
  return r === null ? "?" : formatRelation(r.relation, `${r.value.toFixed(2)}×`);
}
