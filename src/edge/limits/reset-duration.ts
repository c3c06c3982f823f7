/**
 * A duration as OpenAI writes it in x-ratelimit-reset-*: "0s", "250ms", "1.5s",
 * "6m0s", "1h2m3s". Below a second it is whole milliseconds; above, seconds
 * keep up to three decimals without trailing zeros.
 */
export function formatResetDuration(ms: number): string {
  const total = Math.max(0, Math.ceil(ms));
  if (total === 0) return "0s";
  if (total < 1_000) return `${total}ms`;
  const hours = Math.floor(total / 3_600_000);
  const minutes = Math.floor((total % 3_600_000) / 60_000);
  const seconds = (total % 60_000) / 1_000;
  const secondsText = `${Number(seconds.toFixed(3))}s`;
  if (hours > 0) return `${hours}h${minutes}m${secondsText}`;
  if (minutes > 0) return `${minutes}m${secondsText}`;
  return secondsText;
}

/** Retry-After in whole seconds, at least 1 (0 would invite an immediate retry storm). */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1_000));
}
