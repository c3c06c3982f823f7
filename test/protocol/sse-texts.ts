import fc from "fast-check";

/* Event-stream texts for the SSE cutters' property tests (sse.test.ts, pool/event-text.test.ts). */

/** Texts dense in CR and LF (every arrangement of them), with multi-byte characters to cut through. */
export const sseTexts = fc.string({ unit: fc.constantFrom("\n", "\r", "\r\n", "\n\n", "a", "data: x", ":", " ", "é", "😀"), maxLength: 40 });

/** `bytes` cut at these points (taken modulo its length, repeats dropped), in order. */
export function piecesAt(bytes: Uint8Array, at: readonly number[]): Uint8Array[] {
  const points = [...new Set(at.map((n) => n % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const point of [...points, bytes.length]) {
    pieces.push(bytes.slice(from, point));
    from = point;
  }
  return pieces;
}
