/*
 * RFC 4180 CSV. Text a spreadsheet would run as a formula (=, +, -, @, tab,
 * CR first) gets a leading apostrophe: tenant names are customer input.
 */

const FORMULA_START = /^[=+\-@\t\r]/;

export function csvField(value: string | number): string {
  if (typeof value === "number") return String(value);
  const safe = FORMULA_START.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

export function csvLine(values: (string | number)[]): string {
  return `${values.map(csvField).join(",")}\r\n`;
}
