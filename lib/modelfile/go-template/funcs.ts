// Go text/template's predefined functions (text/template/funcs.go) over the value model of values.ts.
// Invariant: each function takes Go's argument count and fails (an ExecProblem, positioned by the executor) where
// Go's fails, with Go's message: comparisons of different kinds, len of a non-collection, an index out of range.
// `and` and `or` are listed for the parser but evaluated lazily by the executor, as Go 1.18+ does.
import { ExecProblem } from './errors.js';
import { sprint, sprintf, sprintln } from './fmt.js';
import { goTypeName, isGoMap, isTrue } from './values.js';

export interface CallContext {
  /** Whatever the caller of execute() passed as `env` (e.g. a clock for date functions). */
  readonly env: Readonly<Record<string, unknown>>;
}

export interface GoFunction {
  /** Fewest and most arguments (Infinity: variadic). */
  min: number;
  max: number;
  call(args: unknown[], ctx: CallContext): unknown;
}

type Kind = 'bool' | 'number' | 'string' | 'nil' | 'other';

function kindOf(v: unknown): Kind {
  if (v === undefined || v === null) return 'nil';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return 'number';
  if (typeof v === 'string') return 'string';
  return 'other';
}

function eq(args: unknown[]): boolean {
  const [a, ...rest] = args;
  if (rest.length === 0) throw new ExecProblem('missing argument for comparison');
  const ka = kindOf(a);
  for (const b of rest) {
    const kb = kindOf(b);
    if (ka !== kb) {
      if (ka !== 'nil' && kb !== 'nil') throw new ExecProblem('incompatible types for comparison');
      continue;
    }
    if (ka === 'other') {
      if (Array.isArray(a) || isGoMap(a)) throw new ExecProblem(`non-comparable type ${goTypeName(a)}`);
      if (a === b) return true;
      continue;
    }
    if (ka === 'nil' || a === b) return true;
  }
  return false;
}

function lt(a: unknown, b: unknown): boolean {
  const ka = kindOf(a);
  const kb = kindOf(b);
  if (ka !== 'number' && ka !== 'string' && ka !== 'bool') throw new ExecProblem('invalid type for comparison');
  if (kb !== 'number' && kb !== 'string' && kb !== 'bool') throw new ExecProblem('invalid type for comparison');
  if (ka !== kb) throw new ExecProblem('incompatible types for comparison');
  if (ka === 'bool') throw new ExecProblem('invalid type for comparison');
  return (a as number | string) < (b as number | string);
}

function indexArg(i: unknown, cap: number): number {
  if (i === undefined || i === null) throw new ExecProblem('cannot index slice/array with nil');
  if (typeof i !== 'number' || !Number.isInteger(i)) throw new ExecProblem(`cannot index slice/array with type ${goTypeName(i)}`);
  if (i < 0 || i > cap) throw new ExecProblem(`index out of range: ${i}`);
  return i;
}

function index(args: unknown[]): unknown {
  let item = args[0];
  if (item === undefined || item === null) throw new ExecProblem('index of untyped nil');
  for (const i of args.slice(1)) {
    if (item === null || item === undefined) throw new ExecProblem('index of nil pointer');
    if (typeof item === 'string' || Array.isArray(item)) {
      const seq = typeof item === 'string' ? Buffer.from(item, 'utf8') : item;
      const x = indexArg(i, seq.length);
      if (x === seq.length) throw new ExecProblem(`index out of range: ${x}`);
      item = seq[x];
    } else if (isGoMap(item)) {
      if (typeof i !== 'string') throw new ExecProblem(`value has type ${goTypeName(i)}; should be string`);
      item = Object.hasOwn(item, i) ? item[i] : null;
    } else {
      throw new ExecProblem(`can't index item of type ${goTypeName(item)}`);
    }
  }
  return item;
}

function slice(args: unknown[]): unknown {
  const [item, ...indexes] = args;
  if (item === undefined || item === null) throw new ExecProblem('slice of untyped nil');
  if (indexes.length > 3) throw new ExecProblem(`too many slice indexes: ${indexes.length}`);
  if (typeof item !== 'string' && !Array.isArray(item)) throw new ExecProblem(`can't slice item of type ${goTypeName(item)}`);
  if (typeof item === 'string' && indexes.length === 3) throw new ExecProblem('cannot 3-index slice a string');
  const seq = typeof item === 'string' ? Buffer.from(item, 'utf8') : item;
  const idx = [0, seq.length, seq.length];
  indexes.forEach((i, k) => (idx[k] = indexArg(i, seq.length)));
  if (idx[0]! > idx[1]!) throw new ExecProblem(`invalid slice index: ${idx[0]} > ${idx[1]}`);
  if (indexes.length === 3 && idx[1]! > idx[2]!) throw new ExecProblem(`invalid slice index: ${idx[1]} > ${idx[2]}`);
  const out = seq.slice(idx[0], idx[1]);
  return typeof item === 'string' ? (out as Buffer).toString('utf8') : out;
}

function length(v: unknown): number {
  if (v === undefined || v === null) throw new ExecProblem('len of nil pointer');
  if (typeof v === 'string') return Buffer.byteLength(v, 'utf8');
  if (Array.isArray(v)) return v.length;
  if (isGoMap(v)) return Object.keys(v).length;
  throw new ExecProblem(`len of type ${goTypeName(v)}`);
}

/** html, js and urlquery take one string or print their arguments with fmt.Sprint. */
const textOf = (args: unknown[]): string => (args.length === 1 && typeof args[0] === 'string' ? args[0] : sprint(args));

function htmlEscape(s: string): string {
  const map: Record<string, string> = { '&': '&amp;', "'": '&#39;', '<': '&lt;', '>': '&gt;', '"': '&#34;', '\0': '\ufffd' };
  return s.replace(/[&'<>"\0]/g, (c) => map[c]!);
}

function jsEscape(s: string): string {
  const map: Record<string, string> = { '\\': '\\\\', "'": "\\'", '"': '\\"', '<': '\\u003C', '>': '\\u003E', '&': '\\u0026', '=': '\\u003D' };
  let out = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (map[ch]) out += map[ch];
    else if (cp < 0x20 || (cp >= 0x7f && /\p{C}/u.test(ch))) out += '\\u' + cp.toString(16).toUpperCase().padStart(4, '0');
    else out += ch;
  }
  return out;
}

function queryEscape(s: string): string {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-_.~]/.test(c)) out += c;
    else if (c === ' ') out += '+';
    else out += '%' + byte.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

const fn = (min: number, max: number, call: (args: unknown[], ctx: CallContext) => unknown): GoFunction => ({ min, max, call });
const lazy = (): never => {
  throw new ExecProblem('internal: and/or are evaluated by the executor');
};

export const BUILTINS: ReadonlyMap<string, GoFunction> = new Map<string, GoFunction>([
  ['and', fn(1, Infinity, lazy)],
  ['or', fn(1, Infinity, lazy)],
  ['not', fn(1, 1, ([v]) => !isTrue(v))],
  ['len', fn(1, 1, ([v]) => length(v))],
  ['index', fn(1, Infinity, index)],
  ['slice', fn(1, Infinity, slice)],
  ['eq', fn(1, Infinity, eq)],
  ['ne', fn(2, 2, (args) => !eq(args))],
  ['lt', fn(2, 2, ([a, b]) => lt(a, b))],
  ['le', fn(2, 2, ([a, b]) => lt(a, b) || eq([a, b]))],
  ['gt', fn(2, 2, ([a, b]) => !(lt(a, b) || eq([a, b])))],
  ['ge', fn(2, 2, ([a, b]) => !lt(a, b))],
  ['print', fn(0, Infinity, (args) => sprint(args))],
  ['println', fn(0, Infinity, (args) => sprintln(args))],
  ['printf', fn(1, Infinity, ([format, ...args]) => {
    if (typeof format !== 'string') throw new ExecProblem(`wrong type for value; expected string; got ${goTypeName(format)}`);
    return sprintf(format, args);
  })],
  ['html', fn(0, Infinity, (args) => htmlEscape(textOf(args)))],
  ['js', fn(0, Infinity, (args) => jsEscape(textOf(args)))],
  ['urlquery', fn(0, Infinity, (args) => queryEscape(textOf(args)))],
  ['call', fn(1, Infinity, ([f, ...args]) => {
    if (f === undefined || f === null) throw new ExecProblem('call of nil');
    if (typeof f !== 'function') throw new ExecProblem(`non-function of type ${goTypeName(f)}`);
    return f(...args);
  })],
]);
