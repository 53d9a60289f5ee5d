// keep_alive as Ollama reads it (api.Duration): a JSON number is whole seconds (the fraction dropped; negative:
// forever), a string is a Go duration ("5m", "1h30m", "300ms", "0"; negative: forever). The --keep-alive flag
// also takes a bare integer of seconds, as OLLAMA_KEEP_ALIVE does. Results are milliseconds, Infinity = forever.
// Invariant: a value Ollama would refuse is a KeepAliveError naming it; the result is never NaN.

export const DEFAULT_KEEP_ALIVE_MS = 5 * 60_000;

export class KeepAliveError extends Error {
  override name = 'KeepAliveError';
}

const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3 }; // -> ms

/** Go's time.ParseDuration in milliseconds, or null when Go would refuse the text. */
export function parseGoDuration(text: string): number | null {
  let s = text;
  let sign = 1;
  if (s.startsWith('-') || s.startsWith('+')) {
    if (s[0] === '-') sign = -1;
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') return null;
  let total = 0;
  const part = /^(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h)/;
  while (s.length > 0) {
    const m = part.exec(s);
    if (!m || (m[1] === '' && (m[2] ?? '') === '')) return null; // Go needs a digit before or after the point
    total += Number(`${m[1] || '0'}.${m[2] || '0'}`) * UNITS[m[3]];
    s = s.slice(m[0].length);
  }
  return sign * total;
}

/** A request's keep_alive (absent or null: undefined, the server's default applies). */
export function parseKeepAlive(v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new KeepAliveError(`keep_alive must be a finite number of seconds (got ${v})`);
    return v < 0 ? Infinity : Math.trunc(v) * 1000;
  }
  if (typeof v === 'string') {
    const ms = parseGoDuration(v);
    if (ms === null) throw new KeepAliveError(`keep_alive: time: invalid duration ${JSON.stringify(v)} (a number of seconds, or a duration such as "5m", "30s", "1h")`);
    return ms < 0 ? Infinity : ms;
  }
  throw new KeepAliveError(`keep_alive must be a number of seconds or a duration string (got ${typeof v})`);
}

/** The --keep-alive flag: a Go duration or whole seconds; negative: forever. */
export function parseKeepAliveFlag(text: string): number {
  const ms = parseGoDuration(text.trim()) ?? (/^[+-]?\d+$/.test(text.trim()) ? Number(text.trim()) * 1000 : null);
  if (ms === null) throw new KeepAliveError(`--keep-alive must be a duration such as 5m, 30s, 1h, or seconds; negative keeps models loaded forever (got '${text}')`);
  return ms < 0 ? Infinity : ms;
}
