/** A plain text table: a header row and left-aligned columns, two spaces apart. */
export function formatTable(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join("\n")}\n`;
}

/** ms since the epoch as an ISO time to the second; "-" for none. */
export function formatTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "-";
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

export function formatCount(n: number | null | undefined, none = "-"): string {
  return n === null || n === undefined ? none : String(n);
}
