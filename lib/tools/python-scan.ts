// A scanner for Python-style tool calls, `[f(a=1, b='x'), g()]`: keyword arguments (names as lax as tool
// schemas need) whose values are Python literals (str with escapes and implicit concatenation, numbers,
// True/False/None and JSON's true/false/null, list, tuple, dict, set), converted to JSON as json.dumps would.
// Invariant: prefix-stable (scan.ts): running out of text anywhere is 'incomplete', never 'error'.
import { JsonNumber, type JsonObject, type JsonValue } from './json-value.js';
import { MAX_DEPTH, ScanError, ScanIncomplete, isWs, runScan, type ScanResult } from './scan.js';

export interface PyCall {
  name: string;
  args: JsonObject;
}

/** Scans `[call, call, ...]` (at least one call, trailing comma allowed) starting at `pos`, which must be '['. */
export function scanPythonCallList(text: string, pos: number): ScanResult<PyCall[]> {
  return runScan(() => {
    const s = new PyScanner(text, pos);
    const calls = s.callList();
    return { value: calls, end: s.pos };
  });
}

/** Scans one call `name(k=v, ...)` starting at `pos`. */
export function scanPythonCall(text: string, pos: number): ScanResult<PyCall> {
  return runScan(() => {
    const s = new PyScanner(text, pos);
    const call = s.call();
    return { value: call, end: s.pos };
  });
}

const LITERAL_NAMES: Record<string, JsonValue> = { True: true, False: false, None: null, true: true, false: false, null: null };
const SIMPLE_ESCAPES: Record<string, string> = {
  '\\': '\\', "'": "'", '"': '"', a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v',
};
const STRING_PREFIXES = new Set(['r', 'u', 'b', 'f', 'br', 'rb', 'fr', 'rf']);
const DIGITS = String.raw`\d(?:_?\d)*`;
const INT_RE = new RegExp(`^(?:${DIGITS}|0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+)$`);
const FLOAT_RE = new RegExp(
  `^(?:(?:${DIGITS}\\.(?:${DIGITS})?|\\.${DIGITS})(?:[eE][+-]?${DIGITS})?|${DIGITS}[eE][+-]?${DIGITS})$`,
);

function isIdStart(c: string): boolean {
  return /[\p{L}_]/u.test(c);
}
function isIdChar(c: string): boolean {
  return /[\p{L}\p{N}_]/u.test(c);
}
function isNameChar(c: string): boolean {
  return /[\p{L}\p{N}_-]/u.test(c);
}
function isKeywordChar(c: string): boolean {
  return !/[\s=,()[\]{}'"]/.test(c);
}
function isQuote(c: string): boolean {
  return c === "'" || c === '"';
}

class PyScanner {
  constructor(
    readonly text: string,
    public pos: number,
  ) {}

  private peek(): string {
    if (this.pos >= this.text.length) throw new ScanIncomplete();
    return this.text[this.pos];
  }

  private ws(): void {
    while (this.pos < this.text.length && isWs(this.text[this.pos])) this.pos++;
  }

  private expect(c: string): void {
    if (this.peek() !== c) throw new ScanError();
    this.pos++;
  }

  /** Comma-separated items up to `close`, trailing comma allowed; `item` reads one (after whitespace). */
  private items(close: string, item: () => void): void {
    this.ws();
    if (this.peek() === close) {
      this.pos++;
      return;
    }
    for (;;) {
      item();
      this.ws();
      const c = this.peek();
      this.pos++;
      if (c === close) return;
      if (c !== ',') throw new ScanError();
      this.ws();
      if (this.peek() === close) {
        this.pos++;
        return;
      }
    }
  }

  callList(): PyCall[] {
    this.expect('[');
    const calls: PyCall[] = [];
    this.items(']', () => calls.push(this.call()));
    if (calls.length === 0) throw new ScanError(); // `[]` is not a tool call
    return calls;
  }

  /** Reads a Python identifier (letters, digits, `_`; not starting with a digit). */
  private identifier(): string {
    const start = this.pos;
    if (!isIdStart(this.peek())) throw new ScanError();
    this.pos++;
    while (isIdChar(this.peek())) this.pos++;
    return this.text.slice(start, this.pos);
  }

  /** Reads a run of at least one character that `ok` accepts. */
  private run(ok: (c: string) => boolean): string {
    const start = this.pos;
    while (ok(this.peek())) this.pos++;
    if (this.pos === start) throw new ScanError();
    return this.text.slice(start, this.pos);
  }

  /**
   * A call. Names are laxer than Python's, as OpenAI tool and parameter names are: the function name is
   * dot-separated runs of letters, digits, `_` and `-`; a keyword is any run up to whitespace or `=` without
   * quotes, brackets or commas (`user-id=1`), which a grammar writing the tool's own names may produce.
   */
  call(): PyCall {
    this.ws();
    let name = this.run(isNameChar);
    while (this.peek() === '.') {
      this.pos++;
      name += '.' + this.run(isNameChar);
    }
    this.ws();
    this.expect('(');
    const args: JsonObject = new Map();
    this.items(')', () => {
      const key = this.run(isKeywordChar);
      if (isQuote(this.peek())) throw new ScanError(); // a prefixed string: positional argument
      this.ws();
      this.expect('=');
      if (this.peek() === '=') throw new ScanError(); // `==`
      if (args.has(key)) throw new ScanError(); // Python: keyword argument repeated
      args.set(key, this.value(1));
    });
    return { name, args };
  }

  value(depth: number): JsonValue {
    if (depth > MAX_DEPTH) throw new ScanError();
    this.ws();
    const c = this.peek();
    if (c === '[') {
      this.pos++;
      const arr: JsonValue[] = [];
      this.items(']', () => arr.push(this.value(depth + 1)));
      return arr;
    }
    if (c === '(') return this.parenthesized(depth);
    if (c === '{') return this.braced(depth);
    if (isQuote(c)) return this.strings('');
    if (c === '-' || c === '+') {
      this.pos++;
      const v = this.value(depth + 1);
      if (!(v instanceof JsonNumber)) throw new ScanError();
      return c === '+' ? v : negate(v);
    }
    if ((c >= '0' && c <= '9') || c === '.') return this.number();
    if (isIdStart(c)) {
      const word = this.identifier();
      if (isQuote(this.peek())) return this.strings(word);
      if (Object.hasOwn(LITERAL_NAMES, word)) return LITERAL_NAMES[word];
      throw new ScanError(); // a variable, a nested call, ...
    }
    throw new ScanError();
  }

  /** `(x)` is x; `()`, `(x,)`, `(x, y)` are tuples, written as JSON arrays. */
  private parenthesized(depth: number): JsonValue {
    this.pos++;
    this.ws();
    if (this.peek() === ')') {
      this.pos++;
      return [];
    }
    const first = this.value(depth + 1);
    this.ws();
    if (this.peek() === ')') {
      this.pos++;
      return first;
    }
    this.expect(',');
    const arr: JsonValue[] = [first];
    this.items(')', () => arr.push(this.value(depth + 1)));
    return arr;
  }

  /** `{}` and `{k: v, ...}` are dicts; `{a, b}` is a set, written as a JSON array (as vLLM does). */
  private braced(depth: number): JsonValue {
    this.pos++;
    this.ws();
    if (this.peek() === '}') {
      this.pos++;
      return new Map();
    }
    const first = this.value(depth + 1);
    this.ws();
    if (this.peek() !== ':') {
      const arr: JsonValue[] = [first];
      if (this.peek() === '}') {
        this.pos++;
        return arr;
      }
      this.expect(',');
      this.items('}', () => arr.push(this.value(depth + 1)));
      return arr;
    }
    const obj: JsonObject = new Map();
    let key: JsonValue = first;
    for (;;) {
      this.expect(':');
      obj.set(dictKey(key), this.value(depth + 1));
      this.ws();
      const c = this.peek();
      this.pos++;
      if (c === '}') return obj;
      if (c !== ',') throw new ScanError();
      this.ws();
      if (this.peek() === '}') {
        this.pos++;
        return obj;
      }
      key = this.value(depth + 1);
      this.ws();
    }
  }

  private number(): JsonNumber {
    const start = this.pos;
    for (;;) {
      const c = this.peek();
      const prev = this.text[this.pos - 1];
      const hex = /^0[xX]/.test(this.text.slice(start, start + 2));
      if (/[0-9A-Za-z_.]/.test(c) || ((c === '+' || c === '-') && (prev === 'e' || prev === 'E') && !hex)) this.pos++;
      else break;
    }
    const raw = this.text.slice(start, this.pos).replace(/_/g, '');
    if (INT_RE.test(this.text.slice(start, this.pos))) {
      // Decimal with leading zeros (`07`) is a Python syntax error; read it as 7 like vLLM/SGLang do.
      const v = /^0[xob]/i.test(raw) ? BigInt(raw) : BigInt(raw.replace(/^0+(?=\d)/, ''));
      return new JsonNumber(v.toString());
    }
    if (FLOAT_RE.test(this.text.slice(start, this.pos))) {
      const n = Number(raw);
      if (!Number.isFinite(n)) throw new ScanError(); // 1e999 is inf: no JSON for it
      return new JsonNumber(JSON.stringify(n));
    }
    throw new ScanError();
  }

  /** One or more adjacent string literals (implicit concatenation); `prefix` was already read for the first. */
  private strings(prefix: string): string {
    let out = this.string(prefix);
    for (;;) {
      const save = this.pos;
      this.ws();
      const c = this.peek();
      if (isQuote(c)) {
        out += this.string('');
        continue;
      }
      if (isIdStart(c)) {
        const word = this.identifier();
        if (isQuote(this.peek())) {
          out += this.string(word);
          continue;
        }
      }
      this.pos = save;
      return out;
    }
  }

  private string(prefix: string): string {
    const p = prefix.toLowerCase();
    if (!STRING_PREFIXES.has(p) && p !== '') throw new ScanError();
    if (p.includes('b') || p.includes('f')) throw new ScanError(); // bytes / f-strings have no JSON value
    const raw = p.includes('r');
    const q = this.peek();
    this.pos++;
    let triple = false;
    if (this.peek() === q) {
      this.pos++;
      // `''` is empty unless a third quote follows
      if (this.peek() !== q) return '';
      this.pos++;
      triple = true;
    }
    const parts: string[] = [];
    for (;;) {
      const c = this.peek();
      if (c === q) {
        if (!triple) {
          this.pos++;
          return parts.join('');
        }
        if (this.text.startsWith(q + q + q, this.pos)) {
          this.pos += 3;
          return parts.join('');
        }
        // one or two quotes, then maybe the end: need to see what follows
        if (this.pos + 1 >= this.text.length || (this.text[this.pos + 1] === q && this.pos + 2 >= this.text.length)) {
          throw new ScanIncomplete();
        }
        parts.push(c);
        this.pos++;
        continue;
      }
      this.pos++;
      if (c !== '\\') {
        // Raw newlines in a one-quote string are a Python error; models write them, so they are kept.
        parts.push(c);
        continue;
      }
      const e = this.peek();
      this.pos++;
      if (raw) {
        parts.push(c, e); // raw strings keep the backslash, but it still protects the quote
        continue;
      }
      parts.push(this.escape(e));
    }
  }

  private escape(e: string): string {
    if (Object.hasOwn(SIMPLE_ESCAPES, e)) return SIMPLE_ESCAPES[e];
    if (e === '\n') return ''; // line continuation
    if (e === '\r') {
      if (this.peek() === '\n') this.pos++;
      return '';
    }
    if (e >= '0' && e <= '7') {
      let v = Number(e);
      for (let i = 0; i < 2 && this.peek() >= '0' && this.peek() <= '7'; i++) v = v * 8 + Number(this.text[this.pos++]);
      return String.fromCodePoint(v);
    }
    const hexLen = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0;
    if (hexLen) {
      let v = 0;
      for (let i = 0; i < hexLen; i++) {
        const d = parseInt(this.peek(), 16);
        if (Number.isNaN(d)) throw new ScanError();
        v = v * 16 + d;
        this.pos++;
      }
      if (v > 0x10ffff) throw new ScanError();
      return String.fromCodePoint(v);
    }
    if (e === 'N') throw new ScanError(); // \N{NAME}: no Unicode name table here
    return '\\' + e; // unknown escapes keep the backslash, as Python does
  }
}

function negate(n: JsonNumber): JsonNumber {
  if (n.text === '0') return n;
  return new JsonNumber(n.text.startsWith('-') ? n.text.slice(1) : '-' + n.text);
}

/** Dict keys become strings as json.dumps makes them: numbers by their text, True -> "true", None -> "null". */
function dictKey(k: JsonValue): string {
  if (typeof k === 'string') return k;
  if (k instanceof JsonNumber) return k.text;
  if (k === null) return 'null';
  if (typeof k === 'boolean') return k ? 'true' : 'false';
  throw new ScanError(); // lists and dicts are unhashable; tuples are not JSON keys
}
