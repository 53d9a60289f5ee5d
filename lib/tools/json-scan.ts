// A JSON value scanner for model output: strict JSON except that raw control characters are accepted inside
// strings (models write literal newlines in code arguments); numbers keep their digits (JsonNumber).
// Invariant: prefix-stable (scan.ts): running out of text anywhere is 'incomplete', never 'error'.
import { JsonNumber, jsonNumberText, type JsonObject, type JsonValue } from './json-value.js';
import { MAX_DEPTH, ScanError, ScanIncomplete, isWs, runScan, type ScanResult } from './scan.js';

/** Scans one JSON value starting at `pos` (leading whitespace allowed). */
export function scanJson(text: string, pos: number): ScanResult<JsonValue> {
  return runScan(() => {
    const s = new JsonScanner(text, pos);
    const value = s.value(0);
    return { value, end: s.pos };
  });
}

/** Parses a whole string as one JSON value (surrounding whitespace allowed); undefined when it is not exactly that. */
export function parseJsonText(text: string): JsonValue | undefined {
  const r = scanJson(text, 0);
  if (r.status !== 'done') return undefined;
  let p = r.end;
  while (p < text.length && isWs(text[p])) p++;
  return p === text.length ? r.value : undefined;
}

const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

class JsonScanner {
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

  value(depth: number): JsonValue {
    if (depth > MAX_DEPTH) throw new ScanError();
    this.ws();
    const c = this.peek();
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return this.string();
    if (c === 't') return this.word('true', true);
    if (c === 'f') return this.word('false', false);
    if (c === 'n') return this.word('null', null);
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    throw new ScanError();
  }

  private word<T extends JsonValue>(w: string, v: T): T {
    for (let i = 0; i < w.length; i++) {
      if (this.peek() !== w[i]) throw new ScanError();
      this.pos++;
    }
    return v;
  }

  private digits(): void {
    const c = this.peek();
    if (c < '0' || c > '9') throw new ScanError();
    while (this.pos < this.text.length && this.text[this.pos] >= '0' && this.text[this.pos] <= '9') this.pos++;
    // The number may go on with more digits: only a following character settles it.
    this.peek();
  }

  private number(): JsonNumber {
    const start = this.pos;
    if (this.peek() === '-') this.pos++;
    if (this.peek() === '0') {
      this.pos++;
      this.peek();
    } else this.digits();
    if (this.peek() === '.') {
      this.pos++;
      this.digits();
    }
    const e = this.peek();
    if (e === 'e' || e === 'E') {
      this.pos++;
      const sign = this.peek();
      if (sign === '+' || sign === '-') this.pos++;
      this.digits();
    }
    return new JsonNumber(jsonNumberText(this.text.slice(start, this.pos)));
  }

  private hex4(): number {
    let v = 0;
    for (let i = 0; i < 4; i++) {
      const d = parseInt(this.peek(), 16);
      if (Number.isNaN(d)) throw new ScanError();
      v = v * 16 + d;
      this.pos++;
    }
    return v;
  }

  string(): string {
    this.pos++; // opening quote
    const parts: string[] = [];
    let runStart = this.pos;
    for (;;) {
      const c = this.peek();
      if (c === '"') {
        parts.push(this.text.slice(runStart, this.pos));
        this.pos++;
        return parts.join('');
      }
      if (c !== '\\') {
        this.pos++;
        continue;
      }
      parts.push(this.text.slice(runStart, this.pos));
      this.pos++;
      const e = this.peek();
      this.pos++;
      if (e === 'u') parts.push(String.fromCharCode(this.hex4()));
      else if (e in ESCAPES) parts.push(ESCAPES[e]);
      else throw new ScanError();
      runStart = this.pos;
    }
  }

  private object(depth: number): JsonObject {
    this.pos++;
    const obj: JsonObject = new Map();
    this.ws();
    if (this.peek() === '}') {
      this.pos++;
      return obj;
    }
    for (;;) {
      this.ws();
      if (this.peek() !== '"') throw new ScanError();
      const key = this.string();
      this.ws();
      if (this.peek() !== ':') throw new ScanError();
      this.pos++;
      obj.set(key, this.value(depth + 1));
      this.ws();
      const c = this.peek();
      this.pos++;
      if (c === '}') return obj;
      if (c !== ',') throw new ScanError();
    }
  }

  private array(depth: number): JsonValue[] {
    this.pos++;
    const arr: JsonValue[] = [];
    this.ws();
    if (this.peek() === ']') {
      this.pos++;
      return arr;
    }
    for (;;) {
      arr.push(this.value(depth + 1));
      this.ws();
      const c = this.peek();
      this.pos++;
      if (c === ']') return arr;
      if (c !== ',') throw new ScanError();
    }
  }
}
