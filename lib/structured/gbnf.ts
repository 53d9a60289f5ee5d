// GBNF text building blocks shared by the structured-output compilers: escaping, repetition, named rules.
// Invariant: every string this module returns is a well-formed GBNF expression (literal, class, group or rule
// name) for the native parser (native/engine/grammar_parse.cpp); rule names match [a-zA-Z0-9-]+, are unique,
// and two rules with identical bodies share one name. Code points are Unicode scalar values (no surrogates).

/** Bad input to a structured-output compiler; the message names the problem and what is allowed. */
export class StructuredOutputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StructuredOutputError';
  }
}

/** Inclusive code point range [lo, hi]. */
export type CodeRange = readonly [number, number];

export const MAX_CODE_POINT = 0x10ffff;
/** The native parser refuses {m,n} bounds above this (grammar_parse.cpp max_repetition). */
const MAX_NATIVE_REPEAT = 10000;

function hex(cp: number, width: number): string {
  return cp.toString(16).toUpperCase().padStart(width, '0');
}

/** A code point as GBNF escape text: \xHH, \uHHHH or \UHHHHHHHH. */
function hexEscape(cp: number): string {
  if (cp <= 0xff) return `\\x${hex(cp, 2)}`;
  if (cp <= 0xffff) return `\\u${hex(cp, 4)}`;
  return `\\U${hex(cp, 8)}`;
}

/** Code points that are written escaped in grammar text so it stays one readable line. */
function invisible(cp: number): boolean {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp === 0x2028 || cp === 0x2029 || cp === 0xfeff;
}

/** The code points of a JS string; a lone surrogate (not encodable as UTF-8) is refused. */
export function codePoints(text: string, what = 'text'): number[] {
  const out: number[] = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (cp >= 0xd800 && cp <= 0xdfff) {
      throw new StructuredOutputError(`${what} contains a lone UTF-16 surrogate (U+${hex(cp, 4)}), which is not valid Unicode text`);
    }
    out.push(cp);
  }
  return out;
}

function literalChar(cp: number): string {
  switch (cp) {
    case 0x22: return '\\"';
    case 0x5c: return '\\\\';
    case 0x0a: return '\\n';
    case 0x0d: return '\\r';
    case 0x09: return '\\t';
  }
  return invisible(cp) ? hexEscape(cp) : String.fromCodePoint(cp);
}

function classChar(cp: number): string {
  // `-`, `^` and `]` carry meaning inside [...]; the parser has no `\-` or `\^`, so they go as hex.
  if (cp === 0x2d || cp === 0x5e || cp === 0x5d || cp === 0x5b) return hexEscape(cp);
  return literalChar(cp);
}

/** A GBNF literal matching exactly `text` (any Unicode, control characters included). `""` for empty text. */
export function literal(text: string): string {
  return `"${codePoints(text, 'literal').map(literalChar).join('')}"`;
}

/** Sorted, merged copy of ranges; empty ranges dropped. */
export function normalizeRanges(ranges: readonly CodeRange[]): CodeRange[] {
  const sorted = ranges.filter(([lo, hi]) => lo <= hi).map(([lo, hi]) => [lo, hi] as const).sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

/** The code points of [0, U+10FFFF] not in ranges (ranges need not be normalized). */
export function complementRanges(ranges: readonly CodeRange[]): CodeRange[] {
  const out: CodeRange[] = [];
  let next = 0;
  for (const [lo, hi] of normalizeRanges(ranges)) {
    if (lo > next) out.push([next, lo - 1]);
    next = hi + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

/** Intersection of two range sets. */
export function intersectRanges(a: readonly CodeRange[], b: readonly CodeRange[]): CodeRange[] {
  const out: CodeRange[] = [];
  for (const [alo, ahi] of normalizeRanges(a)) {
    for (const [blo, bhi] of normalizeRanges(b)) {
      const lo = Math.max(alo, blo), hi = Math.min(ahi, bhi);
      if (lo <= hi) out.push([lo, hi]);
    }
  }
  return normalizeRanges(out);
}

/**
 * A GBNF character class matching one code point in `ranges` (or, negated, one not in them). Surrogates never
 * reach the matcher, so ranges may include or exclude them freely. An empty positive class matches nothing.
 */
export function charClass(ranges: readonly CodeRange[], negated = false): string {
  const parts = normalizeRanges(ranges).map(([lo, hi]) => {
    if (lo === hi) return classChar(lo);
    if (hi === lo + 1) return classChar(lo) + classChar(hi);
    return `${classChar(lo)}-${classChar(hi)}`;
  });
  return `[${negated ? '^' : ''}${parts.join('')}]`;
}

/** End index (exclusive) of the GBNF atom starting at i (literal, class, group or rule name), or -1. */
function atomEnd(expr: string, i: number): number {
  const c = expr[i];
  if (c === '"' || c === '[') {
    const close = c === '"' ? '"' : ']';
    for (let j = i + 1; j < expr.length; ++j) {
      if (expr[j] === '\\') ++j;
      else if (expr[j] === close) return j + 1;
    }
    return -1;
  }
  if (c === '(') {
    for (let j = i + 1; j < expr.length;) {
      if (expr[j] === ')') return j + 1;
      if (expr[j] === '"' || expr[j] === '[' || expr[j] === '(') {
        j = atomEnd(expr, j);
        if (j < 0) return -1;
      } else {
        ++j;
      }
    }
    return -1;
  }
  let j = i;
  while (j < expr.length && /[a-zA-Z0-9_-]/.test(expr[j])) ++j;
  return j > i ? j : -1;
}

/** `expr` as one atom: unchanged when it already is one, else wrapped in parentheses. */
export function atom(expr: string): string {
  const e = expr.trim();
  return atomEnd(e, 0) === e.length ? e : `(${e})`;
}

/**
 * `item` repeated min..max times (max = Infinity: unbounded); `item` is wrapped in a group unless it is one
 * atom. When max is unbounded, `item` must not match the empty text (the parser refuses left recursion).
 * Bounds above the parser's per-repetition limit are split into nested groups.
 */
export function repeat(item: string, min: number, max: number): string {
  item = atom(item);
  if (!Number.isInteger(min) || min < 0 || !(max === Infinity || (Number.isInteger(max) && max >= min))) {
    throw new StructuredOutputError(`bad repetition bounds {${min},${max}}`);
  }
  if (max === 0) return '""';
  if (min === 0 && max === 1) return `${item}?`;
  if (min === 0 && max === Infinity) return `${item}*`;
  if (min === 1 && max === Infinity) return `${item}+`;
  if (min > MAX_NATIVE_REPEAT) {
    // item{min,...} = (item{K}){q} item{r} item{0,max-min}
    const k = MAX_NATIVE_REPEAT, q = Math.floor(min / k), r = min % k;
    const head = [repeat(`(${repeat(item, k, k)})`, q, q)];
    if (r > 0) head.push(repeat(item, r, r));
    if (max > min) head.push(repeat(item, 0, max === Infinity ? Infinity : max - min));
    return `(${head.join(' ')})`;
  }
  if (max !== Infinity && max > MAX_NATIVE_REPEAT) {
    // item{min,max} = item{min} item{0,n}; item{0,n} = (item{K}){0,q-1} item{0,K-1} | (item{K}){q} item{0,r}
    const n = max - min, k = MAX_NATIVE_REPEAT, q = Math.floor(n / k), r = n % k;
    if (q > MAX_NATIVE_REPEAT) throw new StructuredOutputError(`repetition bound ${max} is too large (at most ${k * k})`);
    const block = `(${repeat(item, k, k)})`;
    const tail = `(${repeat(block, 0, q - 1)} ${repeat(item, 0, k - 1)} | ${repeat(block, q, q)} ${repeat(item, 0, r)})`;
    return min > 0 ? `(${repeat(item, min, min)} ${tail})` : tail;
  }
  if (max === Infinity) return `${item}{${min},}`;
  return min === max ? `${item}{${min}}` : `${item}{${min},${max}}`;
}

/** A rule name hint reduced to [a-zA-Z0-9-]+ (never empty, never `root`). */
function sanitizeName(hint: string): string {
  const s = hint.replace(/[^a-zA-Z0-9-]+/g, '-').replace(/-+/g, '-').replace(/^-|-$/g, '');
  if (s === '' || s === 'root') return 'r';
  return s.length > 48 ? s.slice(0, 48).replace(/-$/, '') : s;
}

/** Collects named rules and prints a whole grammar. */
export class GrammarBuilder {
  private readonly bodies = new Map<string, string | null>(); // name -> body; null while reserved
  private readonly byBody = new Map<string, string>(); // body -> name (dedupe)
  private readonly memo = new Map<string, string>(); // cached(key) -> name

  literal(text: string): string {
    return literal(text);
  }

  charClass(ranges: readonly CodeRange[], negated = false): string {
    return charClass(ranges, negated);
  }

  repeat(item: string, min: number, max: number): string {
    return repeat(item, min, max);
  }

  /** Defines a rule and returns its name; a rule with the same body returns the existing name. */
  rule(nameHint: string, body: string): string {
    const existing = this.byBody.get(body);
    if (existing !== undefined) return existing;
    const name = this.reserve(nameHint);
    this.define(name, body);
    return name;
  }

  /** Reserves a unique name for a rule whose body is not known yet (recursion); define() must follow. */
  reserve(nameHint: string): string {
    const base = sanitizeName(nameHint);
    let name = base;
    for (let i = 2; this.bodies.has(name) || name === 'root'; ++i) name = `${base}-${i}`;
    this.bodies.set(name, null);
    return name;
  }

  define(name: string, body: string): void {
    if (this.bodies.get(name) !== null) throw new Error(`GrammarBuilder: rule '${name}' is not reserved or already defined`);
    this.bodies.set(name, body);
    if (!this.byBody.has(body)) this.byBody.set(body, name);
  }

  /** The rule registered under `key`, made once by `make(name)` (which may refer to `name` recursively). */
  cached(key: string, nameHint: string, make: (name: string) => string): string {
    const hit = this.memo.get(key);
    if (hit !== undefined) return hit;
    const name = this.reserve(nameHint);
    this.memo.set(key, name);
    this.define(name, make(name));
    return name;
  }

  /** The whole grammar: `root ::= rootBody` first, then every rule in definition order. */
  build(rootBody: string): string {
    const lines = [`root ::= ${rootBody}`];
    for (const [name, body] of this.bodies) {
      if (body === null) throw new Error(`GrammarBuilder: rule '${name}' was reserved but never defined`);
      lines.push(`${name} ::= ${body}`);
    }
    return lines.join('\n') + '\n';
  }
}
