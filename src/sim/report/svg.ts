/*
 * Hand-written SVG charts for the benchmark report: a line chart (linear or log axes,
 * optional step lines for CDFs) and a bar chart. Output is a standalone <svg>
 * element with inline attributes only, so the HTML report needs no script or CSS
 * from anywhere.
 */

export interface Point {
  x: number;
  y: number;
  /** Drawn as an open marker (e.g. a rate that was not stable). */
  hollow?: boolean;
}

export interface Series {
  name: string;
  color: string;
  points: readonly Point[];
  /** Draw as a staircase (an empirical CDF). */
  step?: boolean;
  markers?: boolean;
  /** Thicker line, for the series the chart is about. */
  emphasis?: boolean;
}

export interface Axis {
  label: string;
  scale: "linear" | "log";
  /** Forced bounds; otherwise from the data. */
  min?: number;
  max?: number;
  format?: (value: number) => string;
}

export interface Guide {
  axis: "x" | "y";
  value: number;
  label: string;
}

export interface LineChartSpec {
  /** Unique within the page (names the chart's clip path). */
  id: string;
  title: string;
  x: Axis;
  y: Axis;
  series: readonly Series[];
  guides?: readonly Guide[];
  width?: number;
  height?: number;
}

export interface Bar {
  label: string;
  /** null: no value (drawn as a note instead of a bar). */
  value: number | null;
  color: string;
  note?: string;
}

export interface BarChartSpec {
  title: string;
  valueLabel: string;
  bars: readonly Bar[];
  format?: (value: number) => string;
  width?: number;
  height?: number;
}

const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';
const AXIS_COLOR = "#444";
const GRID_COLOR = "#e3e3e3";

export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);
}

/** Compact tick text: 3 significant digits, k/M suffixes, no trailing zeros. */
export function formatTick(value: number): string {
  const abs = Math.abs(value);
  if (abs === 0) return "0";
  if (abs >= 1e6) return `${trimZeros((value / 1e6).toPrecision(3))}M`;
  if (abs >= 1e4) return `${trimZeros((value / 1e3).toPrecision(3))}k`;
  if (abs >= 1) return trimZeros(value.toPrecision(Math.max(3, Math.floor(Math.log10(abs)) + 1)));
  return trimZeros(value.toPrecision(2));
}

function trimZeros(text: string): string {
  return text.includes(".") && !text.includes("e") ? text.replace(/\.?0+$/, "") : text;
}

function fixed(n: number): string {
  return (Math.round(n * 10) / 10).toString();
}

interface Scale {
  toPx(value: number): number;
  ticks: number[];
  min: number;
  max: number;
}

function niceStep(span: number, targetTicks: number): number {
  const raw = span / Math.max(1, targetTicks);
  const power = 10 ** Math.floor(Math.log10(raw));
  const fraction = raw / power;
  const nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * power;
}

function linearTicks(min: number, max: number): { min: number; max: number; ticks: number[] } {
  if (min === max) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
    return linearTicks(min - pad, max + pad);
  }
  const step = niceStep(max - min, 5);
  const lo = Math.floor(min / step) * step;
  const hi = Math.ceil(max / step) * step;
  const ticks: number[] = [];
  for (let v = lo; v <= hi + step / 2; v += step) ticks.push(Math.round(v / step) * step);
  return { min: lo, max: hi, ticks };
}

function logTicks(min: number, max: number): { min: number; max: number; ticks: number[] } {
  if (min === max) return logTicks(min / 2, max * 2);
  // Bounds snap outward to a 1-2-5 value so the data never touches the frame.
  const snapDown = (v: number) => {
    const p = 10 ** Math.floor(Math.log10(v));
    const m = v / p;
    return Number(((m >= 5 ? 5 : m >= 2 ? 2 : 1) * p).toPrecision(6));
  };
  const snapUp = (v: number) => {
    const p = 10 ** Math.floor(Math.log10(v));
    const m = v / p;
    return Number(((m <= 1.0001 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p).toPrecision(6));
  };
  const lo = snapDown(min);
  const hi = snapUp(max);
  const loPow = Math.floor(Math.log10(lo));
  const hiPow = Math.ceil(Math.log10(hi));
  const decades = Math.log10(hi / lo);
  // Under a decade: fine ticks; a few decades: 1-2-5; more: 1-3; many: every decade.
  const multiples = decades <= 1.01 ? [1, 1.5, 2, 3, 4, 5, 7] : decades <= 2.1 ? [1, 2, 5] : decades <= 4.1 ? [1, 3] : [1];
  const ticks: number[] = [];
  for (let p = loPow; p <= hiPow; p++) {
    for (const m of multiples) {
      const v = Number((m * 10 ** p).toPrecision(6));
      if (v >= lo / 1.0001 && v <= hi * 1.0001) ticks.push(v);
    }
  }
  return { min: lo, max: hi, ticks: ticks.length >= 2 ? ticks : [lo, hi] };
}

function makeScale(axis: Axis, values: number[], pxFrom: number, pxTo: number): Scale {
  const usable = axis.scale === "log" ? values.filter((v) => v > 0 && Number.isFinite(v)) : values.filter(Number.isFinite);
  const dataMin = axis.min ?? (usable.length > 0 ? Math.min(...usable) : axis.scale === "log" ? 1 : 0);
  const dataMax = axis.max ?? (usable.length > 0 ? Math.max(...usable) : axis.scale === "log" ? 10 : 1);
  const t = axis.scale === "log" ? logTicks(dataMin, dataMax) : linearTicks(dataMin, dataMax);
  const min = axis.min ?? t.min;
  const max = axis.max ?? t.max;
  const ticks = t.ticks.filter((v) => v >= min - 1e-12 && v <= max + 1e-12);
  const f = axis.scale === "log" ? Math.log10 : (v: number) => v;
  const a = f(min);
  const b = f(max);
  return { min, max, ticks, toPx: (v) => pxFrom + ((f(v) - a) / (b - a || 1)) * (pxTo - pxFrom) };
}

function text(x: number, y: number, content: string, attrs = ""): string {
  return `<text x="${fixed(x)}" y="${fixed(y)}" ${FONT} ${attrs}>${escapeXml(content)}</text>`;
}

function usablePoint(p: Point, x: Axis, y: Axis): boolean {
  return Number.isFinite(p.x) && Number.isFinite(p.y) && (x.scale !== "log" || p.x > 0) && (y.scale !== "log" || p.y > 0);
}

/** Legend rows on the right; returns the markup. */
function legend(series: readonly { name: string; color: string; emphasis?: boolean }[], x: number, y: number): string {
  return series
    .map((s, i) => {
      const rowY = y + i * 20;
      return (
        `<line x1="${x}" y1="${rowY}" x2="${x + 22}" y2="${rowY}" stroke="${s.color}" stroke-width="${s.emphasis ? 4 : 2.5}"/>` +
        text(x + 28, rowY + 4, s.name, `font-size="12" fill="#222"${s.emphasis ? ' font-weight="600"' : ""}`)
      );
    })
    .join("");
}

export function lineChart(spec: LineChartSpec): string {
  const width = spec.width ?? 900;
  const height = spec.height ?? 440;
  const margin = { top: 40, right: 190, bottom: 56, left: 72 };
  const plotRight = width - margin.right;
  const plotBottom = height - margin.bottom;
  const points = spec.series.flatMap((s) => s.points.filter((p) => usablePoint(p, spec.x, spec.y)));
  const guideX = (spec.guides ?? []).filter((g) => g.axis === "x").map((g) => g.value);
  const guideY = (spec.guides ?? []).filter((g) => g.axis === "y").map((g) => g.value);
  const xs = makeScale(spec.x, [...points.map((p) => p.x), ...guideX], margin.left, plotRight);
  const ys = makeScale(spec.y, [...points.map((p) => p.y), ...guideY], plotBottom, margin.top);
  const fx = spec.x.format ?? formatTick;
  const fy = spec.y.format ?? formatTick;
  const clipId = `${spec.id.replace(/[^\w-]/g, "_")}-clip`;

  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${escapeXml(spec.title)}">`);
  parts.push(`<title>${escapeXml(spec.title)}</title>`);
  parts.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#fff"/>`);
  parts.push(`<defs><clipPath id="${clipId}"><rect x="${margin.left}" y="${margin.top}" width="${plotRight - margin.left}" height="${plotBottom - margin.top}"/></clipPath></defs>`);
  parts.push(text(margin.left, 22, spec.title, 'font-size="15" font-weight="600" fill="#111"'));

  for (const t of ys.ticks) {
    const py = ys.toPx(t);
    parts.push(`<line x1="${margin.left}" y1="${fixed(py)}" x2="${plotRight}" y2="${fixed(py)}" stroke="${GRID_COLOR}"/>`);
    parts.push(text(margin.left - 8, py + 4, fy(t), `font-size="11" fill="${AXIS_COLOR}" text-anchor="end"`));
  }
  for (const t of xs.ticks) {
    const px = xs.toPx(t);
    parts.push(`<line x1="${fixed(px)}" y1="${margin.top}" x2="${fixed(px)}" y2="${plotBottom}" stroke="${GRID_COLOR}"/>`);
    parts.push(text(px, plotBottom + 18, fx(t), `font-size="11" fill="${AXIS_COLOR}" text-anchor="middle"`));
  }
  parts.push(`<rect x="${margin.left}" y="${margin.top}" width="${plotRight - margin.left}" height="${plotBottom - margin.top}" fill="none" stroke="${AXIS_COLOR}"/>`);
  parts.push(text((margin.left + plotRight) / 2, height - 14, `${spec.x.label}${spec.x.scale === "log" ? " (log)" : ""}`, `font-size="12" fill="#222" text-anchor="middle"`));
  const yLabelX = 16;
  const yLabelY = (margin.top + plotBottom) / 2;
  parts.push(text(yLabelX, yLabelY, `${spec.y.label}${spec.y.scale === "log" ? " (log)" : ""}`, `font-size="12" fill="#222" text-anchor="middle" transform="rotate(-90 ${yLabelX} ${fixed(yLabelY)})"`));

  parts.push(`<g clip-path="url(#${clipId})">`);
  for (const g of spec.guides ?? []) {
    if (g.axis === "y") {
      const py = ys.toPx(g.value);
      parts.push(`<line x1="${margin.left}" y1="${fixed(py)}" x2="${plotRight}" y2="${fixed(py)}" stroke="#b00020" stroke-dasharray="6 4" stroke-width="1.5"/>`);
      parts.push(text(margin.left + 6, py - 5, g.label, 'font-size="11" fill="#b00020"'));
    } else {
      const px = xs.toPx(g.value);
      parts.push(`<line x1="${fixed(px)}" y1="${margin.top}" x2="${fixed(px)}" y2="${plotBottom}" stroke="#b00020" stroke-dasharray="6 4" stroke-width="1.5"/>`);
      parts.push(text(px + 4, margin.top + 12, g.label, 'font-size="11" fill="#b00020"'));
    }
  }
  for (const s of spec.series) {
    const usable = s.points.filter((p) => usablePoint(p, spec.x, spec.y));
    if (usable.length === 0) continue;
    const coords = usable.map((p) => [xs.toPx(p.x), ys.toPx(p.y), p.hollow === true] as const);
    let d = "";
    coords.forEach(([px, py], i) => {
      if (i === 0) d += `M${fixed(px)},${fixed(py)}`;
      else if (s.step) d += `H${fixed(px)}V${fixed(py)}`;
      else d += `L${fixed(px)},${fixed(py)}`;
    });
    const dataName = escapeXml(s.name);
    parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="${s.emphasis ? 3.5 : 2}" stroke-linejoin="round" data-series="${dataName}"/>`);
    if (s.markers) {
      for (const [px, py, hollow] of coords) {
        const paint = hollow ? `fill="#fff" stroke="${s.color}" stroke-width="1.5"` : `fill="${s.color}"`;
        parts.push(`<circle cx="${fixed(px)}" cy="${fixed(py)}" r="${s.emphasis ? 4 : 3}" ${paint}/>`);
      }
    }
  }
  parts.push("</g>");
  parts.push(legend(spec.series, plotRight + 18, margin.top + 8));
  parts.push("</svg>");
  return parts.join("");
}

export function barChart(spec: BarChartSpec): string {
  const rowHeight = 30;
  const margin = { top: 40, right: 120, bottom: 44, left: 190 };
  const width = spec.width ?? 900;
  const height = spec.height ?? margin.top + margin.bottom + rowHeight * spec.bars.length;
  const plotRight = width - margin.right;
  const values = spec.bars.flatMap((b) => (b.value === null ? [] : [b.value]));
  const scale = makeScale({ label: spec.valueLabel, scale: "linear", min: 0 }, values.length > 0 ? [0, ...values] : [0, 1], margin.left, plotRight);
  const format = spec.format ?? formatTick;
  const plotBottom = margin.top + rowHeight * spec.bars.length;

  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${escapeXml(spec.title)}">`);
  parts.push(`<title>${escapeXml(spec.title)}</title>`);
  parts.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#fff"/>`);
  parts.push(text(16, 22, spec.title, 'font-size="15" font-weight="600" fill="#111"'));
  for (const t of scale.ticks) {
    const px = scale.toPx(t);
    parts.push(`<line x1="${fixed(px)}" y1="${margin.top}" x2="${fixed(px)}" y2="${plotBottom}" stroke="${GRID_COLOR}"/>`);
    parts.push(text(px, plotBottom + 16, format(t), `font-size="11" fill="${AXIS_COLOR}" text-anchor="middle"`));
  }
  parts.push(text((margin.left + plotRight) / 2, plotBottom + 36, spec.valueLabel, 'font-size="12" fill="#222" text-anchor="middle"'));
  spec.bars.forEach((bar, i) => {
    const top = margin.top + i * rowHeight + 5;
    const barHeight = rowHeight - 10;
    parts.push(text(margin.left - 10, top + barHeight / 2 + 4, bar.label, 'font-size="12" fill="#222" text-anchor="end"'));
    if (bar.value === null) {
      parts.push(text(margin.left + 6, top + barHeight / 2 + 4, bar.note ?? "no value", 'font-size="12" fill="#b00020"'));
      return;
    }
    const x1 = scale.toPx(Math.max(0, bar.value));
    parts.push(`<rect x="${margin.left}" y="${fixed(top)}" width="${fixed(Math.max(1, x1 - margin.left))}" height="${barHeight}" fill="${bar.color}" data-bar="${escapeXml(bar.label)}"/>`);
    const label = bar.note === undefined ? format(bar.value) : `${format(bar.value)}  ${bar.note}`;
    parts.push(text(x1 + 6, top + barHeight / 2 + 4, label, 'font-size="12" fill="#222"'));
  });
  parts.push(`<line x1="${margin.left}" y1="${margin.top}" x2="${margin.left}" y2="${plotBottom}" stroke="${AXIS_COLOR}"/>`);
  parts.push("</svg>");
  return parts.join("");
}
