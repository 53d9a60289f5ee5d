// Go text/template source -> tokens, following Go's lexer (text/template/parse/lex.go).
// Invariant: text outside {{ }} comes out verbatim except where a trim marker ("{{- " / " -}}", the dash beside
// a space, tab, CR or LF) strips the adjacent whitespace; comments ({{/* */}}, also trimmed) produce no token;
// inside an action every token records whether whitespace preceded it, because Go separates operands by space
// (`.A.B` is one field chain, `.A .B` two operands). Malformed input is a TemplateError at the offending spot.
import { errorAt } from './errors.js';

export type TokenKind =
  | 'text' | 'open' | 'close' | 'eof'
  | 'identifier' | 'keyword' | 'field' | 'variable' | 'dot' | 'nil' | 'bool'
  | 'number' | 'char' | 'string'
  | 'pipe' | 'lparen' | 'rparen' | 'declare' | 'assign' | 'comma';

export interface Token {
  kind: TokenKind;
  /** text: the (trimmed) text; identifier/keyword/field/variable: the name (field without its dot, variable with
   *  its $); number: the literal as written; string: the decoded value; char: the decoded character; bool: "true"/"false". */
  value: string;
  start: number;
  end: number;
  /** Whitespace came before this token inside the action. */
  space: boolean;
}

const KEYWORDS = new Set(['block', 'break', 'continue', 'define', 'else', 'end', 'if', 'range', 'template', 'with']);
const SPACE = ' \t\r\n';

const isSpace = (c: string | undefined): boolean => c !== undefined && c !== '' && SPACE.includes(c);
const isAlnum = (c: string | undefined): boolean => c !== undefined && /^[\p{L}\p{Nd}_]$/u.test(c);
const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';

export function lex(src: string): Token[] {
  return new Lexer(src).run();
}

class Lexer {
  private pos = 0;
  private readonly tokens: Token[] = [];
  private trimNext = false;

  constructor(private readonly src: string) {}

  run(): Token[] {
    const src = this.src;
    while (this.pos < src.length) {
      const open = src.indexOf('{{', this.pos);
      this.text(src.slice(this.pos, open < 0 ? src.length : open), this.pos);
      if (open < 0) break;
      this.action(open);
    }
    this.tokens.push({ kind: 'eof', value: '', start: src.length, end: src.length, space: false });
    return this.tokens;
  }

  private text(s: string, start: number): void {
    if (this.trimNext) {
      const trimmed = s.replace(/^[ \t\r\n]+/, '');
      start += s.length - trimmed.length;
      s = trimmed;
      this.trimNext = false;
    }
    if (s.length > 0) this.tokens.push({ kind: 'text', value: s, start, end: start + s.length, space: false });
  }

  private trimPreviousText(): void {
    const last = this.tokens[this.tokens.length - 1];
    if (last?.kind !== 'text') return;
    last.value = last.value.replace(/[ \t\r\n]+$/, '');
    last.end = last.start + last.value.length;
    if (last.value.length === 0) this.tokens.pop();
  }

  /** Closing delimiter at `p`: "}}" -> length 2, " -}}" -> length 4 (trims what follows), otherwise 0. */
  private closeAt(p: number): number {
    const src = this.src;
    if (src.startsWith('}}', p)) return 2;
    if (isSpace(src[p]) && src[p + 1] === '-' && src.startsWith('}}', p + 2)) return 4;
    return 0;
  }

  private action(open: number): void {
    const src = this.src;
    let p = open + 2;
    if (src[p] === '-' && isSpace(src[p + 1])) {
      this.trimPreviousText();
      p += 2;
    }
    if (src.startsWith('/*', p)) {
      const endComment = src.indexOf('*/', p + 2);
      if (endComment < 0) throw errorAt(src, open, 'unclosed comment');
      const close = this.closeAt(endComment + 2);
      if (close === 0) throw errorAt(src, endComment, 'comment ends before closing delimiter');
      this.trimNext = close === 4;
      this.pos = endComment + 2 + close;
      return;
    }
    this.tokens.push({ kind: 'open', value: '{{', start: open, end: open + 2, space: false });
    this.pos = p;
    this.inside(open);
  }

  private inside(open: number): void {
    const src = this.src;
    let space = false;
    let depth = 0;
    for (;;) {
      if (this.pos >= src.length) throw errorAt(src, open, 'unclosed action');
      const close = this.closeAt(this.pos);
      if (close > 0) {
        if (depth > 0) throw errorAt(src, this.pos, 'unclosed left paren');
        this.tokens.push({ kind: 'close', value: '}}', start: this.pos, end: this.pos + close, space });
        this.trimNext = close === 4;
        this.pos += close;
        return;
      }
      const c = src[this.pos]!;
      if (isSpace(c)) {
        space = true;
        this.pos++;
        continue;
      }
      if (c === '(') depth++;
      if (c === ')' && --depth < 0) throw errorAt(src, this.pos, 'unexpected right paren');
      this.token(space);
      space = false;
    }
  }

  private push(kind: TokenKind, value: string, start: number, space: boolean): void {
    this.tokens.push({ kind, value, start, end: this.pos, space });
  }

  private token(space: boolean): void {
    const src = this.src;
    const start = this.pos;
    const c = src[start]!;
    const single: Record<string, TokenKind> = { '|': 'pipe', '(': 'lparen', ')': 'rparen', ',': 'comma', '=': 'assign' };
    if (single[c]) {
      this.pos++;
      return this.push(single[c]!, c, start, space);
    }
    if (c === ':') {
      if (src[start + 1] !== '=') throw errorAt(src, start, 'expected :=');
      this.pos += 2;
      return this.push('declare', ':=', start, space);
    }
    if (c === '"') return this.push('string', this.quoted(), start, space);
    if (c === '`') return this.push('string', this.raw(), start, space);
    if (c === "'") return this.push('char', this.char(), start, space);
    if (c === '$') {
      this.pos++;
      const name = '$' + this.word();
      this.terminator();
      return this.push('variable', name, start, space);
    }
    if (c === '.' && !isDigit(src[start + 1])) {
      this.pos++;
      if (!isAlnum(src[this.pos])) return this.push('dot', '.', start, space);
      const name = this.word();
      this.terminator();
      return this.push('field', name, start, space);
    }
    if (c === '.' || c === '+' || c === '-' || isDigit(c)) return this.push('number', this.number(), start, space);
    if (isAlnum(c)) {
      const word = this.word();
      this.terminator();
      if (word === 'true' || word === 'false') return this.push('bool', word, start, space);
      if (word === 'nil') return this.push('nil', word, start, space);
      return this.push(KEYWORDS.has(word) ? 'keyword' : 'identifier', word, start, space);
    }
    throw errorAt(src, start, `unrecognized character in action: ${JSON.stringify(c)}`);
  }

  private word(): string {
    const start = this.pos;
    while (isAlnum(this.src[this.pos])) this.pos++;
    return this.src.slice(start, this.pos);
  }

  /** After a name Go wants a space, '.', ',', '|', ':', '(', ')' or the closing delimiter. */
  private terminator(): void {
    const c = this.src[this.pos];
    if (c === undefined || isSpace(c) || '.,|:()'.includes(c) || this.closeAt(this.pos) > 0) return;
    throw errorAt(this.src, this.pos, `bad character ${JSON.stringify(c)}`);
  }

  private number(): string {
    const src = this.src;
    const start = this.pos;
    const m = /^[+-]?(0[xX][0-9a-fA-F_]*\.?[0-9a-fA-F_]*([pP][+-]?[0-9_]+)?|0[oO][0-7_]+|0[bB][01_]+|[0-9_]*\.?[0-9_]*([eE][+-]?[0-9_]+)?)i?/
      .exec(src.slice(start));
    const text = m ? m[0] : '';
    this.pos = start + text.length;
    if (text === '' || isAlnum(src[this.pos]) || !/[0-9]/.test(text)) {
      while (isAlnum(src[this.pos]) || src[this.pos] === '.') this.pos++;
      throw errorAt(src, start, `bad number syntax: ${JSON.stringify(src.slice(start, Math.max(this.pos, start + 1)))}`);
    }
    return text;
  }

  private quoted(): string {
    const src = this.src;
    const start = this.pos;
    let out = '';
    let p = start + 1;
    for (;;) {
      const c = src[p];
      if (c === undefined || c === '\n') throw errorAt(src, start, 'unterminated quoted string');
      if (c === '"') break;
      if (c === '\\') {
        const [s, next] = unescape(src, p, '"');
        out += s;
        p = next;
      } else {
        out += c;
        p++;
      }
    }
    this.pos = p + 1;
    return out;
  }

  private raw(): string {
    const end = this.src.indexOf('`', this.pos + 1);
    if (end < 0) throw errorAt(this.src, this.pos, 'unterminated raw quoted string');
    const value = this.src.slice(this.pos + 1, end).replace(/\r/g, '');
    this.pos = end + 1;
    return value;
  }

  private char(): string {
    const src = this.src;
    const start = this.pos;
    let p = start + 1;
    let value: string;
    if (src[p] === '\\') [value, p] = unescape(src, p, "'");
    else {
      const cp = src.codePointAt(p);
      if (cp === undefined || src[p] === "'" || src[p] === '\n') throw errorAt(src, start, 'unterminated character constant');
      value = String.fromCodePoint(cp);
      p += value.length;
    }
    if (src[p] !== "'") throw errorAt(src, start, 'unterminated character constant');
    this.pos = p + 1;
    return value;
  }
}

const SIMPLE_ESCAPES: Record<string, string> = { a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\' };

/** Go escape at src[p] (a backslash) inside a literal quoted with `quote` -> [decoded, index after]. */
function unescape(src: string, p: number, quote: string): [string, number] {
  const c = src[p + 1];
  if (c === undefined) throw errorAt(src, p, 'unterminated escape');
  if (SIMPLE_ESCAPES[c] !== undefined) return [SIMPLE_ESCAPES[c]!, p + 2];
  if (c === quote) return [quote, p + 2];
  const hex = (len: number): [string, number] => {
    const digits = src.slice(p + 2, p + 2 + len);
    if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(digits)) throw errorAt(src, p, `invalid escape \\${c}${digits}`);
    const cp = parseInt(digits, 16);
    if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) throw errorAt(src, p, `invalid escape \\${c}${digits}`);
    return [String.fromCodePoint(cp), p + 2 + len];
  };
  if (c === 'x') {
    const [s, next] = hex(2);
    return [String.fromCharCode(s.codePointAt(0)!), next]; // a byte; text templates carry text, so as Latin-1
  }
  if (c === 'u') return hex(4);
  if (c === 'U') return hex(8);
  if (c >= '0' && c <= '7') {
    const digits = src.slice(p + 1, p + 4);
    if (!/^[0-7]{3}$/.test(digits) || parseInt(digits, 8) > 255) throw errorAt(src, p, `invalid escape \\${digits}`);
    return [String.fromCharCode(parseInt(digits, 8)), p + 4];
  }
  throw errorAt(src, p, `unknown escape sequence \\${c}`);
}
