// ECMAScript regular expression -> GBNF, matching the whole text (as `^(?:pattern)$` with the `u` flag would).
// Invariant: the grammar accepts exactly the strings the pattern matches in full, over Unicode code points;
// anything whose meaning a context-free grammar cannot carry (lookaround, backreferences, word boundaries,
// anchors inside the pattern, flags, Unicode property escapes) is refused with its position (0-based, in
// code points). In JSON mode the grammar matches the JSON string text whose decoded content the pattern
// matches: `"`, `\` and U+0000..U+001F are written escaped (short escapes, else \u00XX), other characters raw.
import {
  GrammarBuilder, StructuredOutputError, charClass, codePoints, complementRanges, intersectRanges, literal,
  normalizeRanges, repeat, type CodeRange,
} from './gbnf.js';

/** Regex syntax tree over code points. A `seq` with no items is the empty string. */
export type RegexNode =
  | { kind: 'set'; ranges: CodeRange[] } // one code point in ranges (normalized)
  | { kind: 'seq'; items: RegexNode[] }
  | { kind: 'alt'; alts: RegexNode[] }
  | { kind: 'repeat'; item: RegexNode; min: number; max: number }; // max = Infinity: unbounded

const SUPPORTED = 'supported: literals, escapes \\d \\w \\s \\D \\W \\S \\n \\t \\r \\f \\v \\0 \\xHH \\uHHHH \\u{H..} \\cX, ' +
  '`.`, classes [...] / [^...], groups (...) (?:...) (?<name>...), |, quantifiers * + ? {m} {m,} {m,n} (lazy too), ' +
  'and ^ / $ at the start / end';

const DIGIT: CodeRange[] = [[0x30, 0x39]];
const WORD: CodeRange[] = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE: CodeRange[] = normalizeRanges([
  [0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029],
  [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff],
]);
const LINE_TERMINATORS: CodeRange[] = [[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]];
const SYNTAX_CHARS = new Set('^$\\.*+?()[]{}|/-'.split('').map((c) => c.codePointAt(0)!));

const set = (ranges: readonly CodeRange[]): RegexNode => ({ kind: 'set', ranges: normalizeRanges(ranges) });
const EMPTY: RegexNode = { kind: 'seq', items: [] };

function fail(pattern: string, pos: number, what: string): never {
  throw new StructuredOutputError(`regex ${JSON.stringify(pattern)}: ${what} at position ${pos} (${SUPPORTED})`);
}

class RegexParser {
  private readonly cps: number[];
  private pos = 0;

  constructor(private readonly src: string) {
    this.cps = codePoints(src, 'regex');
  }

  parse(): RegexNode {
    const node = this.parseAlternatives(true);
    if (this.pos < this.cps.length) this.fail(this.pos, "unmatched ')'");
    return node;
  }

  private fail(at: number, what: string): never {
    return fail(this.src, at, what);
  }

  private peek(offset = 0): string {
    const cp = this.cps[this.pos + offset];
    return cp === undefined ? '' : String.fromCodePoint(cp);
  }

  private eof(): boolean {
    return this.pos >= this.cps.length;
  }

  private parseAlternatives(top: boolean): RegexNode {
    const alts = [this.parseSequence(top)];
    while (this.peek() === '|') {
      ++this.pos;
      alts.push(this.parseSequence(top));
    }
    return alts.length === 1 ? alts[0] : { kind: 'alt', alts };
  }

  private parseSequence(top: boolean): RegexNode {
    const items: RegexNode[] = [];
    let sawStart = false;
    while (!this.eof() && this.peek() !== '|' && this.peek() !== ')') {
      const at = this.pos;
      const c = this.peek();
      if (c === '^') {
        if (!top || items.length > 0 || sawStart) this.fail(at, "anchor '^' inside the pattern");
        ++this.pos;
        sawStart = true;
        this.noQuantifier('^');
        continue;
      }
      if (c === '$') {
        ++this.pos;
        if (!top || !(this.eof() || this.peek() === '|')) this.fail(at, "anchor '$' inside the pattern");
        continue;
      }
      let atom = this.parseAtom();
      atom = this.parseQuantifiers(atom);
      items.push(atom);
    }
    return items.length === 1 ? items[0] : { kind: 'seq', items };
  }

  private noQuantifier(what: string): void {
    if ('*+?'.includes(this.peek()) && !this.eof()) this.fail(this.pos, `quantifier after '${what}' (nothing to repeat)`);
    if (this.peek() === '{' && this.quantifierAhead()) this.fail(this.pos, `quantifier after '${what}' (nothing to repeat)`);
  }

  private quantifierAhead(): boolean {
    let i = this.pos + 1;
    const digit = (k: number) => this.cps[k] !== undefined && this.cps[k] >= 0x30 && this.cps[k] <= 0x39;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
    if (this.cps[i] === 0x2c) {
      ++i;
      while (digit(i)) ++i;
    }
    return this.cps[i] === 0x7d;
  }

  private readInt(): number {
    let v = 0;
    const start = this.pos;
    while (!this.eof() && this.peek() >= '0' && this.peek() <= '9') {
      v = v * 10 + (this.cps[this.pos] - 0x30);
      if (v > 1e9) this.fail(start, 'repetition count too large');
      ++this.pos;
    }
    return v;
  }

  private parseQuantifiers(atom: RegexNode): RegexNode {
    const at = this.pos;
    const c = this.peek();
    let min: number, max: number;
    if (c === '*') { min = 0; max = Infinity; ++this.pos; }
    else if (c === '+') { min = 1; max = Infinity; ++this.pos; }
    else if (c === '?') { min = 0; max = 1; ++this.pos; }
    else if (c === '{' && this.quantifierAhead()) {
      ++this.pos;
      min = this.readInt();
      max = min;
      if (this.peek() === ',') {
        ++this.pos;
        max = this.peek() === '}' ? Infinity : this.readInt();
      }
      ++this.pos; // '}'
      if (max < min) this.fail(at, `quantifier {${min},${max}} has its maximum below its minimum`);
    } else {
      return atom;
    }
    if (this.peek() === '?') ++this.pos; // lazy: same language
    const next = this.peek();
    if (next === '*' || next === '+' || next === '?' || (next === '{' && this.quantifierAhead())) {
      this.fail(this.pos, 'quantifier after a quantifier (nothing to repeat)');
    }
    return { kind: 'repeat', item: atom, min, max };
  }

  private parseAtom(): RegexNode {
    const at = this.pos;
    const c = this.peek();
    switch (c) {
      case '(': return this.parseGroup();
      case '[': return this.parseClass();
      case '.': ++this.pos; return set(complementRanges(LINE_TERMINATORS));
      case '\\': return this.parseEscape(false).node;
      case '*': case '+': case '?': this.fail(at, `quantifier '${c}' with nothing to repeat`);
      // eslint-disable-next-line no-fallthrough
      case '{':
        this.fail(at, this.quantifierAhead() ? 'quantifier with nothing to repeat' : "lone '{' (write \\{ for the character)");
      // eslint-disable-next-line no-fallthrough
      case '}': this.fail(at, "lone '}' (write \\} for the character)");
      // eslint-disable-next-line no-fallthrough
      case ']': this.fail(at, "lone ']' (write \\] for the character)");
    }
    const cp = this.cps[this.pos++];
    return set([[cp, cp]]);
  }

  private parseGroup(): RegexNode {
    const at = this.pos;
    ++this.pos; // '('
    if (this.peek() === '?') {
      const next = this.peek(1);
      if (next === ':') {
        this.pos += 2;
      } else if (next === '=' || next === '!') {
        this.fail(at, `lookahead '(?${next}' is not supported`);
      } else if (next === '<' && (this.peek(2) === '=' || this.peek(2) === '!')) {
        this.fail(at, `lookbehind '(?<${this.peek(2)}' is not supported`);
      } else if (next === '<') {
        this.pos += 2;
        const nameStart = this.pos;
        while (!this.eof() && /[\p{ID_Continue}$\u200c\u200d]/u.test(this.peek())) ++this.pos;
        if (this.pos === nameStart || this.peek() !== '>') this.fail(at, 'bad group name in (?<name>...)');
        ++this.pos;
      } else {
        this.fail(at, `group modifier '(?${next}' (inline flags) is not supported`);
      }
    }
    const inner = this.parseAlternatives(false);
    if (this.peek() !== ')') this.fail(at, "unclosed '('");
    ++this.pos;
    return inner;
  }

  private hexDigits(n: number, at: number, what: string): number {
    let v = 0;
    for (let i = 0; i < n; ++i) {
      const d = parseInt(this.peek(), 16);
      if (Number.isNaN(d) || this.eof()) this.fail(at, `bad escape ${what}: expected ${n} hex digits`);
      v = v * 16 + d;
      ++this.pos;
    }
    return v;
  }

  /** \uHHHH (joining a surrogate pair written as two escapes) or \u{H...}; pos is just after 'u'. */
  private unicodeEscape(at: number): number {
    if (this.peek() === '{') {
      ++this.pos;
      let v = 0, n = 0;
      while (!this.eof() && this.peek() !== '}') {
        const d = parseInt(this.peek(), 16);
        if (Number.isNaN(d)) this.fail(at, 'bad escape \\u{...}: expected hex digits');
        v = v * 16 + d;
        if (v > 0x10ffff) this.fail(at, 'bad escape \\u{...}: code point above U+10FFFF');
        ++this.pos;
        ++n;
      }
      if (this.eof() || n === 0) this.fail(at, 'bad escape \\u{...}');
      ++this.pos;
      if (v >= 0xd800 && v <= 0xdfff) this.fail(at, 'lone surrogate escape');
      return v;
    }
    const v = this.hexDigits(4, at, '\\uHHHH');
    if (v >= 0xd800 && v <= 0xdbff && this.peek() === '\\' && this.peek(1) === 'u') {
      const save = this.pos;
      this.pos += 2;
      const lo = this.peek() === '{' ? -1 : this.hexDigits(4, at, '\\uHHHH');
      if (lo >= 0xdc00 && lo <= 0xdfff) return 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
      this.pos = save;
    }
    if (v >= 0xd800 && v <= 0xdfff) this.fail(at, 'lone surrogate escape');
    return v;
  }

  /** An escape after '\\'; `set` is true for class escapes (\d \w \s and complements). */
  private parseEscape(inClass: boolean): { node: RegexNode; single: number | null } {
    const at = this.pos;
    ++this.pos; // '\\'
    if (this.eof()) this.fail(at, 'trailing backslash');
    const c = this.peek();
    ++this.pos;
    const one = (cp: number) => ({ node: set([[cp, cp]]), single: cp });
    const many = (ranges: readonly CodeRange[]) => ({ node: set(ranges), single: null });
    switch (c) {
      case 'd': return many(DIGIT);
      case 'D': return many(complementRanges(DIGIT));
      case 'w': return many(WORD);
      case 'W': return many(complementRanges(WORD));
      case 's': return many(SPACE);
      case 'S': return many(complementRanges(SPACE));
      case 'n': return one(0x0a);
      case 't': return one(0x09);
      case 'r': return one(0x0d);
      case 'f': return one(0x0c);
      case 'v': return one(0x0b);
      case 'b':
        if (inClass) return one(0x08);
        this.fail(at, "word boundary '\\b' is not supported");
      // eslint-disable-next-line no-fallthrough
      case 'B': this.fail(at, "non-word-boundary '\\B' is not supported");
      // eslint-disable-next-line no-fallthrough
      case '0':
        if (this.peek() >= '0' && this.peek() <= '9' && !this.eof()) this.fail(at, 'octal escape is not supported');
        return one(0);
      case 'x': return one(this.hexDigits(2, at, '\\xHH'));
      case 'u': return one(this.unicodeEscape(at));
      case 'c': {
        const l = this.peek();
        if (!/^[A-Za-z]$/.test(l)) this.fail(at, 'bad control escape \\c (expected a letter)');
        ++this.pos;
        return one(l.codePointAt(0)! % 32);
      }
      case 'k': this.fail(at, "named backreference '\\k<...>' is not supported");
      // eslint-disable-next-line no-fallthrough
      case 'p': case 'P': this.fail(at, `Unicode property escape '\\${c}{...}' is not supported`);
    }
    if (c >= '1' && c <= '9') this.fail(at, `backreference '\\${c}' is not supported`);
    const cp = c.codePointAt(0)!;
    if (SYNTAX_CHARS.has(cp) || (cp < 0x80 && !/[A-Za-z0-9_]/.test(c)) || cp >= 0x80) return one(cp);
    return this.fail(at, `unknown escape '\\${c}'`);
  }

  private parseClass(): RegexNode {
    const at = this.pos;
    ++this.pos; // '['
    let negated = false;
    if (this.peek() === '^') { negated = true; ++this.pos; }
    const ranges: CodeRange[] = [];
    const item = (): { ranges: readonly CodeRange[]; single: number | null; at: number } => {
      const itemAt = this.pos;
      if (this.peek() === '\\') {
        const e = this.parseEscape(true);
        return { ranges: (e.node as { ranges: CodeRange[] }).ranges, single: e.single, at: itemAt };
      }
      const cp = this.cps[this.pos++];
      return { ranges: [[cp, cp]], single: cp, at: itemAt };
    };
    while (this.peek() !== ']') {
      if (this.eof()) this.fail(at, "unclosed '['");
      const a = item();
      if (this.peek() === '-' && this.peek(1) !== ']' && this.pos + 1 < this.cps.length) {
        ++this.pos;
        const b = item();
        if (a.single === null || b.single === null) this.fail(a.at, 'class escape used as a range endpoint');
        if (b.single < a.single) this.fail(a.at, 'character class range out of order');
        ranges.push([a.single, b.single]);
      } else {
        ranges.push(...a.ranges);
      }
    }
    ++this.pos; // ']'
    return set(negated ? complementRanges(ranges) : ranges);
  }
}

/** Parses an ECMAScript regex (the pattern text, no slashes or flags) into a syntax tree. */
export function parseRegex(pattern: string): RegexNode {
  if (typeof pattern !== 'string') throw new StructuredOutputError('regex pattern must be a string');
  return new RegexParser(pattern).parse();
}

export function regexNullable(n: RegexNode): boolean {
  switch (n.kind) {
    case 'set': return false;
    case 'seq': return n.items.every(regexNullable);
    case 'alt': return n.alts.some(regexNullable);
    case 'repeat': return n.min === 0 || regexNullable(n.item);
  }
}

/** The language of n minus the empty string, or null when n matches only the empty string. */
function nonEmpty(n: RegexNode): RegexNode | null {
  if (!regexNullable(n)) return n;
  switch (n.kind) {
    case 'set': return n;
    case 'seq': {
      // all items nullable: the first non-empty item is item i, the ones before it are empty
      const alts: RegexNode[] = [];
      n.items.forEach((item, i) => {
        const head = nonEmpty(item);
        if (head) alts.push({ kind: 'seq', items: [head, ...n.items.slice(i + 1)] });
      });
      return alts.length === 0 ? null : alts.length === 1 ? alts[0] : { kind: 'alt', alts };
    }
    case 'alt': {
      const alts = n.alts.map(nonEmpty).filter((a): a is RegexNode => a !== null);
      return alts.length === 0 ? null : alts.length === 1 ? alts[0] : { kind: 'alt', alts };
    }
    case 'repeat': {
      // X{m,n} with the empty string possible = X{0,n}; minus empty = X' X{0,n-1}
      const head = nonEmpty(n.item);
      if (!head || n.max === 0) return null;
      if (n.max === 1) return head;
      return { kind: 'seq', items: [head, { kind: 'repeat', item: n.item, min: 0, max: n.max - 1 }] };
    }
  }
}

/** Shortest and longest match length in code points (longest may be Infinity); null if nothing matches. */
export function regexLengthRange(n: RegexNode): [number, number] | null {
  switch (n.kind) {
    case 'set': return n.ranges.length === 0 ? null : [1, 1];
    case 'seq': {
      let lo = 0, hi = 0;
      for (const item of n.items) {
        const r = regexLengthRange(item);
        if (!r) return null;
        lo += r[0];
        hi += r[1];
      }
      return [lo, hi];
    }
    case 'alt': {
      const rs = n.alts.map(regexLengthRange).filter((r): r is [number, number] => r !== null);
      if (rs.length === 0) return null;
      return [Math.min(...rs.map((r) => r[0])), Math.max(...rs.map((r) => r[1]))];
    }
    case 'repeat': {
      const r = regexLengthRange(n.item);
      if (!r) return n.min === 0 ? [0, 0] : null;
      const hi = n.max === 0 ? 0 : r[1] === 0 ? 0 : r[1] * n.max;
      return [r[0] * n.min, Number.isNaN(hi) ? 0 : hi];
    }
  }
}

// JSON mode: characters that a JSON string must escape.
const JSON_SPECIAL: CodeRange[] = [[0x00, 0x1f], [0x22, 0x22], [0x5c, 0x5c]];
const JSON_SHORT: ReadonlyMap<number, string> = new Map([
  [0x22, '"'], [0x5c, '\\'], [0x08, 'b'], [0x0c, 'f'], [0x0a, 'n'], [0x0d, 'r'], [0x09, 't'],
]);

function inRanges(ranges: readonly CodeRange[], cp: number): boolean {
  return ranges.some(([lo, hi]) => cp >= lo && cp <= hi);
}

/** A class for `ranges`, written negated when that is shorter. */
function bestClass(ranges: readonly CodeRange[]): string {
  const comp = complementRanges(ranges);
  return comp.length < ranges.length ? charClass(comp, true) : charClass(ranges);
}

function hexDigitClass(digits: number[]): string {
  const ranges: CodeRange[] = [];
  for (const d of digits) {
    const lower = d.toString(16).codePointAt(0)!, upper = d.toString(16).toUpperCase().codePointAt(0)!;
    ranges.push([lower, lower], [upper, upper]);
  }
  return charClass(ranges);
}

/** The text of one character in a JSON string, for a set of code points (JSON mode). */
function jsonSetExpr(ranges: readonly CodeRange[]): string {
  const alts: string[] = [];
  const raw = intersectRanges(ranges, complementRanges(JSON_SPECIAL));
  if (raw.length > 0) alts.push(bestClass(raw));
  const short = [...JSON_SHORT.entries()].filter(([cp]) => inRanges(ranges, cp)).map(([, e]) => e.codePointAt(0)!);
  if (short.length > 0) alts.push(`"\\\\" ${charClass(short.map((c) => [c, c] as const))}`);
  const byHigh: number[][] = [[], []];
  for (let cp = 0; cp < 0x20; ++cp) if (!JSON_SHORT.has(cp) && inRanges(ranges, cp)) byHigh[cp >> 4].push(cp & 15);
  const u = byHigh.map((lows, high) => (lows.length ? `"${high}" ${hexDigitClass(lows)}` : '')).filter(Boolean);
  if (u.length > 0) alts.push(`"\\\\u00" ${u.length > 1 ? `(${u.join(' | ')})` : u[0]}`);
  if (alts.length === 0) return '[]';
  return alts.length === 1 ? alts[0] : `(${alts.join(' | ')})`;
}

/** The literal text of a single code point (raw mode) or its JSON string text (JSON mode), or null if none. */
function singleText(cp: number, json: boolean): string | null {
  if (!json) return String.fromCodePoint(cp);
  if (JSON_SHORT.has(cp)) return '\\' + JSON_SHORT.get(cp)!;
  if (cp < 0x20) return null; // \u00XX: hex digits in either case, left to jsonSetExpr
  return String.fromCodePoint(cp);
}

/** Bound on the GBNF text of one pattern (nested repetitions of optional parts are written out twice). */
const MAX_REGEX_GBNF_CHARS = 1 << 20;

/** GBNF for a regex tree: an expression that is safe to place in a sequence. */
export function regexToGbnf(n: RegexNode, json: boolean): string {
  const out = render(n, json);
  if (out.length > MAX_REGEX_GBNF_CHARS) {
    throw new StructuredOutputError(`regex is too complex: its grammar would exceed ${MAX_REGEX_GBNF_CHARS} characters`);
  }
  return out;
}

function render(n: RegexNode, json: boolean): string {
  switch (n.kind) {
    case 'set': {
      if (n.ranges.length === 1 && n.ranges[0][0] === n.ranges[0][1]) {
        const t = singleText(n.ranges[0][0], json);
        if (t !== null) return literal(t);
      }
      return json ? jsonSetExpr(n.ranges) : bestClass(n.ranges);
    }
    case 'seq': {
      if (n.items.length === 0) return '""';
      const parts: string[] = [];
      let text = '';
      for (const item of n.items) {
        const single = item.kind === 'set' && item.ranges.length === 1 && item.ranges[0][0] === item.ranges[0][1]
          ? singleText(item.ranges[0][0], json) : null;
        if (single !== null) { text += single; continue; }
        if (text) { parts.push(literal(text)); text = ''; }
        parts.push(render(item, json));
      }
      if (text) parts.push(literal(text));
      return parts.length === 1 ? parts[0] : `(${parts.join(' ')})`;
    }
    case 'alt': return `(${n.alts.map((a) => render(a, json)).join(' | ')})`;
    case 'repeat': {
      if (n.max === 0) return '""';
      if (!regexNullable(n.item)) return repeat(render(n.item, json), n.min, n.max);
      // X nullable: X{m,n} = (X minus empty){0,n}; unbounded repetition needs a non-empty item
      const ne = nonEmpty(n.item);
      if (!ne) return '""';
      return repeat(`(${render(ne, json)})`, 0, n.max);
    }
  }
}

export interface RegexRuleOptions {
  /** Match the JSON string (quotes included) whose decoded content the pattern matches. */
  json?: boolean;
  nameHint?: string;
}

/** Defines a rule for `pattern` in `b` (see RegexRuleOptions) and returns its name. */
export function regexRule(b: GrammarBuilder, pattern: string, options: RegexRuleOptions = {}): string {
  const tree = parseRegex(pattern);
  const body = regexToGbnf(tree, options.json === true);
  return b.rule(options.nameHint ?? 'pattern', options.json ? `"\\"" ${body} "\\""` : body);
}

/** Full grammar whose sentences are exactly the strings `pattern` matches in full. */
export function compileRegex(pattern: string): string {
  const b = new GrammarBuilder();
  return b.build(regexToGbnf(parseRegex(pattern), false));
}
