// JSON Schema string formats as GBNF: date, time, date-time (RFC 3339) and uuid, each a JSON string with quotes.
// Invariant: every accepted string is valid for ajv-formats' full mode (real calendar days, leap years
// included); the grammar writes the canonical RFC 3339 subset: upper-case T and Z, offsets as +HH:MM, at most
// 9 fraction digits, no leap second 60, no `urn:uuid:` prefix. Lengths are in code points.
import { GrammarBuilder, StructuredOutputError } from './gbnf.js';

export const SUPPORTED_FORMATS = ['date', 'time', 'date-time', 'uuid'] as const;
export type StringFormat = (typeof SUPPORTED_FORMATS)[number];

/** Shortest and longest content length (without quotes) of each format, in code points. */
export const FORMAT_LENGTHS: Readonly<Record<StringFormat, readonly [number, number]>> = {
  date: [10, 10],
  time: [9, 24], // HH:MM:SS [.F{1,9}] (Z | +HH:MM)
  'date-time': [20, 35],
  uuid: [36, 36],
};

export function isSupportedFormat(f: string): f is StringFormat {
  return (SUPPORTED_FORMATS as readonly string[]).includes(f);
}

function dateRule(b: GrammarBuilder): string {
  return b.cached('fmt-date', 'date', () => {
    const m31 = '"0" [13578] | "1" [02]', m30 = '"0" [469] | "11"';
    const d31 = '"0" [1-9] | [12] [0-9] | "3" [01]', d30 = '"0" [1-9] | [12] [0-9] | "30"';
    const d28 = '"0" [1-9] | "1" [0-9] | "2" [0-8]';
    // divisible by 4 and not by 100, or divisible by 400
    const leap = '[0-9]{2} ("0" [48] | [2468] [048] | [13579] [26]) | ([02468] [048] | [13579] [26]) "00"';
    return `[0-9]{4} "-" ((${m31}) "-" (${d31}) | (${m30}) "-" (${d30}) | "02-" (${d28})) | (${leap}) "-02-29"`;
  });
}

function timeRule(b: GrammarBuilder): string {
  return b.cached('fmt-time', 'time', () => {
    const hh = '([01] [0-9] | "2" [0-3])', mm = '[0-5] [0-9]';
    return `${hh} ":" ${mm} ":" ${mm} ("." [0-9]{1,9})? ("Z" | [+-] ${hh} ":" ${mm})`;
  });
}

/** A rule for the JSON string (quotes included) of a value in `format`. */
export function formatRule(b: GrammarBuilder, format: string): string {
  const q = '"\\""';
  switch (format) {
    case 'date': return b.rule('date-string', `${q} ${dateRule(b)} ${q}`);
    case 'time': return b.rule('time-string', `${q} ${timeRule(b)} ${q}`);
    case 'date-time': return b.rule('date-time-string', `${q} ${dateRule(b)} "T" ${timeRule(b)} ${q}`);
    case 'uuid': {
      const h = '[0-9a-fA-F]';
      return b.rule('uuid-string', `${q} ${h}{8} "-" ${h}{4} "-" ${h}{4} "-" ${h}{4} "-" ${h}{12} ${q}`);
    }
  }
  throw new StructuredOutputError(`unsupported string format '${format}' (supported: ${SUPPORTED_FORMATS.join(', ')})`);
}
