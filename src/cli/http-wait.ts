/** Polls a URL until it answers (any status below 500) or the deadline passes. */
export async function waitForHttp(url: string, timeoutMs: number, isAlive?: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = "";
  while (Date.now() < deadline) {
    if (isAlive && !isAlive()) throw new Error(`process serving ${url} exited before it answered`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await res.body?.cancel();
      if (res.status < 500) return;
      lastError = `status ${res.status}`;
    } catch (error) {
      lastError = error instanceof Error ? error.message : String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms (${lastError})`);
}
