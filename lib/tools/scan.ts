// Outcome of scanning a value out of a text that may still be growing (a streamed output).
// Invariant (prefix stability): if scanning T gives 'done' at end E or 'error', scanning any T + U gives the same;
// only 'incomplete' (the text ran out) may change as text arrives. Streams rely on this to decide lazily.

export type ScanResult<T> = { status: 'done'; value: T; end: number } | { status: 'incomplete' } | { status: 'error' };

/** Thrown inside scanners when the text ends before the value does. */
export class ScanIncomplete extends Error {}
/** Thrown inside scanners at the first character that no continuation can make valid. */
export class ScanError extends Error {}

/** Nesting beyond this is refused (an error), so hostile outputs cannot exhaust the stack. */
export const MAX_DEPTH = 256;

export function runScan<T>(fn: () => { value: T; end: number }): ScanResult<T> {
  try {
    const { value, end } = fn();
    return { status: 'done', value, end };
  } catch (e) {
    if (e instanceof ScanIncomplete) return { status: 'incomplete' };
    if (e instanceof ScanError) return { status: 'error' };
    throw e;
  }
}

export function isWs(ch: string): boolean {
  return ch === ' ' || ch === '\n' || ch === '\t' || ch === '\r';
}

export function skipWs(text: string, pos: number): number {
  while (pos < text.length && isWs(text[pos])) pos++;
  return pos;
}
