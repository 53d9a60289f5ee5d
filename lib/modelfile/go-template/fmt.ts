// Go's fmt for template values: %v (what {{ x }} prints), Sprint, Sprintln and the Sprintf verbs templates use.
// Invariant: a value prints as Go prints the Go value it stands for (values.ts): String() wins, slices are
// "[a b]", maps "map[k:v]" in key order, structs "{a b}", nil "<nil>"; integers print as integers and other
// floats in Go's shortest %v form (an exponent below 1e-4 and from 1e6 up). A JavaScript number that happens to be
// integral prints as an integer (Go would print float64(1e6) as 1e+06; templates almost never print floats).
import { goTypeName, isGoStruct, sortedKeys, stringerOf } from './values.js';

export function formatNumber(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (!Number.isFinite(n)) return n > 0 ? '+Inf' : '-Inf';
  if (Number.isInteger(n) && Math.abs(n) < 1e21) return Object.is(n, -0) ? '0' : n.toFixed(0);
  const abs = Math.abs(n);
  if (abs < 1e-4 || abs >= 1e6) return goExponent(n.toExponential()); // Go's shortest %g: exponent < -4 or >= 6
  return String(n);
}

/** JavaScript's "1.5e-7" -> Go's "1.5e-07" (at least two exponent digits, explicit sign). */
function goExponent(s: string): string {
  return s.replace(/e([+-])(\d)$/, (_, sign: string, digit: string) => `e${sign}0${digit}`);
}

/** fmt's %v of a value. */
export function sprintValue(v: unknown): string {
  if (v === undefined || v === null) return '<nil>';
  const stringer = stringerOf(v);
  if (stringer) return stringer();
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
      return formatNumber(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'bigint':
      return v.toString();
    case 'function':
      return '<func>';
  }
  if (Array.isArray(v)) return '[' + v.map(sprintValue).join(' ') + ']';
  if (isGoStruct(v)) return '{' + Object.keys(v).map((k) => sprintValue(v[k])).join(' ') + '}';
  const obj = v as Record<string, unknown>;
  return 'map[' + sortedKeys(obj).map((k) => `${k}:${sprintValue(obj[k])}`).join(' ') + ']';
}

/** fmt.Sprint: operands joined, with a space between two operands when neither is a string. */
export function sprint(args: unknown[]): string {
  let out = '';
  args.forEach((a, i) => {
    if (i > 0 && typeof a !== 'string' && typeof args[i - 1] !== 'string') out += ' ';
    out += sprintValue(a);
  });
  return out;
}

/** fmt.Sprintln: operands always separated by spaces, then a newline. */
export function sprintln(args: unknown[]): string {
  return args.map(sprintValue).join(' ') + '\n';
}

/** strconv.Quote: a double-quoted Go string literal. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    const simple: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\x07': '\\a', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\v': '\\v' };
    if (simple[ch]) out += simple[ch];
    else if (cp < 0x20 || cp === 0x7f) out += '\\x' + cp.toString(16).padStart(2, '0');
    else if (/\p{C}/u.test(ch) && cp > 0x7f) out += cp > 0xffff ? '\\U' + cp.toString(16).padStart(8, '0') : '\\u' + cp.toString(16).padStart(4, '0');
    else out += ch;
  }
  return out + '"';
}

interface Spec {
  minus: boolean;
  plus: boolean;
  zero: boolean;
  space: boolean;
  sharp: boolean;
  width: number | null;
  precision: number | null;
  verb: string;
}

const bad = (verb: string, v: unknown): string => `%!${verb}(${goTypeName(v)}=${sprintValue(v)})`;

function pad(s: string, spec: Spec): string {
  if (spec.width === null || s.length >= spec.width) return s;
  if (spec.minus) return s + ' '.repeat(spec.width - s.length);
  if (spec.zero && /^[+-]?[0-9.]/.test(s)) {
    const sign = /^[+-]/.test(s) ? s[0] : '';
    return sign + '0'.repeat(spec.width - s.length) + s.slice(sign.length);
  }
  return ' '.repeat(spec.width - s.length) + s;
}

function signed(s: string, n: number, spec: Spec): string {
  if (n >= 0 && spec.plus) return '+' + s;
  if (n >= 0 && spec.space) return ' ' + s;
  return s;
}

function formatOne(spec: Spec, v: unknown): string {
  const { verb, precision } = spec;
  const isInt = typeof v === 'number' && Number.isInteger(v);
  switch (verb) {
    case 'v':
      return sprintValue(v);
    case 's': {
      if (typeof v === 'number' || typeof v === 'boolean') return bad(verb, v);
      const s = sprintValue(v);
      return precision === null ? s : [...s].slice(0, precision).join('');
    }
    case 'q':
      if (typeof v === 'string' || stringerOf(v)) return goQuote(sprintValue(v));
      if (isInt) return "'" + String.fromCodePoint(v as number) + "'";
      return bad(verb, v);
    case 'd':
      return isInt ? signed((v as number).toFixed(0), v as number, spec) : bad(verb, v);
    case 't':
      return typeof v === 'boolean' ? String(v) : bad(verb, v);
    case 'c':
      return isInt ? String.fromCodePoint(v as number) : bad(verb, v);
    case 'x':
    case 'X': {
      let s: string;
      if (isInt) s = (v as number).toString(16);
      else if (typeof v === 'string') s = Buffer.from(v, 'utf8').toString('hex');
      else return bad(verb, v);
      return verb === 'X' ? s.toUpperCase() : s;
    }
    case 'f':
    case 'F':
      return typeof v === 'number' ? signed(v.toFixed(precision ?? 6), v, spec) : bad(verb, v);
    case 'e':
    case 'E': {
      if (typeof v !== 'number') return bad(verb, v);
      const s = goExponent(v.toExponential(precision ?? 6));
      return signed(verb === 'E' ? s.toUpperCase() : s, v, spec);
    }
    case 'g':
    case 'G': {
      if (typeof v !== 'number') return bad(verb, v);
      const s = precision === null ? formatNumber(v) : goExponent(Number(v.toPrecision(precision)).toString());
      return signed(verb === 'G' ? s.toUpperCase() : s, v, spec);
    }
    case 'T':
      return goTypeName(v);
    default:
      return bad(verb, v);
  }
}

/** fmt.Sprintf with the common verbs (v s q d t c x X f F e E g G T %), flags (- + 0 space #), width, precision. */
export function sprintf(format: string, args: unknown[]): string {
  let out = '';
  let argIndex = 0;
  const re = /%([-+0 #]*)(\d+)?(?:\.(\d*))?(.?)/gsy;
  let last = 0;
  for (let i = format.indexOf('%'); i >= 0; i = format.indexOf('%', last)) {
    out += format.slice(last, i);
    re.lastIndex = i;
    const m = re.exec(format)!;
    last = re.lastIndex;
    const verb = m[4]!;
    if (verb === '%') {
      out += '%';
      continue;
    }
    if (verb === '') {
      out += '%!(NOVERB)';
      continue;
    }
    const flags = m[1]!;
    const spec: Spec = {
      minus: flags.includes('-'), plus: flags.includes('+'), zero: flags.includes('0'), space: flags.includes(' '),
      sharp: flags.includes('#'), width: m[2] ? Number(m[2]) : null, precision: m[3] !== undefined ? Number(m[3] || '0') : null, verb,
    };
    if (argIndex >= args.length) {
      out += `%!${verb}(MISSING)`;
      continue;
    }
    out += pad(formatOne(spec, args[argIndex++]), spec);
  }
  out += format.slice(last);
  if (argIndex < args.length) {
    out += '%!(EXTRA ' + args.slice(argIndex).map((a) => `${goTypeName(a)}=${sprintValue(a)}`).join(', ') + ')';
  }
  return out;
}
